"""HTTP API and web page over the query module (issue 18).

    from rag_pipeline.serve import create_app, run
    run("127.0.0.1", 8000, lake="data/lake", tokens_file="tokens.json")   # what `rag serve` runs

Tokens: `python -m rag_pipeline.serve.tokens add --tokens tokens.json --name ann --clearance internal`.
"""

from rag_pipeline.serve.app import create_app, run

__all__ = ["create_app", "run"]

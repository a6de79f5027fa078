"""HTTP API and web page over the query module (issue 18).

    from rag_pipeline.serve import create_app, run
    run("127.0.0.1", 8000, lake="data/lake", tokens_file="tokens.json")   # what `rag serve` runs

Tokens: `python -m rag_pipeline.serve.tokens add --tokens tokens.json --name ann --clearance internal`.
The app is imported on first use, so `rag --help` (which registers `rag serve`) stays light.
"""

__all__ = ["create_app", "run"]


def __getattr__(name: str):
    if name in __all__:
        from rag_pipeline.serve import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

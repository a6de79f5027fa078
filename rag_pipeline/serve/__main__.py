"""`python -m rag_pipeline.serve --host 127.0.0.1 --port 8000 --tokens tokens.json [--lake DIR]`."""

from rag_pipeline.serve.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m rag_pipeline.serve --host 127.0.0.1 --port 8000 --tokens tokens.json [--lake DIR]`."""

from __future__ import annotations

import argparse
import sys

from rag_pipeline.config import default_lake_dir


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rag_pipeline.serve", description="serve search and cited answers over HTTP")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--lake", default=str(default_lake_dir()), help="lake folder (env RAG_LAKE_DIR, default data/lake)")
    parser.add_argument("--tokens", default=None, help="tokens file (env RAG_SERVE_TOKENS); make one with python -m rag_pipeline.serve.tokens add")
    parser.add_argument("--workers", type=int, default=4, help="threads for model and index calls (default 4)")
    parser.add_argument("--no-log-questions", action="store_true", help="keep question text out of the query log")
    parser.add_argument("--log-level", default="info")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from rag_pipeline.serve.app import run

    try:
        run(args.host, args.port, lake=args.lake, tokens_file=args.tokens, log_questions=not args.no_log_questions,
            workers=args.workers, log_level=args.log_level)
    except ValueError as exc:
        print(f"rag serve: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

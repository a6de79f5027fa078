"""`rag serve` / `python -m rag_pipeline.serve`: arguments and the command (`rag` wires it
with `register(sub)`, as it does eval)."""

from __future__ import annotations

import argparse
import sys

from rag_pipeline.config import default_lake_dir

HELP = "serve search and cited answers over HTTP (API, OpenAI-compatible chat, web page)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--lake", default=str(default_lake_dir()), help="lake folder (env RAG_LAKE_DIR, default data/lake)")
    p.add_argument(
        "--tokens", default=None,
        help="bearer tokens file (env RAG_SERVE_TOKENS); add one with python -m rag_pipeline.serve.tokens add --tokens FILE --name NAME",
    )
    p.add_argument("--workers", type=int, default=4, help="threads for model and index calls, per process (default 4)")
    p.add_argument("--processes", type=int, default=1,
                   help="server processes, each with its own model and index (~0.9 GB each); more than 1 for "
                        "throughput on several cores (default 1)")
    p.add_argument("--no-log-questions", action="store_true", help="keep question text out of the query log (<lake>/querylog)")
    p.add_argument("--log-level", default="info", help="uvicorn log level (default info)")


def cmd_serve(args) -> int:
    from rag_pipeline.serve.app import run

    try:
        run(args.host, args.port, lake=args.lake, tokens_file=args.tokens, log_questions=not args.no_log_questions,
            workers=args.workers, processes=args.processes, log_level=args.log_level)
    except ValueError as exc:
        print(f"rag serve: error: {exc}", file=sys.stderr)
        return 2
    return 0


def register(sub) -> None:
    """Add the `serve` subcommand to the `rag` argument parser."""
    p = sub.add_parser("serve", help=HELP)
    add_arguments(p)
    p.set_defaults(func=cmd_serve)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag_pipeline.serve", description=HELP)
    add_arguments(parser)
    return cmd_serve(parser.parse_args(argv))

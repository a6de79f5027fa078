"""Wait until N Celery workers answer a ping (scripts/cluster.sh up), or fail naming what is missing."""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args(argv)
    from rag_pipeline.cluster.celery_app import app

    deadline = time.monotonic() + args.timeout
    answered: list[str] = []
    while time.monotonic() < deadline:
        answered = sorted(name for reply in (app.control.ping(timeout=1.0) or []) for name in reply)
        if len(answered) >= args.workers:
            print(f"workers ready: {', '.join(answered)}")
            return 0
        time.sleep(0.5)
    print(f"only {len(answered)} of {args.workers} Celery workers answered within {args.timeout:.0f} s "
          f"({', '.join(answered) or 'none'}): see the worker logs", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())

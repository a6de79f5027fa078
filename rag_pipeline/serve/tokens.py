"""Manage the API's bearer tokens: `python -m rag_pipeline.serve.tokens add|revoke|list --tokens FILE`.

`add` prints the new token once and stores only its SHA-256 hash.
"""

from __future__ import annotations

import argparse
import json
import sys

from rag_pipeline.ingest.scan import SECURITY_LEVELS
from rag_pipeline.serve.auth import SCOPES, add_token, load_entries, revoke_token


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag_pipeline.serve.tokens", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["add", "revoke", "list"])
    parser.add_argument("--tokens", required=True, help="the tokens file (JSON; created if missing)")
    parser.add_argument("--name", help="a label for the token (re-adding a name replaces its token)")
    parser.add_argument("--user", default="", help="user id: sees documents this user owns")
    parser.add_argument("--group", action="append", help="access group, repeatable (default all-staff)")
    parser.add_argument("--department", action="append", help="department, repeatable")
    parser.add_argument("--clearance", default="internal", choices=list(SECURITY_LEVELS))
    parser.add_argument("--scope", action="append", choices=list(SCOPES), help="extra scope: admin sees debug fields")
    args = parser.parse_args(argv)
    if args.action == "list":
        for e in load_entries(__import__("pathlib").Path(args.tokens)):
            shown = {k: e.get(k) for k in ("name", "user", "groups", "clearance", "departments", "scopes")}
            print(json.dumps(shown, ensure_ascii=False))
        return 0
    if not args.name:
        parser.error("--name is required for add and revoke")
    if args.action == "revoke":
        if not revoke_token(args.tokens, args.name):
            print(f"no token named {args.name!r} in {args.tokens}", file=sys.stderr)
            return 1
        print(f"revoked {args.name}")
        return 0
    token = add_token(
        args.tokens, args.name, user=args.user, groups=tuple(args.group or ("all-staff",)), clearance=args.clearance,
        departments=tuple(args.department or ()), scopes=tuple(args.scope or ()),
    )
    print(token)
    print(f"(stored as a sha256 hash in {args.tokens}; this is the only time the token is shown)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Bearer tokens → principals. The principal of a request comes from its token, never from its body.

The tokens file (JSON) holds only SHA-256 hashes of the tokens, so a leaked file grants nothing:

    {"tokens": [
      {"name": "ann-laptop", "sha256": "<hex>", "user": "ann@corp.example",
       "groups": ["all-staff", "finance"], "clearance": "confidential", "departments": ["Finance"],
       "scopes": ["admin"]}
    ]}

`scopes` may hold "admin" (debug fields: per-arm ranks, scores and weights). The file is re-read
when it changes, so a token added or revoked takes effect without a restart. Create an entry with
`python -m rag_pipeline.serve.tokens add --tokens FILE --name NAME ...` (prints the token once).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipeline.query.filters import Principal

ADMIN_SCOPE = "admin"
SCOPES = (ADMIN_SCOPE,)
TOKEN_PREFIX = "rag_"


class AuthError(Exception):
    """status 401 (no or unknown token) or 403 (known token, missing scope)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Identity:
    """Who a token stands for: the principal that filters every search, plus its scopes."""

    name: str
    principal: Principal
    scopes: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_admin(self) -> bool:
        return ADMIN_SCOPE in self.scopes

    @property
    def principal_hash(self) -> str:
        """A stable pseudonym for logs: the same principal hashes alike, nothing readable is kept."""
        p = self.principal
        key = json.dumps([p.user, sorted(p.groups), p.clearance, sorted(p.departments)], ensure_ascii=False)
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def _identity(entry: dict) -> Identity:
    scopes = frozenset(entry.get("scopes", ()))
    unknown = scopes - set(SCOPES)
    if unknown:
        raise ValueError(f"token {entry.get('name')!r}: unknown scopes {sorted(unknown)} (known: {list(SCOPES)})")
    principal = Principal(
        user=entry.get("user", ""),
        groups=tuple(entry.get("groups", ("all-staff",))),
        clearance=entry.get("clearance", "internal"),
        departments=tuple(entry.get("departments", ())),
    )
    return Identity(name=entry.get("name", ""), principal=principal, scopes=scopes)


def load_entries(path: Path) -> list[dict]:
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    entries = data.get("tokens", []) if isinstance(data, dict) else data
    for entry in entries:
        digest = entry.get("sha256", "")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"{path}: token {entry.get('name')!r} needs a 64-hex-digit sha256 (tokens are stored hashed)")
    return entries


class TokenStore:
    """Looks tokens up by hash; re-reads the file when its size or modification time changes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple | None = None
        self._by_hash: dict[str, Identity] = {}
        self._refresh()
        if not self._by_hash:
            raise ValueError(
                f"no tokens in {self.path}: create one with `python -m rag_pipeline.serve.tokens add --tokens {self.path} --name NAME`"
            )

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp:
            return
        with self._lock:
            if stamp == self._stamp:
                return
            entries = load_entries(self.path) if stamp else []
            self._by_hash = {e["sha256"]: _identity(e) for e in entries}
            self._stamp = stamp

    def authenticate(self, authorization: str | None) -> Identity:
        """The identity of an `Authorization: Bearer <token>` header, or AuthError(401)."""
        if not authorization:
            raise AuthError(401, "missing_token", "send `Authorization: Bearer <token>`; ask an operator for a token")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError(401, "invalid_authorization", "the Authorization header must be `Bearer <token>`")
        self._refresh()
        identity = self._by_hash.get(hash_token(token))  # a dict lookup by a hash of the secret: no timing oracle on the token
        if identity is None:
            raise AuthError(401, "invalid_token", "unknown or revoked token")
        return identity

    def __len__(self) -> int:
        return len(self._by_hash)


def add_token(
    path: str | Path,
    name: str,
    *,
    user: str = "",
    groups: tuple[str, ...] = ("all-staff",),
    clearance: str = "internal",
    departments: tuple[str, ...] = (),
    scopes: tuple[str, ...] = (),
    token: str | None = None,
) -> str:
    """Append an entry (its hash only) to the tokens file and return the token, to be shown once."""
    path = Path(path)
    token = token or TOKEN_PREFIX + secrets.token_urlsafe(32)
    entry = {
        "name": name,
        "sha256": hash_token(token),
        "user": user,
        "groups": list(groups),
        "clearance": clearance,
        "departments": list(departments),
        "scopes": list(scopes),
    }
    _identity(entry)  # validates clearance and scopes before anything is written
    entries = [e for e in load_entries(path) if e.get("name") != name]  # re-adding a name replaces (revokes) its old token
    entries.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_entries(path, entries)
    return token


def revoke_token(path: str | Path, name: str) -> bool:
    path = Path(path)
    entries = load_entries(path)
    kept = [e for e in entries if e.get("name") != name]
    if len(kept) == len(entries):
        return False
    _write_entries(path, kept)
    return True


def _write_entries(path: Path, entries: list[dict]) -> None:
    """Write-then-rename (readers see the old file or the new one), owner-readable only."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"tokens": entries}, fh, indent=2, ensure_ascii=False)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)

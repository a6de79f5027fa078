"""Scan the raw folder: one record per document file, with its hash and sidecar metadata.

A sidecar is a JSON file named ``<file>.meta.json`` beside the document. It carries what the
file itself cannot: lifecycle status, security level, access groups, department, owner.
Files without a sidecar get the defaults below.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

SIDECAR_SUFFIX = ".meta.json"
STATUSES = ("draft", "ingested", "published", "withdrawn")
SECURITY_LEVELS = ("public", "internal", "confidential", "secret")


@dataclass(frozen=True)
class DocumentMetadata:
    title: str | None = None
    department: str = ""
    security_level: str = "internal"
    status: str = "published"
    access_groups: tuple[str, ...] = ("all-staff",)
    owner: str = ""
    language: str | None = None
    quarantine_release: bool = False  # operator accepts an ocr_low_confidence / no_text file (ingest/release.py)


@dataclass(frozen=True)
class RawFile:
    doc_id: str  # stable id of the document *location*: hash of its relative path
    source: str  # posix path relative to the raw folder
    path: Path
    size: int
    sha256: str
    metadata: DocumentMetadata = field(default_factory=DocumentMetadata)
    metadata_error: str | None = None  # set when the sidecar exists but is unusable

    def as_row(self) -> dict:
        row = asdict(self)
        row["path"] = str(self.path)
        row["metadata"] = asdict(self.metadata)
        return row


def doc_id_for(source: str) -> str:
    return hashlib.sha1(source.encode("utf-8")).hexdigest()[:16]


def file_sha256(path: Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def parse_sidecar(raw: dict) -> DocumentMetadata:
    """Validate a sidecar dict; raise ValueError with a message an operator can act on."""
    if not isinstance(raw, dict):
        raise ValueError("sidecar must be a JSON object")
    known = set(DocumentMetadata.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise ValueError(f"unknown sidecar keys {sorted(unknown)}; allowed: {sorted(known)}")
    values = dict(raw)
    if values.get("status", "published") not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {values['status']!r}")
    if values.get("security_level", "internal") not in SECURITY_LEVELS:
        raise ValueError(
            f"security_level must be one of {SECURITY_LEVELS}, got {values['security_level']!r}"
        )
    if not isinstance(values.get("quarantine_release", False), bool):
        raise ValueError("quarantine_release must be true or false")
    groups = values.get("access_groups", ["all-staff"])
    if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
        raise ValueError("access_groups must be a list of strings")
    values["access_groups"] = tuple(groups)
    return DocumentMetadata(**values)


def read_sidecar(path: Path) -> tuple[DocumentMetadata, str | None]:
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    if not sidecar.exists():
        return DocumentMetadata(), None
    try:
        return parse_sidecar(json.loads(sidecar.read_text(encoding="utf-8"))), None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        return DocumentMetadata(), f"{sidecar.name}: {exc}"


def scan_raw_folder(raw_dir: Path) -> list[RawFile]:
    """Every regular file under raw_dir except sidecars and hidden files, sorted by path.

    Symlinks are not followed: a link could point outside the folder people agreed to index.
    """
    if not raw_dir.is_dir():
        raise FileNotFoundError(f"raw folder {raw_dir} does not exist")
    records: list[RawFile] = []
    for root, dirs, files in os.walk(raw_dir, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(root) / name
            if name.startswith(".") or name.endswith(SIDECAR_SUFFIX) or path.is_symlink():
                continue
            source = path.relative_to(raw_dir).as_posix()
            metadata, error = read_sidecar(path)
            records.append(
                RawFile(
                    doc_id=doc_id_for(source),
                    source=source,
                    path=path.resolve(),
                    size=path.stat().st_size,
                    sha256=file_sha256(path),
                    metadata=metadata,
                    metadata_error=error,
                )
            )
    return records

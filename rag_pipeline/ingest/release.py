"""Operator release of a quarantined file: write ``"quarantine_release": true`` into its sidecar.

A file quarantined for ``ocr_low_confidence`` (or ``no_text``) may still be worth indexing:
an operator who has looked at it accepts its OCR text whatever the confidence. The decision
lives in the file's sidecar (``<file>.meta.json``) beside the document, so it is versioned
with the document's other metadata, survives re-indexing and is undone by editing the
sidecar. The next run re-triages the file from the parse cache (no re-OCR) and indexes it;
the document's ``warnings`` record that it was released and from which reason.

Only ``ocr_low_confidence`` and ``no_text`` (``RELEASABLE_REASONS``) are released; the flag
has no effect on an encrypted, corrupt, unsupported, too large or timed-out file.

Pure file operations, for the CLI (``rag quarantine release SOURCE``), the Dagster job
``release_quarantined_file_job`` (the UI's way to act on a quarantine) and notebooks;
:func:`release_quarantined` is the checked entry point both use.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rag_pipeline.ingest.scan import SIDECAR_SUFFIX, parse_sidecar
from rag_pipeline.ingest.triage import RELEASABLE_REASONS

__all__ = ["RELEASABLE_REASONS", "RELEASE_KEY", "release", "release_quarantined", "sidecar_path", "unrelease"]

RELEASE_KEY = "quarantine_release"


def sidecar_path(raw_dir: Path | str, source: str) -> Path:
    """The sidecar of ``source`` (a path relative to ``raw_dir``, as in the quarantine table).

    Raises ``ValueError`` for a source outside the raw folder or that names a sidecar, and
    ``FileNotFoundError`` when the document does not exist.
    """
    raw_dir = Path(raw_dir).resolve()
    rel = Path(source)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"source must be a path relative to the raw folder, got {source!r}")
    if rel.name.endswith(SIDECAR_SUFFIX):
        raise ValueError(f"{source!r} is a sidecar, not a document")
    document = raw_dir / rel
    if not document.is_file():
        raise FileNotFoundError(f"no document {source!r} under {raw_dir}")
    return document.with_name(document.name + SIDECAR_SUFFIX)


def _read(sidecar: Path) -> dict:
    if not sidecar.exists():
        return {}
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{sidecar}: not valid JSON ({exc}); fix it by hand first") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{sidecar}: must be a JSON object; fix it by hand first")
    return data


def _write(sidecar: Path, data: dict) -> None:
    parse_sidecar(dict(data))  # never write a sidecar that would quarantine its document
    fd, tmp = tempfile.mkstemp(prefix=f".{sidecar.name}.", dir=sidecar.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        os.replace(tmp, sidecar)  # readers see the old or the new sidecar, never half of one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def release(raw_dir: Path | str, source: str) -> Path:
    """Mark ``source`` released: its next indexing run accepts it despite low OCR confidence
    or no text. Creates the sidecar if there is none, keeps every other key of an existing
    one. Idempotent. Returns the sidecar's path.

    Raises ``ValueError`` when the existing sidecar is not valid (bad JSON, unknown key,
    bad status...): the file is then quarantined as ``invalid_metadata``, which a release
    cannot fix, and a hand-written sidecar is not overwritten.
    """
    sidecar = sidecar_path(raw_dir, source)
    data = _read(sidecar)
    parse_sidecar(dict(data))
    if data.get(RELEASE_KEY) is not True:
        _write(sidecar, {**data, RELEASE_KEY: True})
    return sidecar


def release_quarantined(lake_dir: Path | str, raw_dir: Path | str, source: str) -> dict:
    """Release ``source`` if the served index quarantined it for a reason a release overrides.

    Returns what was done (source, reason, detail, sidecar). Raises ``ValueError`` (not in
    the served quarantine, a reason a release cannot override, a bad sidecar) and
    ``FileNotFoundError`` (the document is gone) with a message an operator can act on.
    """
    from rag_pipeline.store.lake import Lake
    from rag_pipeline.store.summary import quarantine_rows

    rows = quarantine_rows(Lake(Path(lake_dir)))
    row = next((r for r in rows if r["source"] == source), None)
    if row is None:
        raise ValueError(f"{source} is not in the quarantine of the served index (see rag quarantine list)")
    if row["reason"] not in RELEASABLE_REASONS:
        raise ValueError(f"{source} is quarantined as {row['reason']}, which a release cannot override; fix the file")
    sidecar = release(raw_dir, source)
    return {"released": source, "reason": row["reason"], "detail": row["detail"], "sidecar": str(sidecar)}


def unrelease(raw_dir: Path | str, source: str) -> Path | None:
    """Undo :func:`release`: remove the key (and the sidecar, if nothing else is in it).
    Returns the sidecar's path, or None when there is no sidecar any more."""
    sidecar = sidecar_path(raw_dir, source)
    data = _read(sidecar)
    if RELEASE_KEY not in data:
        return sidecar if sidecar.exists() else None
    del data[RELEASE_KEY]
    if not data:
        sidecar.unlink()
        return None
    _write(sidecar, data)
    return sidecar

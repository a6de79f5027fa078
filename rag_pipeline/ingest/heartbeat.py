"""A parse's sign of life: :func:`beat` is called as each PDF page, each OCR'd frame and each
thousandth block is done.

A fixed time limit per file cannot tell a hung parser from a long document: at ~2.7 s of OCR a
page, every scanned PDF over ~45 pages passed the 120 s limit and was quarantined ``timeout``
on every run. The parse pool (pool.py) instead stops a file that goes its limit *without a
beat*, under a much larger cap on its whole time. In a worker, the pool names a file that each
beat touches (its mtime is the last beat, read by the parent); anywhere else :func:`beat` does
nothing. Safe from OCR threads: a beat is one ``utime``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from rag_pipeline.ingest import deadline

_path: str | None = None


def beat() -> None:
    """Record progress of the parse under way: for the pool (no-op outside a pool worker) and
    for a time limit running inside the parse (deadline.py: an e-mail's attachments)."""
    deadline.renew()
    if _path is not None:
        try:
            os.utime(_path)
        except OSError:  # the pool gave the file up (its scratch folder removed): nothing to tell
            pass


@contextmanager
def beating_into(path: str) -> Iterator[None]:
    """Beats of the block touch `path`; it is created now, so the parent's clock starts here
    (time spent queued does not count)."""
    global _path
    with open(path, "w"):
        pass
    _path = path
    try:
        yield
    finally:
        _path = None

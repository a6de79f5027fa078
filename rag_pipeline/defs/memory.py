"""Memory a finished step freed, handed back to the OS before the next step starts.

The default executor runs every step of a run in one process (the model loads once). Python's
allocator, the Arrow memory pool (mimalloc) and glibc's malloc keep freed memory for reuse, so
without this each step's peak RSS carries what the steps before it freed: the run's peak is the
sum of its steps' garbage, not the largest step.

A full collection walks every object the collector tracks, and most are the imported libraries'
(Dagster alone ~240k, torch and sentence-transformers ~370k more: 0.2–0.45 s a collection, 14
steps a run — a fifth of a no-op run at 10k documents). After a step that imported libraries,
what survives a full collection is frozen (`gc.freeze`): later collections skip it. Freezing only
then (two or three times a process) bounds what can stay uncollected to what was alive at those
few moments.

Returning pages also needs freed blocks to form whole pages. glibc serves a large block
(≥ 128 kB) from its own mapping, returned on free — but every such free raises that threshold to
the block's size (up to 32 MB), after which large blocks (a shard's strings, Arrow and Lance
buffers) come from the heap, between small long-lived ones, and stay there as holes no trim can
return: after a 1 % change's publish at 100k documents 680 MB of the heap was free yet held
(bench/README.md, "Every step under 2 GB at 100k"). The threshold is fixed at import (`mallopt`), which keeps
large blocks in their own mappings for the life of the process.

A terminate request (the UI's Terminate: SIGINT to the run process) that lands while the collector
runs finalizers is raised inside one of them, where Python swallows it ("Exception ignored in
...") and the run goes on: seen twice in one fresh-clone CI, the UI-terminated run ending SUCCESS.
The collection holds SIGINT/SIGTERM and delivers them after it, to the handler in place.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import pyarrow as pa


def _libc_function(name: str):
    """A glibc allocator function, or None where there is none (musl, macOS: their own policy stands)."""
    library = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(library), name) if library else None
    except (OSError, AttributeError):
        return None


_TRIM = _libc_function("malloc_trim")
M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
LARGE_BLOCK_BYTES = 128 * 1024  # glibc's initial threshold, kept from rising


def _keep_large_blocks_mapped() -> None:
    mallopt = _libc_function("mallopt")
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES)


_keep_large_blocks_mapped()


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


_MALLINFO2 = _libc_function("mallinfo2")
if _MALLINFO2 is not None:
    _MALLINFO2.restype = _MallInfo2


def heap_bytes() -> dict[str, int] | None:
    """glibc's heap now: bytes in use, free but held, in their own mappings (None without glibc ≥ 2.33).
    What bench/step_heap.py reports per step, and how the test sees the threshold hold."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return {"in_use": info.uordblks, "free": info.fordblks, "mapped": info.hblkhd}
_modules_frozen = 0  # len(sys.modules) at the last freeze
LIBRARY_MODULES = 100  # Dagster or torch import hundreds of modules; a stray lazy import is not worth a freeze


def release_freed_memory() -> None:
    """Collect garbage, then return the Arrow pool's and malloc's free pages to the OS."""
    global _modules_frozen
    with _interrupts_held():
        gc.collect()
    if len(sys.modules) >= _modules_frozen + LIBRARY_MODULES:  # libraries were imported since: their objects live on
        gc.freeze()
        _modules_frozen = len(sys.modules)
    release_pool_pages()
    if _TRIM is not None:
        _TRIM(0)


def release_pool_pages() -> None:
    """Return the Arrow pool's free pages (mimalloc keeps them for reuse): after each shard of a
    step, or a step over 40 shards keeps every shard's freed look-up buffers — a no-op's embedding
    step grew 6 MB a shard (bench/README.md, "Key hashes instead of key columns"). Milliseconds;
    no collection."""
    pa.default_memory_pool().release_unused()


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """SIGINT/SIGTERM received in the block are recorded, then raised again once it is over."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is not None:  # None: not installed from Python, left as it is
            previous[signum] = signal.signal(signum, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)


@dg.success_hook(name="release_freed_memory")
def release_memory_after_step(context: dg.HookContext) -> None:
    release_freed_memory()

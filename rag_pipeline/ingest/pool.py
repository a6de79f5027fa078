"""Parse many files at once, each in a worker process with a hard time limit.

One file must never cost the run: a parser that hangs (a pathological PDF, a tesseract
that never returns) is killed when it goes ``timeout_s`` without progress — a page read, a
frame OCR'd, a thousand blocks built (heartbeat.py) — or passes ``max_s`` in all, and its file
is quarantined as ``timeout``; a long document that keeps reading pages is not (a 300-page scan
takes ~15 minutes of OCR on one core). A worker that dies (segfault in a C library, the kernel's
OOM killer) costs its one file, quarantined as ``corrupt``, and so does a file that changes while
it is parsed; a file that vanished since the scan is ``unavailable``, a parse out of memory
``too_large``. :class:`OcrEngineError` (tesseract or poppler missing) is not a property of a file
and still fails the run.

Workers come from a pebble ``ProcessPool``: on a timeout pebble SIGTERMs the worker (and
SIGKILLs it if that is not enough). Each worker leads its own process group, and turns
SIGTERM into a SIGKILL of that whole group, so the tesseract and pdftoppm children it
started die with it instead of burning CPU for minutes after the file was given up.

Workers are started by a "forkserver" (a clean process that imported the parsers once),
never forked from the caller, which may hold torch/OpenMP and Dagster threads. As with any
non-fork start method, a script that calls this at import time needs the usual
``if __name__ == "__main__":`` guard (Dagster, pytest and the ``rag`` command have one).

Pure: the caller passes paths and limits and gets outcomes back; nothing is cached here.
Outcomes of :func:`is_transient` failures (timeouts, dead workers, out of memory, files
that vanished or changed) must not be cached: a later run with a larger limit, or on a quieter machine, should try
again.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.forkserver
import os
import queue
import resource
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from pebble import ProcessExpired, ProcessPool

from rag_pipeline.faults import failpoint
from rag_pipeline.ingest import heartbeat
from rag_pipeline.ingest.document import ParsedDocument, TransientFailure, UnreadableDocument
from rag_pipeline.ingest.ocr import OcrEngineError

Outcome = ParsedDocument | UnreadableDocument
ParseFn = Callable[[Path], ParsedDocument]

_PRELOAD = ["rag_pipeline.ingest.parsers"]
_WATCH_S = 0.25  # how often the parent looks at running files' last beats


__all__ = ["ParsePool", "TransientFailure", "default_workers", "is_transient", "ocr_threads_per_worker", "parse_many"]


def is_transient(outcome: Outcome) -> bool:
    """Must this outcome stay out of the parse cache? (Says nothing about the file's bytes.)"""
    return isinstance(outcome, TransientFailure) or (
        isinstance(outcome, UnreadableDocument) and outcome.reason == "timeout"
    )


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def ocr_threads_per_worker(workers: int) -> int:
    """Pages of one scanned PDF OCR'd at once inside a worker: the CPUs left per worker
    (1 when there is a worker per CPU), so the pool never runs more tesseracts than CPUs."""
    return max(1, min(4, (os.cpu_count() or 1) // max(1, workers)))


def _init_worker(ocr_threads: int, memory_mb: int | None = None) -> None:
    from rag_pipeline.ingest import pdf

    pdf.OCR_WORKERS = ocr_threads
    if memory_mb:  # allocations past the cap raise MemoryError: the file becomes too_large
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    os.setpgrp()  # children (tesseract, pdftoppm) join this group: one kill stops them all

    def _kill_group(signum, frame):  # noqa: ARG001
        os.killpg(os.getpgrp(), signal.SIGKILL)

    signal.signal(signal.SIGTERM, _kill_group)


def _stamp(path: Path) -> tuple | None:
    try:
        st = path.lstat()  # a symbolic link is judged as itself (the parser refuses it)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _parse_in_worker(path: Path, parse: ParseFn, expected_sha256: str | None, beats: str) -> tuple:
    """Runs in the worker; its beats (the clock starting now) touch the file ``beats`` (heartbeat.py)."""
    with heartbeat.beating_into(beats):
        return _parse_checked(path, parse, expected_sha256)


def _parse_checked(path: Path, parse: ParseFn, expected_sha256: str | None) -> tuple:
    """Returns a picklable tuple: UnreadableDocument does not survive pickling (its constructor
    takes two arguments), and a ParsedDocument is plain data.

    A file that changed while it was parsed (still being copied in, edited, replaced) gives
    an outcome of no particular version of it: that is reported instead, never cached. So is
    a file that is gone, or whose content is no longer the ``expected_sha256`` the scan saw
    (the caller caches the outcome under that content's key)."""
    before = _stamp(path)
    if before is None:
        return ("transient", "unavailable", "the file vanished after the scan (deleted or moved); the next run looks again")
    if expected_sha256 is not None:
        from rag_pipeline.ingest.scan import content_sha256

        try:
            now = content_sha256(path)
        except OSError:
            now = None
        if now != expected_sha256:
            return ("transient", "unavailable", "the file changed after the scan; the next run parses its new content")
    message = _parse_message(path, parse)
    if message[0] != "transient" and _stamp(path) != before:
        return ("changed",)
    return message


def _parse_message(path: Path, parse: ParseFn) -> tuple:
    try:
        return ("parsed", parse(path))
    except TransientFailure as exc:
        return ("transient", exc.reason, exc.detail)
    except UnreadableDocument as exc:
        return ("unreadable", exc.reason, exc.detail)
    except OcrEngineError:
        raise  # travels back pickled and is re-raised by the caller
    except MemoryError as exc:
        return ("transient", "too_large", f"out of memory while parsing ({exc}); not cached, a later run retries it")
    except Exception as exc:  # a parser bug costs one file, never the run
        return ("unreadable", "corrupt", f"{type(exc).__name__}: {exc}"[:500])


def _from_wire(message: tuple) -> Outcome:
    if message[0] == "parsed":
        return message[1]
    if message[0] == "changed":
        return TransientFailure(
            "corrupt", "the file changed while it was being parsed (still being written?); the next run parses it again"
        )
    if message[0] == "transient":
        return TransientFailure(message[1], message[2])
    return UnreadableDocument(message[1], message[2])


def _stalled_outcome(timeout_s: float) -> TransientFailure:
    return TransientFailure(
        "timeout",
        f"parsing made no progress (no page, picture or 1,000 blocks done) within the {timeout_s:g} s limit and was "
        f"stopped; raise parse_timeout_s (RAG_PARSE_TIMEOUT_S) or split the file, then re-run",
    )


def _over_cap_outcome(max_s: float) -> TransientFailure:
    return TransientFailure(
        "timeout",
        f"parsing was still going after the {max_s:g} s cap on one file and was stopped; raise "
        f"parse_max_s (RAG_PARSE_MAX_S) or split the file, then re-run",
    )


def _cancel_stalled(futures: Mapping, timeout_s: float) -> None:
    """Cancel each running parse (future -> (key, its heartbeat file)) whose last beat is over
    `timeout_s` old; pebble then stops its worker and the worker's process group."""
    now = time.time()
    for future, (_, beats) in futures.items():
        if future.running():  # started (queued ones have no clock) and not done
            try:
                stalled = now - os.stat(beats).st_mtime > timeout_s
            except OSError:  # the worker has not created it yet
                stalled = False
            if stalled:
                future.cancel()


def _expired_outcome(exc: ProcessExpired) -> TransientFailure:
    code = exc.exitcode
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return TransientFailure(
        "corrupt",
        f"the parser process died ({how}), e.g. out of memory or a crash in a native "
        f"library; re-run to retry, or fix/convert the file",
    )


class ParsePool:
    """Worker processes that parse batches of files, started once and kept across batches.

    A step parses its shards one at a time (its memory is one shard's); starting a pool per shard
    cost ~0.2 s each in worker start-up and pebble's shut-down polling — 6 of the 9 s that
    parsing 100 changed files over 34 shards took (bench/README.md). Workers start on the first
    batch that has files, ``workers`` of them (default one per CPU). ``ocr_threads`` (pages of one
    scanned PDF OCR'd at once in a worker) defaults to :func:`ocr_threads_per_worker`;
    ``memory_mb`` caps each worker's address space (``None``: no cap). A worker killed at its
    time limit or dead of a crash is replaced by pebble; anything else raised while a batch runs
    stops the pool (its busy workers' process groups die with them) and the next batch starts a
    new one. Use as a context manager: leaving it stops the workers.
    """

    def __init__(self, *, workers: int | None = None, ocr_threads: int | None = None, memory_mb: int | None = None):
        self.workers = max(1, workers or default_workers())
        self._ocr_threads, self._memory_mb = ocr_threads, memory_mb
        self._pool: ProcessPool | None = None

    def __enter__(self) -> "ParsePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()
            pool.join()

    def _stop(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.stop()  # SIGTERMs busy workers: their process groups die with them
            pool.join()

    def _started(self) -> ProcessPool:
        if self._pool is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(_PRELOAD)
            threads = self._ocr_threads or ocr_threads_per_worker(self.workers)
            self._pool = ProcessPool(max_workers=self.workers, initializer=_init_worker, initargs=(threads, self._memory_mb), context=context)
        return self._pool

    def parse(
        self,
        paths: Mapping[str, Path],
        *,
        ocr_lang: str,
        max_bytes: int,
        timeout_s: float | None = 120.0,
        max_s: float | None = None,
        parse: ParseFn | None = None,
        expected_sha256: Mapping[str, str] | None = None,
        on_result: Callable[[str], None] | None = None,
    ) -> dict[str, Outcome]:
        """Parse every ``key -> path``; return ``key -> outcome``.

        Each worker parses one file at a time; a file that goes ``timeout_s`` seconds of its own
        time (queueing does not count) without a beat (heartbeat.py: a page or frame done), or
        runs ``max_s`` in all, is killed and becomes a ``timeout`` outcome (``None``: no such
        limit). ``parse`` replaces :func:`parse_file` (a test seam; it must be
        picklable, i.e. a module-level function or a partial of one). ``expected_sha256``
        (``key -> the sha256 the scan saw``) makes a worker check the content before parsing: a
        file that changed since gives a transient outcome instead of one cached under the old
        content's key. ``on_result(key)`` is called as each outcome comes back (progress).
        Raises :class:`OcrEngineError` if any file hits it, after stopping the pool.
        """
        if not paths:
            return {}
        from rag_pipeline.ingest.parsers import parse_file

        if parse is None:
            parse = functools.partial(parse_file, ocr_lang=ocr_lang, max_bytes=max_bytes)
        cap = max(max_s, timeout_s or 0) if max_s else None
        outcomes: dict[str, Outcome] = {}
        # Beat files live in a scratch folder removed only after the pool is stopped on an error:
        # queued files go on starting (each creates its beat file) until then.
        scratch = tempfile.mkdtemp(prefix="rag-parse-beats-")
        try:
            pool = self._started()
            expected = expected_sha256 or {}
            futures = {}
            for n, (key, path) in enumerate(paths.items()):
                beats = os.path.join(scratch, str(n))
                args = (Path(path), parse, expected.get(key), beats)
                futures[pool.schedule(_parse_in_worker, args=args, timeout=cap)] = (key, beats)
            finished: queue.SimpleQueue = queue.SimpleQueue()
            for future in futures:  # outcomes in the order they finish: progress moves with the work
                future.add_done_callback(finished.put)
            watched = time.monotonic()
            for _ in range(len(futures)):
                future = None
                while future is None:
                    try:
                        future = finished.get(timeout=_WATCH_S)
                    except queue.Empty:
                        pass
                    if timeout_s and time.monotonic() - watched >= _WATCH_S:
                        watched = time.monotonic()
                        _cancel_stalled(futures, timeout_s)
                key = futures[future][0]
                try:
                    outcomes[key] = _from_wire(future.result())
                except CancelledError:  # cancelled by _cancel_stalled
                    outcomes[key] = _stalled_outcome(timeout_s or 0)
                except FutureTimeout:
                    outcomes[key] = _over_cap_outcome(cap or 0)
                except ProcessExpired as exc:
                    outcomes[key] = _expired_outcome(exc)
                failpoint("parse")
                if on_result is not None:
                    on_result(key)
        except BaseException:
            self._stop()
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return {key: outcomes[key] for key in paths}


def parse_many(paths: Mapping[str, Path], *, workers: int | None = None, ocr_threads: int | None = None,
               memory_mb: int | None = None, **options) -> dict[str, Outcome]:
    """One batch through its own :class:`ParsePool` (never more workers than files); ``options``
    are :meth:`ParsePool.parse`'s."""
    if not paths:
        return {}
    n = max(1, min(workers or default_workers(), len(paths)))
    with ParsePool(workers=n, ocr_threads=ocr_threads, memory_mb=memory_mb) as pool:
        return pool.parse(paths, **options)


def stop_parse_server() -> None:
    """Stop the forkserver that holds the imported parsers (~200 MB) once parsing is over.

    Otherwise it lives as long as the process: every later step of an in-process run (chunking,
    embedding, the publish) carried it. The next parse_many starts a new one. There is no public
    way to stop it; multiprocessing's own tests use ForkServer._stop, and without it nothing stops.
    """
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is not None:
        stop()

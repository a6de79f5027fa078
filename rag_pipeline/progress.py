"""Progress of the long steps of an index run (parse, chunk, fingerprint, embed, write).

One :class:`Progress` per step: the step's loop calls :meth:`Progress.advance` as files or
chunks are done and :meth:`Progress.close` at the end (or uses it as a context manager). It
reports the same count, rate and ETA to up to two places:

* the terminal of a `rag index` run (stderr; stdout stays the summary's), in the mode the CLI
  chose with :func:`terminal` before running the job:

  - ``tty``: a tqdm bar per step (stderr is a terminal);
  - ``plain``: one line at most every ``interval_s`` (10 s) and one at the end of the step,
    e.g. ``parse: 812/3000 files, 41.2 files/s, eta 53 s`` (stderr is not a terminal and
    ``--progress`` or ``RAG_PROGRESS=1`` asked for it);
  - ``off``: nothing (``--quiet``; and by default when stderr is not a terminal, so a log file
    or a test that reads stderr sees only warnings and errors).

  Runs not started by `rag index` (the UI, the daemon) print nothing to the terminal unless
  ``RAG_PROGRESS=1`` is set, which gives them ``plain`` lines in their compute logs.

* Dagster's run log (``context.log.info``), always, throttled to a line per ``log_interval_s``
  (10 s) per step plus the step's last line: operators watching a UI-launched run see counts.

Pure apart from the output: time comes from an injectable clock, so rate and ETA are testable.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

MODES = ("off", "plain", "tty")
INTERVAL_S = 10.0

_terminal: dict = {"mode": None, "stream": None, "ncols": None}


def choose_mode(*, quiet: bool = False, requested: bool = False, stream: TextIO | None = None) -> str:
    """The terminal mode for a `rag index` run: off when quiet, bars on a terminal, plain lines
    elsewhere only when asked for (``--progress`` or ``RAG_PROGRESS=1``), otherwise off.

    Call it before anything redirects file descriptor 2 (the CLI's interrupt handling does)."""
    from rag_pipeline.config import progress_requested

    stream = sys.stderr if stream is None else stream
    if quiet:
        return "off"
    try:
        if stream.isatty():
            return "tty"
    except (AttributeError, ValueError, OSError):
        pass
    return "plain" if requested or progress_requested() else "off"


@contextmanager
def terminal(mode: str, *, ncols: int | None = None) -> Iterator[None]:
    """While the block runs, steps report to this process's file descriptor 2 in ``mode``.

    The stream is a duplicate of fd 2 as it is now, so Dagster's per-step capture of fd 2
    (a file tailed back to the terminal, which loses a step's last second) does not delay or
    drop progress lines; whatever fd 2 is now (the CLI's interrupt-aware relay) still applies.
    ``ncols``: the terminal's width, measured before fd 2 became a pipe."""
    if mode not in MODES:
        raise ValueError(f"progress mode must be one of {MODES}, got {mode!r}")
    previous = dict(_terminal)
    stream = None
    if mode != "off":
        try:
            sys.stderr.flush()
            stream = os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace", buffering=1)
        except (OSError, ValueError):
            mode = "off"
    _terminal.update(mode=mode, stream=stream, ncols=ncols)
    try:
        yield
    finally:
        _terminal.clear()
        _terminal.update(previous)
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


def terminal_width() -> int | None:
    """The width of the terminal on fd 2 (None if it is not one): measure before redirecting it."""
    try:
        return os.get_terminal_size(2).columns
    except OSError:
        return None


def _default_mode() -> str:
    if _terminal["mode"] is not None:
        return _terminal["mode"]
    from rag_pipeline.config import progress_requested

    return "plain" if progress_requested() else "off"


def duration(seconds: float) -> str:
    """53 s, 4 min 07 s, 2 h 05 min."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress:
    """Counts of one step: ``advance(n)`` as work is done, ``close()`` once at the end."""

    def __init__(
        self,
        step: str,
        total: int | None,
        unit: str = "files",
        *,
        log: Callable[[str], None] | None = None,
        mode: str | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = INTERVAL_S,
        log_interval_s: float = INTERVAL_S,
        note: str = "",
    ):
        self.step, self.total, self.unit = step, total, unit
        self.note = note  # what the count leaves out, e.g. "812 from the parse cache"
        self.done = 0
        self.closed = False
        self._log = log
        self._clock = clock
        self._started = clock()
        self._interval_s, self._log_interval_s = interval_s, log_interval_s
        self._last_line = self._last_log = self._started
        self.mode = mode if mode is not None else _default_mode()
        self._stream = stream if stream is not None else (_terminal["stream"] or sys.stderr)
        self._bar = None
        if self.mode == "tty":
            self._bar = _tqdm_bar(step, total, unit, self._stream, _terminal["ncols"])
            if note:
                self._bar.set_postfix_str(note, refresh=False)

    # ---------------------------------------------------------------- the numbers

    @property
    def elapsed_s(self) -> float:
        return max(0.0, self._clock() - self._started)

    @property
    def rate(self) -> float | None:
        """Units per second since the step started (None before any time has passed)."""
        elapsed = self.elapsed_s
        return self.done / elapsed if elapsed > 0 else None

    @property
    def eta_s(self) -> float | None:
        rate = self.rate
        if self.total is None or not rate:
            return None
        return max(0, self.total - self.done) / rate

    def _count(self) -> str:
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        return f"{count} {self.unit}"

    def line(self, final: bool = False) -> str:
        """``parse: 812/3000 files, 41.2 files/s, eta 53 s`` (``, done in 72 s`` at the end)."""
        parts = [f"{self.step}: {self._count()}"]
        rate = self.rate
        if rate is not None and self.done:
            parts.append(f"{rate:.1f} {self.unit}/s")
        if final:
            parts.append(f"done in {duration(self.elapsed_s)}")
        elif self.eta_s is not None:
            parts.append(f"eta {duration(self.eta_s)}")
        return ", ".join(parts) + (f" ({self.note})" if self.note else "")

    # ---------------------------------------------------------------- reporting

    def advance(self, n: int = 1) -> None:
        if self.closed or n <= 0:
            return
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        now = self._clock()
        if self.mode == "plain" and now - self._last_line >= self._interval_s:
            self._last_line = now
            self._write(self.line())
        if self._log is not None and now - self._last_log >= self._log_interval_s:
            self._last_log = now
            self._log(self.line())

    def close(self) -> None:
        """The step's last line (every mode); idempotent."""
        self._finish(self.line(final=True))

    def stop(self) -> None:
        """The step failed: its bar is closed, a ``stopped at`` line logged; no ``done`` line."""
        note = f" ({self.note})" if self.note else ""
        self._finish(f"{self.step}: stopped at {self._count()} after {duration(self.elapsed_s)}{note}")

    def _finish(self, line: str) -> None:
        if self.closed:
            return
        self.closed = True
        if self._bar is not None:
            self._bar.close()
        elif self.mode == "plain":
            self._write(line)
        if self._log is not None:
            self._log(line)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.close()
        elif issubclass(exc_type, Exception):
            self.stop()
        else:  # an interrupt unwinding the run: the CLI prints its one line, nothing else
            self.closed = True
            if self._bar is not None:
                self._bar.disable = True
        return False

    def _write(self, line: str) -> None:
        try:
            self._stream.write(line + "\n")
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth a failed run
            self.mode = "off"


def _tqdm_bar(step: str, total: int | None, unit: str, stream: TextIO, ncols: int | None):
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: bars live only while their step runs
    return tqdm(
        total=total, desc=step, unit=f" {unit}", file=stream, ncols=ncols or None, dynamic_ncols=False,
        mininterval=0.2, leave=True, disable=False, smoothing=0.1,
        # "41.20 files/s" even when slower than one a second (tqdm would say "1.71s/ files")
        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt}{unit} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]",
    )

"""A time limit on part of one file's parse (an e-mail's attachments), so the file's own text is
never lost to what it carries: past it, OCR calls give up at once (ocr.py asks `remaining`) and,
on the main thread, a timer interrupts the Python code still running (a hung parser). The limit
is on time *without progress*: each heartbeat (a page read, a picture OCR'd) starts it again, so
a long scan attached is read whole on a slow machine as on a fast one. One limit at a time: a
worker parses one file at a time.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_until: float | None = None
_span = 0.0  # the limit's length, for renew
_armed = False  # whether the limit set the process's timer


class TimeLimitPassed(BaseException):
    """The part of the parse under `time_limit` ran past it. Not an Exception, as KeyboardInterrupt
    is not: a parser's `except Exception` (one bad page must not lose the others) must not swallow
    it and go on unlimited."""


def remaining(default: float) -> float:
    """Seconds a call may take: `default`, or less while a limit runs (0 once it has passed)."""
    if _until is None:
        return default
    return max(0.0, min(default, _until - time.monotonic()))


def _interrupt(signum, frame):  # type: ignore[no-untyped-def]  # noqa: ARG001
    raise TimeLimitPassed("the time limit passed")


def renew() -> None:
    """Progress was made (heartbeat.beat): the limit running, if any, starts again."""
    global _until
    if _until is not None:
        _until = time.monotonic() + _span
        if _armed:  # process-wide: may be set from an OCR thread; the signal reaches the main one
            signal.setitimer(signal.ITIMER_REAL, max(0.001, _span))


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Run the block under a limit of `seconds` without progress (see renew); past it,
    TimeLimitPassed is raised in it."""
    global _until, _span, _armed
    started = time.monotonic()
    _span = max(0.0, seconds)
    _until = started + _span
    timer = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    outer = signal.getitimer(signal.ITIMER_REAL)[0] if timer else 0.0  # a timer someone else set (pytest-timeout)
    timer = timer and not (outer and outer <= seconds)  # theirs comes first: leave it be
    previous = signal.signal(signal.SIGALRM, _interrupt) if timer else None
    if timer:
        signal.setitimer(signal.ITIMER_REAL, max(0.001, seconds))
    _armed = timer
    try:
        yield
    finally:
        _armed = False
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer:  # theirs, less the time spent here
                signal.setitimer(signal.ITIMER_REAL, max(0.001, outer - (time.monotonic() - started)))
        _until = None

"""A terminate request that lands while the step hook collects garbage is not lost."""

from __future__ import annotations

import os
import signal

import pytest

from rag_pipeline.defs.memory import release_freed_memory


class Interrupted(BaseException):
    """What Dagster's handler raises while a step or hook runs (DagsterExecutionInterruptedError)."""


class _SignalsWhenCollected:
    def __init__(self):
        self.cycle = self  # only the cyclic collector frees it, inside gc.collect()

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)  # the run process's termination thread does this


def test_a_sigint_during_the_collection_is_raised_after_it_not_swallowed_by_a_finalizer():
    def raising(signum, frame):
        raise Interrupted()

    previous = signal.signal(signal.SIGINT, raising)
    try:
        _SignalsWhenCollected()
        with pytest.raises(Interrupted):  # raised inside __del__ it would be "Exception ignored" and lost
            release_freed_memory()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signal.getsignal(signal.SIGINT) is previous

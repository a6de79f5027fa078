"""Large blocks stay in their own mappings after a large free (defs/memory.py): freed, they leave
the process instead of becoming heap holes no trim returns."""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest

from rag_pipeline.defs.memory import LARGE_BLOCK_BYTES  # importing it fixes the threshold


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mapped_bytes():
    """Bytes glibc currently serves from their own mappings (mallinfo2().hblkhd)."""
    try:
        mallinfo2 = ctypes.CDLL(ctypes.util.find_library("c")).mallinfo2
    except (OSError, AttributeError, TypeError):
        pytest.skip("not glibc >= 2.33")
    mallinfo2.restype = _MallInfo2
    return lambda: mallinfo2().hblkhd


def test_a_block_over_the_threshold_is_mapped_even_after_a_larger_one_was_freed():
    mapped = _mapped_bytes()
    large = bytearray(8 << 20)
    del large  # glibc's own policy would now serve blocks under 8 MB from the heap
    before = mapped()
    block = bytearray(4 * LARGE_BLOCK_BYTES)
    assert mapped() - before >= 4 * LARGE_BLOCK_BYTES
    del block
    assert mapped() - before < 4 * LARGE_BLOCK_BYTES  # returned to the OS on free, not kept as a hole

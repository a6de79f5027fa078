"""Shard steps of one index write the lake's caches from several processes at once."""

from __future__ import annotations

import subprocess
import sys

import lancedb

from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake

WRITER = """
import sys
from rag_pipeline.store.lake import Lake
lake, who = Lake(sys.argv[1]), sys.argv[2]
for batch in range(12):
    # half the keys are shared by every writer (identical files in two shards), half are its own
    lake.add_parses({f"{who}-{batch}-{i}" if i % 2 else f"shared-{batch}-{i}": f"{who}" for i in range(40)})
"""


def test_three_processes_fill_a_new_cache_table_at_once_and_lose_nothing(tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"w{n}"], stderr=subprocess.PIPE, text=True)
               for n in range(3)]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], errors
    keys = lancedb.connect(str(tmp_path)).open_table(s.PARSE_CACHE).to_arrow().column("cache_key").to_pylist()
    expected = {f"w{n}-{b}-{i}" for n in range(3) for b in range(12) for i in range(1, 40, 2)}
    expected |= {f"shared-{b}-{i}" for b in range(12) for i in range(0, 40, 2)}
    assert set(keys) == expected  # none lost
    # a shared key may be stored twice (two writers inserted it at once); a look-up reads it once
    assert {k for k in keys if keys.count(k) > 1} <= {k for k in expected if k.startswith("shared-")}
    found = Lake(tmp_path)._lookup(s.PARSE_CACHE, sorted(expected), ["cache_key", "outcome"])
    assert sorted(found.column("cache_key").to_pylist()) == sorted(expected)

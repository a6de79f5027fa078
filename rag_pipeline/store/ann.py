"""When the chunks table gets an approximate (ANN) vector index, and with which parameters.

Pure policy; the numbers come from bench/scale.py (synthetic 384-d chunks, 2 shared cores).
Below `min_rows` LanceDB's flat scan is exact and fast enough, so an index would only cost build
time and recall. Above it, IVF_SQ: LanceDB advises IVF indexes over the HNSW ones for filtered
search (every search here carries the permission pre-filter), and at 100k chunks IVF_SQ built in
12 s where IVF_PQ took 160 s (PQ codebook training), at the same latency and recall@10 = 1.0.
Partitions ~ sqrt(rows) (LanceDB's default); `refine_factor` re-scores the shortlist with the
full-precision vectors. Exactly `nprobes` partitions are searched: letting LanceDB widen the
search for narrow filters (maximum_nprobes > nprobes) cost every query, 15 -> 70 ms at 1M chunks;
the dense arm instead falls back to exact search when a narrow filter leaves too few rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

EXACT = "exact"
INDEX_TYPE = "IVF_SQ"
DEFAULT_MIN_ROWS = 50_000  # exact p95 here: vector arm 36 ms, hybrid 47 ms; at 100k 89 / 77 ms
MIN_TRAINABLE_ROWS = 1_000  # fewer rows than this make partitions of a handful of vectors


@dataclass(frozen=True)
class AnnPolicy:
    min_rows: int = DEFAULT_MIN_ROWS
    nprobes: int = 20
    refine_factor: int = 5

    def __post_init__(self):
        if self.min_rows < 0:
            raise ValueError(f"min_rows must be >= 0, got {self.min_rows}")
        if self.nprobes < 1 or self.refine_factor < 1:
            raise ValueError(f"nprobes and refine_factor must be >= 1, got {self.nprobes}, {self.refine_factor}")


def vector_index_plan(n_rows: int, policy: AnnPolicy) -> dict:
    """What the chunks table gets: {"kind": "exact"} or the ANN index with its build/search params.

    The plan is recorded in the generation manifest, so readers search the way it was built.
    """
    if n_rows < max(policy.min_rows, MIN_TRAINABLE_ROWS):
        return {"kind": EXACT, "rows": n_rows}
    partitions = max(1, round(math.sqrt(n_rows)))
    return {
        "kind": INDEX_TYPE,
        "rows": n_rows,
        "metric": "cosine",
        "num_partitions": partitions,
        "nprobes": min(policy.nprobes, partitions),
        "refine_factor": policy.refine_factor,
    }

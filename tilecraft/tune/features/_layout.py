"""The columns of a per-store feature row, in order, and where each group starts.

Every value is a float; counts, sizes and extents are stored as ``log2(1 + x)`` so rows of
small and huge programs are on one scale. The layout is versioned: a saved cost model records
:data:`FEATURE_VERSION` and refuses rows of another layout.
"""

from __future__ import annotations

FEATURE_VERSION = 1
"""Bumped whenever a column is added, removed or changes meaning."""

ARITH = (
    "float_add_sub",
    "float_mul",
    "float_div_mod",
    "float_min_max",
    "float_cmp",
    "float_math_call",
    "int_add_sub",
    "int_mul",
    "int_div_mod",
    "int_cmp_min_max",
    "bool_op",
    "select",
    "cast",
)
"""Operations of one store, each counted once per execution (weighted by trip counts)."""

LOOP_KINDS = ("parallel", "vectorize", "unroll")
LOOP_STATS = ("num", "prod", "innermost_len", "innermost_pos")
THREAD_AXES = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread",
)
MAX_BUFFERS = 5
"""Buffers described per store (the store's own buffer and its loads, most bytes first)."""
BUFFER_STATS = (
    "read",
    "write",
    "read_write",
    "bytes",
    "unique_bytes",
    "lines",
    "unique_lines",
    "reuse_loop",
    "reuse_serial",
    "reuse_none",
    "reuse_distance",
    "reuse_count",
    "stride",
)
CURVE_POINTS = 10
"""Samples of the arithmetic-intensity curve (floating-point ops per byte, outer to inner)."""
ALLOC = ("num_alloc", "alloc_bytes", "shared_bytes", "local_bytes")
OUTER = ("num_loops", "outer_prod", "outermost_extent", "num_guards", "auto_unroll", "empty")


def _names() -> tuple[str, ...]:
    names = [f"arith.{a}" for a in ARITH]
    names += [f"loop.{k}.{s}" for k in LOOP_KINDS for s in LOOP_STATS]
    names += [f"thread.{t}" for t in THREAD_AXES]
    names += [f"buf{i}.{s}" for i in range(MAX_BUFFERS) for s in BUFFER_STATS]
    names += [f"intensity.{i}" for i in range(CURVE_POINTS)]
    names += [f"alloc.{a}" for a in ALLOC]
    names += [f"outer.{o}" for o in OUTER]
    return tuple(names)


FEATURE_NAMES = _names()
"""Name of every column of a feature row."""
NUM_FEATURES = len(FEATURE_NAMES)
"""Width of a feature row."""
OFFSET = {
    "arith": 0,
    "loop": len(ARITH),
    "thread": len(ARITH) + len(LOOP_KINDS) * len(LOOP_STATS),
}
OFFSET["buffer"] = OFFSET["thread"] + len(THREAD_AXES)
OFFSET["intensity"] = OFFSET["buffer"] + MAX_BUFFERS * len(BUFFER_STATS)
OFFSET["alloc"] = OFFSET["intensity"] + CURVE_POINTS
OFFSET["outer"] = OFFSET["alloc"] + len(ALLOC)

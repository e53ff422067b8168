"""Property test: random primitive sequences either fail cleanly or keep the function's meaning.

Each sequence applies a handful of primitives with random (seeded) arguments to one of the
workloads below. A step either raises ScheduleError, in which case the schedule must be exactly
as before (same function object, same trace length), or succeeds. At the end of the sequence
the trace must replay to the same function, and the scheduled function must compute what the
original computes on the same random inputs. Compilation dominates the cost, so the distinct
results of a workload are built together with the original in one module (one compiler call
per chunk) instead of one ``check_numeric`` each. Any other exception is a bug of a primitive.
Besides single primitives, steps compose rfactor after compute_at (and a split) and apply
parallel/vectorize to two loops of one nest in either order (nestings gcc rejects must fail).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import (
    Block,
    BufferStore,
    IterKind,
    PrimFunc,
    post_order_visit,
    structural_hash,
)
from tilecraft.schedule import BlockRV, LoopRV, Schedule
from tilecraft.testing import verify_trace_roundtrip

te, topi = tc.te, tc.topi


# ------------------------------------------------------------------------------------------
# workloads (small shapes: every sequence compiles once)
def _matmul() -> PrimFunc:
    a = te.placeholder((16, 24), "float32", name="A")
    b = te.placeholder((24, 32), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _batch_matmul() -> PrimFunc:
    a = te.placeholder((2, 16, 16), "float32", name="A")
    b = te.placeholder((2, 16, 8), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _softmax() -> PrimFunc:
    x = te.placeholder((8, 32), "float32", name="x")
    return te.create_prim_func([x, topi.softmax(x)])


def _layer_norm() -> PrimFunc:
    x = te.placeholder((8, 32), "float32", name="x")
    g = te.placeholder((32,), "float32", name="g")
    b = te.placeholder((32,), "float32", name="b")
    return te.create_prim_func([x, g, b, topi.layer_norm(x, g, b)])


def _conv2d() -> PrimFunc:
    x = te.placeholder((1, 4, 8, 8), "float32", name="X")
    w = te.placeholder((8, 4, 3, 3), "float32", name="W")
    return te.create_prim_func([x, w, topi.conv2d(x, w, padding=1)])


def _transpose() -> PrimFunc:
    x = te.placeholder((16, 32), "float32", name="x")
    y = topi.transpose(x, (1, 0))
    z = te.compute((32, 16), lambda i, j: y[i, j] * 2.0, name="scale")
    return te.create_prim_func([x, z])


WORKLOADS: dict[str, Callable[[], PrimFunc]] = {
    "matmul": _matmul,
    "batch_matmul": _batch_matmul,
    "softmax": _softmax,
    "layer_norm": _layer_norm,
    "conv2d": _conv2d,
    "transpose": _transpose,
}


# ------------------------------------------------------------------------------------------
# random steps
def _block_names(func: PrimFunc) -> list[str]:
    names: list[str] = []

    def fn(n: object) -> None:
        if isinstance(n, Block) and n.name != "root":
            names.append(n.name)

    post_order_visit(func.body, fn)
    return sorted(names)


def _pick_block(sch: Schedule, rng: random.Random) -> BlockRV:
    return sch.get_block(rng.choice(_block_names(sch.func)))


def _pick_loops(sch: Schedule, rng: random.Random) -> list[LoopRV]:
    """The loops of a random block (may be empty)."""
    return sch.get_loops(_pick_block(sch, rng))


def _extent(sch: Schedule, loop: LoopRV) -> int:
    ext = sch.get(loop).extent  # type: ignore[union-attr]
    return int(ext.value) if isinstance(ext, tc.ir.IntImm) else 8


def _factors(rng: random.Random, extent: int) -> list[int | None]:
    n = rng.choice([2, 2, 3])
    divisors = [d for d in range(1, extent + 1) if extent % d == 0]
    out: list[int | None] = [rng.choice([*divisors, 3, 5]) for _ in range(n)]
    out[rng.randrange(n)] = None
    return out


def _step_split(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    loops = _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    factors = _factors(rng, _extent(sch, lp))
    return lambda: sch.split(lp, factors=factors)


def _step_tile(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    loops = _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    vs = sch.try_(sch.sample_perfect_tile, lp, n=rng.choice([2, 3]), max_innermost_factor=8)
    if vs is None:
        return None
    return lambda: sch.split(lp, factors=vs)


def _step_fuse(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    loops = _pick_loops(sch, rng)
    if len(loops) < 2:
        return None
    start = rng.randrange(len(loops) - 1)
    n = rng.choice([2, 2, 3])
    chosen = loops[start : start + n]
    if rng.random() < 0.15:  # an invalid (non-adjacent or reversed) choice now and then
        chosen = list(reversed(chosen))
    return lambda: sch.fuse(*chosen)


def _step_reorder(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    loops = _pick_loops(sch, rng)
    if len(loops) < 2:
        return None
    chosen = rng.sample(loops, rng.randint(2, len(loops)))
    return lambda: sch.reorder(*chosen)


def _step_annotate_loop(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    loops = _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    kind = rng.choice(["parallel", "vectorize", "unroll", "add_unit_loop", "annotate"])
    if kind == "annotate":
        return lambda: sch.annotate(lp, "pragma_test", rng.randint(0, 4))
    return lambda: getattr(sch, kind)(lp)


def _step_unannotate(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    blk = _pick_block(sch, rng)
    if rng.random() < 0.5:
        sch.annotate(blk, "meta_test", 1)
    return lambda: sch.unannotate(blk, "meta_test")


def _step_compute_at(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    blk = _pick_block(sch, rng)
    loops = _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    prim = rng.choice(["compute_at", "reverse_compute_at"])
    keep = rng.random() < 0.3
    return lambda: getattr(sch, prim)(blk, lp, preserve_unit_loops=keep)


def _step_sampled_location(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    blk = _pick_block(sch, rng)
    loc = sch.try_(sch.sample_compute_location, blk)
    if loc is None:
        return None
    return lambda: sch.compute_at(blk, loc)


def _step_inline(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    blk = _pick_block(sch, rng)
    prim = rng.choice(["compute_inline", "reverse_compute_inline"])
    return lambda: getattr(sch, prim)(blk)


def _step_cache(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    blk = _pick_block(sch, rng)
    scope = rng.choice(["global", "shared", "local"])
    idx = rng.choice([0, 0, 1, 2])
    if rng.random() < 0.5:
        return lambda: sch.cache_read(blk, idx, scope)
    return lambda: sch.cache_write(blk, rng.choice([0, 0, 1]), scope)


def _step_buffer(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    blk = _pick_block(sch, rng)
    kind = rng.choice(["set_scope", "storage_align", "reindex"])
    if kind == "set_scope":
        scope = rng.choice(["global", "shared", "local"])
        return lambda: sch.set_scope(blk, rng.choice([0, 0, 1]), scope)
    if kind == "storage_align":
        axis, factor, offset = rng.choice([0, 0, 1, 3]), rng.choice([4, 8, 16]), rng.choice([0, 1])
        return lambda: sch.storage_align(blk, 0, axis, factor, offset)
    where = (rng.choice(["read", "write"]), rng.choice([0, 0, 1]))
    return lambda: sch.reindex(blk, where)


def _step_layout(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    blk = _pick_block(sch, rng)
    where = (rng.choice(["read", "write"]), rng.choice([0, 0, 1]))
    maps: list[Callable[..., Any]] = [
        lambda i: (i // 4, i % 4),
        lambda i, j: (j, i),
        lambda i, j: (i // 4, j, i % 4),
        lambda i, j: (i * 1000 + j,),
        lambda i, j, k: (k, i, j),
        lambda i, j, k, m: (i, k, m, j),
    ]
    index_map = rng.choice(maps)
    return lambda: sch.transform_layout(blk, where, index_map)


def _step_reduction(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    blk = _pick_block(sch, rng)
    loops = sch.get_loops(blk)
    if not loops:
        return None
    lp = rng.choice(loops)
    if rng.random() < 0.5:
        axis = rng.choice([0, 0, 1, -1])
        return lambda: sch.rfactor(lp, factor_axis=axis)
    return lambda: sch.decompose_reduction(blk, lp)


def _reduction_blocks(sch: Schedule) -> list[str]:
    out = []
    for name in _block_names(sch.func):
        blk = sch.get(sch.get_block(name))
        if isinstance(blk, Block) and any(iv.kind is IterKind.REDUCE for iv in blk.iter_vars):
            out.append(name)
    return out


def _step_rfactor_after_compute_at(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    """compute_at a reduction block under a consumer loop, split a reduction loop, rfactor."""
    names = _reduction_blocks(sch)
    if not names:
        return None
    blk = sch.get_block(rng.choice(names))
    consumers = sch.get_consumers(blk)
    if consumers and rng.random() < 0.8:
        targets = sch.get_loops(rng.choice(consumers))
        if targets:
            sch.try_(sch.compute_at, blk, rng.choice(targets))
    loops = sch.get_loops(blk)
    if not loops:
        return None
    lp = rng.choice(loops[-2:])
    if rng.random() < 0.7:
        parts = sch.try_(sch.split, lp, factors=_factors(rng, _extent(sch, lp)))
        if parts:
            lp = rng.choice(parts)
    axis = rng.choice([0, 1, -1])
    return lambda: sch.rfactor(lp, factor_axis=axis)


def _step_kind_pair(sch: Schedule, rng: random.Random) -> Callable[[], Any] | None:
    """parallel/vectorize on two loops of one nest (either may be the outer one), in a random
    order: the second one must be rejected when the nesting is not allowed."""
    loops = _pick_loops(sch, rng)
    if len(loops) < 2:
        return None
    a, b = rng.sample(loops, 2)
    first, second = rng.choice(["parallel", "vectorize"]), rng.choice(["parallel", "vectorize"])
    sch.try_(getattr(sch, first), a)
    return lambda: getattr(sch, second)(b)


STEPS: list[Callable[[Schedule, random.Random], Callable[[], Any] | None]] = [
    _step_split,
    _step_tile,
    _step_fuse,
    _step_reorder,
    _step_annotate_loop,
    _step_unannotate,
    _step_compute_at,
    _step_sampled_location,
    _step_inline,
    _step_cache,
    _step_buffer,
    _step_layout,
    _step_reduction,
    _step_rfactor_after_compute_at,
    _step_kind_pair,
]


# ------------------------------------------------------------------------------------------
# the driver
@dataclass
class _Stats:
    sequences: int = 0
    steps: int = 0
    errors: int = 0
    successes: int = 0
    checked: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


def _outputs(func: PrimFunc) -> list[int]:
    """Positions of the buffer parameters the function writes."""
    written: set[int] = set()

    def fn(n: object) -> None:
        if isinstance(n, BufferStore):
            written.add(id(n.buffer))

    post_order_visit(func.body, fn)
    return [k for k, p in enumerate(func.params) if id(p) in written]


def _check_batch(original: PrimFunc, done: list[tuple[str, Schedule]]) -> None:
    """Build the original and every scheduled function in one module (one compiler call) and
    compare their outputs on the same random inputs; unwritten outputs stay NaN."""
    funcs = {"reference": original.update(name="reference")}
    for k, (_, sch) in enumerate(done):
        funcs[f"f{k}"] = sch.func.update(name=f"f{k}")
    lib = tc.build(tc.ir.IRModule(funcs), target="cpu")
    rng = np.random.default_rng(0)
    outs = _outputs(original)
    inputs = [
        rng.standard_normal([int(d.value) for d in p.shape]).astype("float32")
        for p in original.params
    ]

    def run(name: str) -> list[np.ndarray]:
        args = [np.full_like(a, np.nan) if k in outs else a.copy() for k, a in enumerate(inputs)]
        lib[name](*args)
        return [args[k] for k in outs]

    want = run("reference")
    for k, (label, sch) in enumerate(done):
        for got, ref in zip(run(f"f{k}"), want, strict=True):
            if not np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max())):
                raise AssertionError(
                    f"{label}: wrong result after\n{sch.trace.as_python()}\n"
                    f"max abs error {np.nanmax(np.abs(got - ref))}, nan: {np.isnan(got).sum()}"
                )


def run_sequence(name: str, seed: int, n_steps: int, stats: _Stats) -> Schedule:
    """Apply ``n_steps`` random primitives to workload ``name``; returns the schedule after
    checking the failure invariant of every step and the trace replay."""
    original = WORKLOADS[name]()
    rng = random.Random(seed)
    sch = Schedule(original, seed=seed)
    for _ in range(n_steps):
        step = rng.choice(STEPS)
        action = step(sch, rng)
        if action is None:
            continue
        before, n_before = sch.func, len(sch.trace)
        stats.steps += 1
        try:
            action()
        except ScheduleError:
            stats.errors += 1
            assert sch.func is before, f"{name}/{seed}: failed {step.__name__} changed the IR"
            assert len(sch.trace) == n_before, f"{name}/{seed}: failed step changed the trace"
            continue
        stats.successes += 1
        stats.kinds[step.__name__] = stats.kinds.get(step.__name__, 0) + 1
    stats.sequences += 1
    verify_trace_roundtrip(sch, original)
    return sch


def _run(count_per_workload: int, base_seed: int, n_steps: int, chunk: int = 40) -> _Stats:
    stats = _Stats()
    for name, make in WORKLOADS.items():
        seen: set[str] = set()
        done: list[tuple[str, Schedule]] = []
        for k in range(count_per_workload):
            sch = run_sequence(name, base_seed + k, n_steps, stats)
            key = structural_hash(sch.func)
            if key not in seen:  # identical results need one check
                seen.add(key)
                done.append((f"{name} seed {base_seed + k}", sch))
        for start in range(0, len(done), chunk):
            _check_batch(make(), done[start : start + chunk])
        stats.checked += len(done)
    return stats


def test_random_sequences_keep_meaning() -> None:
    stats = _run(count_per_workload=34, base_seed=1000, n_steps=6)
    assert stats.sequences == 34 * len(WORKLOADS) >= 200
    assert stats.errors > 0
    assert stats.successes > stats.sequences  # most sequences do change the function
    assert len(stats.kinds) == len(STEPS)  # every kind of step succeeded at least once


@pytest.mark.slow
def test_random_sequences_keep_meaning_many() -> None:
    stats = _run(count_per_workload=500, base_seed=50_000, n_steps=10)
    assert stats.sequences == 500 * len(WORKLOADS)

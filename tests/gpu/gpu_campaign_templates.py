"""Workloads and random GPU schedule templates of the GPU campaign (not a test module).

A *workload* draws a small function (static or symbolic extents) and its runtime sizes from a
seeded RNG. A *template* schedules it the way the GPU kernels of issue 11 are built (tiles over
blockIdx/threadIdx/vthread, shared and local caches fetched cooperatively, storage_align
padding, vectorized and unrolled loops, rfactor and cross-thread reductions, unroll pragmas)
with every parameter drawn from the same RNG: tile sizes that may not divide the extent, which
thread axes each loop binds to, which caches exist and where they are computed. A template
raises ``ScheduleError`` when an essential primitive refuses; optional decorations go through
``sch.try_`` and a refusal leaves them out.

See ``gpu_campaign.py`` for the runner and the checks.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import tilecraft as tc
from tilecraft.ir import PrimFunc, Var
from tilecraft.schedule import BlockRV, LoopRV, Schedule

te, topi = tc.te, tc.topi
Dim = int | Var


@dataclass
class Workload:
    """A drawn function: its kind, the function, the runtime sizes of its symbolic extents and
    a description (the constructor call) for reproducers."""

    kind: str
    func: PrimFunc
    sizes: dict[str, int] = field(default_factory=dict)
    spec: str = ""


def _dim(rng: random.Random, name: str, choices: tuple[int, ...], symbolic: bool,
         sizes: dict[str, int]) -> Dim:  # fmt: skip
    value = rng.choice(choices)
    if not symbolic:
        return value
    sizes[name] = value
    return Var(name)


def _matmul(rng: random.Random, sym: bool) -> Workload:
    sizes: dict[str, int] = {}
    m = _dim(rng, "m", (8, 12, 16, 20, 32), sym, sizes)
    n, k = rng.choice((8, 16, 24, 32)), rng.choice((4, 8, 12, 16, 32))
    batch = rng.choice((0, 0, 1, 2, 3))
    lead = (batch,) if batch else ()
    a = te.placeholder((*lead, m, k), "float32", name="A")
    b = te.placeholder((*lead, k, n), "float32", name="B")
    func = te.create_prim_func([a, b, topi.matmul(a, b)])
    return Workload("matmul", func, sizes, f"matmul(batch={batch}, m={m}, n={n}, k={k})")


def _gemv(rng: random.Random, sym: bool) -> Workload:
    n, k = rng.choice((4, 6, 8, 12, 16)), rng.choice((32, 48, 64, 100, 128))
    x = te.placeholder((1, k), "float32", name="X")
    w = te.placeholder((n, k), "float32", name="W")
    r = te.reduce_axis((0, k), name="k")
    y = te.compute((1, n), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="Y")
    return Workload("gemv", te.create_prim_func([x, w, y]), {}, f"gemv(n={n}, k={k})")


def _row_reduce(rng: random.Random, sym: bool) -> Workload:
    sizes: dict[str, int] = {}
    sym_rows = sym and rng.random() < 0.5
    rows = _dim(rng, "m", (1, 2, 3, 5), sym_rows, sizes)
    cols = _dim(rng, "n", (16, 24, 32, 48, 64, 100), sym and not sym_rows, sizes)
    op = rng.choice(("softmax", "rms_norm", "layer_norm", "sum"))
    x = te.placeholder((rows, cols), "float32", name="X")
    g = te.placeholder((cols,), "float32", name="G")
    b = te.placeholder((cols,), "float32", name="Bias")
    args = {
        "softmax": lambda: [x, topi.softmax(x)],
        "rms_norm": lambda: [x, g, topi.rms_norm(x, g)],
        "layer_norm": lambda: [x, g, b, topi.layer_norm(x, g, b)],
        "sum": lambda: [x, topi.sum(x, axis=1)],
    }[op]()
    return Workload(op, te.create_prim_func(args), sizes, f"{op}(rows={rows}, cols={cols})")


def _transpose(rng: random.Random, sym: bool) -> Workload:
    sizes: dict[str, int] = {}
    rows = _dim(rng, "m", (8, 12, 16, 24, 33, 40), sym, sizes)
    cols = rng.choice((8, 16, 20, 32, 40))
    a = te.placeholder((rows, cols), "float32", name="A")
    func = te.create_prim_func([a, topi.transpose(a, (1, 0))])
    return Workload("transpose", func, sizes, f"transpose(rows={rows}, cols={cols})")


def _elementwise(rng: random.Random, sym: bool) -> Workload:
    """``relu(t2)`` with ``t2[i, j] = (x + y)[i, cols - 1 - j] * x[i, j]``: three blocks, the
    middle one reading its producer reversed (a region that is no identity of the consumer's)."""
    sizes: dict[str, int] = {}
    rows = _dim(rng, "m", (1, 3, 4, 7, 9), sym, sizes)
    cols = rng.choice((8, 16, 17, 24, 40))
    x = te.placeholder((rows, cols), "float32", name="X")
    y = te.placeholder((rows, cols), "float32", name="Y")
    t1 = te.compute((rows, cols), lambda i, j: x[i, j] + y[i, j], name="t1")
    t2 = te.compute((rows, cols), lambda i, j: t1[i, cols - 1 - j] * x[i, j], name="t2")
    func = te.create_prim_func([x, y, topi.relu(t2)])
    return Workload("elementwise", func, sizes, f"elementwise(rows={rows}, cols={cols})")


WORKLOADS: dict[str, Callable[[random.Random, bool], Workload]] = {
    "matmul": _matmul,
    "gemv": _gemv,
    "row_reduce": _row_reduce,
    "transpose": _transpose,
    "elementwise": _elementwise,
}


# ------------------------------------------------------------------------------------------
# helpers
def _ext(sch: Schedule, loop: LoopRV) -> int | None:
    extent = sch.get(loop).extent  # type: ignore[union-attr]
    return getattr(extent, "value", None)


def _factor(rng: random.Random, extent: int | None, choices: tuple[int, ...]) -> int:
    """A tile size: a divisor of a constant extent half of the time, else any of ``choices``
    (non-dividing sizes give guarded tiles)."""
    if extent is not None and rng.random() < 0.5:
        divisors = [d for d in choices if extent % d == 0]
        if divisors:
            return rng.choice(divisors)
    return rng.choice(choices)


def _loops_under(sch: Schedule, block: BlockRV, at: LoopRV) -> list[LoopRV]:
    """The loops of ``block`` nested under loop ``at``."""
    loops = sch.get_loops(block)
    nodes = [sch.get(lp) for lp in loops]
    target = sch.get(at)
    for k, node in enumerate(nodes):
        if node is target:
            return loops[k + 1 :]
    return loops


def _cooperative(sch: Schedule, rng: random.Random, block: BlockRV, at: LoopRV,
                 threads: list[tuple[str, int]]) -> bool:  # fmt: skip
    """Fuse the loops of a cache block under ``at`` and split them over ``threads`` (some of
    the enclosing block's thread axes), maybe with an inner vectorized/unrolled loop. True
    when an axis of more than one thread is left out: its threads then store the same
    elements in one barrier phase, which the race checker must report."""
    loops = _loops_under(sch, block, at)
    if not loops:  # one element: every thread of the block stores it
        return any(n > 1 for _, n in threads)
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    used = [t for t in threads if rng.random() < 0.93] or threads[:1]
    lanes = rng.choice((1, 1, 2, 4))
    factors: list[int | None] = [None, *(n for _, n in used)] + ([lanes] if lanes > 1 else [])
    parts = sch.split(fused, factors)
    for (tag, _), lp in zip(used, parts[1:], strict=False):
        sch.bind(lp, tag)
    if lanes > 1:
        _decorate(sch, rng, parts[-1])
    return any(n > 1 for t, n in threads if (t, n) not in used)


def _decorate(sch: Schedule, rng: random.Random, loop: LoopRV) -> None:
    """Vectorize or unroll an inner loop, or leave it (a refusal leaves it)."""
    how = rng.choice((sch.vectorize, sch.unroll, None))
    if how is not None:
        sch.try_(how, loop)


def _shared(rng: random.Random) -> str:
    """Static or dynamic shared memory (the only kind of run-time size)."""
    return rng.choice(("shared", "shared", "shared.dyn"))


def _pragmas(sch: Schedule, rng: random.Random, loop: LoopRV) -> None:
    if rng.random() < 0.5:
        sch.annotate(loop, "pragma_auto_unroll_max_step", rng.choice((0, 16, 64, 512)))
        sch.annotate(loop, "pragma_unroll_explicit", rng.choice((0, 1)))


# ------------------------------------------------------------------------------------------
# templates
def tile_gemm(sch: Schedule, rng: random.Random) -> bool:
    """SIMT matmul: output tiles over blocks (batch on blockIdx.z), threads (and maybe
    vthreads) with per-thread register tiles; operands through shared and/or local caches in
    either creation order; a local accumulator; decompose_reduction; unroll pragmas."""
    c = sch.get_child_blocks(sch.get_block("root"))[-1]
    *batch, i, j, k = sch.get_loops(c)
    ty_n, tx_n = rng.choice((1, 2, 4, 8)), rng.choice((1, 2, 4, 8, 16))
    vy_n, vx_n = rng.choice(((1, 1), (1, 1), (2, 1), (1, 2)))  # one vthread axis at most
    pi, pj = rng.choice((1, 2, 3, 4)), rng.choice((1, 2, 4))
    by, vy, ty, ii = sch.split(i, [None, vy_n, ty_n, pi])
    bx, vx, tx, jj = sch.split(j, [None, vx_n, tx_n, pj])
    ko, ki = sch.split(k, [None, _factor(rng, _ext(sch, k), (1, 2, 3, 4, 8))])
    sch.reorder(*batch, by, bx, vy, vx, ty, tx, ko, ki, ii, jj)
    tags = {"x": "x", "y": "y"}
    if rng.random() < 0.25:  # the rows of the tile on the x axes
        tags = {"x": "y", "y": "x"}
    for loop, kind, axis in ((by, "blockIdx", "y"), (bx, "blockIdx", "x"),
                             (ty, "threadIdx", "y"), (tx, "threadIdx", "x")):  # fmt: skip
        sch.bind(loop, f"{kind}.{tags[axis]}")
    for b in batch:
        sch.bind(b, "blockIdx.z")
    for v, n in ((vy, vy_n), (vx, vx_n)):
        if n > 1:
            sch.bind(v, "vthread")
    threads = [(f"threadIdx.{tags['y']}", ty_n), (f"threadIdx.{tags['x']}", tx_n)]
    if rng.random() < 0.6:
        store = sch.cache_write(c, 0, "local")
        sch.reverse_compute_at(store, tx)
        _decorate(sch, rng, sch.get_loops(store)[-1])
    redundant = [_operand_caches(sch, rng, c, index, (bx, tx, ko, ki), threads)
                 for index in (0, 1)]  # fmt: skip
    if rng.random() < 0.6:
        # refused when a non-dividing spatial tile guards the block (a primitive limitation)
        sch.try_(sch.decompose_reduction, c, ko)
    if rng.random() < 0.3:
        sch.try_(sch.unroll, ki)
    _pragmas(sch, rng, by)
    return any(redundant)


def _operand_caches(sch: Schedule, rng: random.Random, c: BlockRV, index: int,
                    at: tuple[LoopRV, ...], threads: list[tuple[str, int]]) -> bool:  # fmt: skip
    """Shared and/or local caches of operand ``index`` of ``c``, in a random order (True:
    a redundant cooperative fetch, see ``_cooperative``)."""
    want_shared, want_local = rng.random() < 0.7, rng.random() < 0.5
    local_first = want_shared and want_local and rng.random() < 0.3
    # positions in at (bx, tx, ko, ki): a chain's shared cache sits above its local cache
    if local_first:
        local_at = rng.choice((1, 2, 3, 3))
        shared_at = rng.choice([p for p in (0, 2, 3) if p <= local_at])
    else:
        shared_at = rng.choice((0, 2, 2, 3)) if want_shared else -1
        local_at = rng.choice([p for p in (1, 2, 3, 3) if p > shared_at] or [-1])
    shared: BlockRV | None = None
    if local_first:  # the register cache first, then its shared source
        local = sch.cache_read(c, index, "local")
        shared = sch.cache_read(local, 0, _shared(rng))
        sch.compute_at(local, at[local_at])
        sch.compute_at(shared, at[shared_at])
    else:
        if want_shared:
            shared = sch.cache_read(c, index, _shared(rng))
            sch.compute_at(shared, at[shared_at])
        if want_local:
            local = sch.cache_read(c, index, "local")
            if local_at >= 0:
                sch.compute_at(local, at[local_at])
    if want_local:
        _decorate(sch, rng, sch.get_loops(local)[-1])
    if shared is None:
        return False
    redundant = _cooperative(sch, rng, shared, at[shared_at], threads)
    if rng.random() < 0.6:
        factor = rng.choice((2, 4, 8, 16, 32))
        sch.storage_align(shared, 0, 0, factor, rng.randrange(factor))
    return redundant


def cross_thread(sch: Schedule, rng: random.Random) -> bool:
    """A row reduction (GEMV, sum) with the reduction over threads: directly bound to
    threadIdx.x (cross-thread reduction) or through rfactor (per-thread partials in local or
    shared memory, then a cross-thread combine), with local caches of the operands."""
    blocks = sch.get_child_blocks(sch.get_block("root"))
    y = blocks[0]
    *spatial, k = sch.get_loops(y)
    s = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    rows = rng.choice((1, 2, 3, 4))
    bx, jr = sch.split(s, [None, rows])
    threads = rng.choice((2, 4, 8, 16, 32, 64))
    lanes = rng.choice((1, 2, 4))
    ko, tx, kv = sch.split(k, [None, threads, lanes])
    if rng.random() < 0.4:  # direct cross-thread reduction
        sch.reorder(bx, jr, tx, ko, kv)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        _decorate(sch, rng, kv)
        _pragmas(sch, rng, bx)
        return False
    sch.reorder(bx, tx, ko, jr, kv)
    rf = sch.rfactor(tx, rng.choice((0, 1, -1)))
    bx, tx, ko, jr, kv = sch.get_loops(rf)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.set_scope(rf, 0, rng.choice(("local", "local", _shared(rng))))
    for index, at in ((0, ko), (1, jr)):
        node = sch.get(rf)
        written = {id(w.buffer) for w in node.writes}  # type: ignore[union-attr]
        reads = node.reads  # type: ignore[union-attr]
        inputs = [k for k, r in enumerate(reads) if id(r.buffer) not in written]
        if rng.random() < 0.5 and len(inputs) > index:
            cache = sch.cache_read(rf, inputs[index], "local")
            sch.compute_at(cache, at)
            _decorate(sch, rng, sch.get_loops(cache)[-1])
    if rng.random() < 0.6:
        sch.decompose_reduction(rf, rng.choice((tx, ko)))
    sch.reverse_compute_at(y, bx)
    sch.bind(sch.get_loops(y)[-1], "threadIdx.x")
    _pragmas(sch, rng, bx)
    return False


def block_per_row(sch: Schedule, rng: random.Random) -> bool:
    """Softmax/norms/sum with one block per row (intermediates in local or shared memory
    under the row loop, each stage over threadIdx.x, thread loop inner or outer) or one thread
    per row (rows split over blocks and threads, intermediates in registers)."""
    *reductions, last = sch.get_child_blocks(sch.get_block("root"))
    loops = sch.get_loops(last)
    if rng.random() < 0.25:  # a thread per row
        bx, tx = sch.split(loops[0], [None, rng.choice((1, 2, 4))])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        for red in reversed(reductions):
            sch.set_scope(red, 0, "local")
            sch.compute_at(red, tx)
        return False
    row = loops[0]
    sch.bind(row, "blockIdx.x")
    threads = rng.choice((2, 4, 8, 16, 32, 64, 128))
    for red in reversed(reductions):
        sch.set_scope(red, 0, rng.choice(("local", "local", _shared(rng))))
        sch.compute_at(red, row)
    redundant = False
    if rng.random() < 0.3:
        cache = sch.cache_read(last if not reductions else reductions[0], 0, _shared(rng))
        sch.compute_at(cache, row)
        redundant = _cooperative(sch, rng, cache, row, [("threadIdx.x", threads)])
    for stage in [*reductions, last]:
        inner = sch.get_loops(stage)[-1]
        ko, tx = sch.split(inner, [None, threads])
        if rng.random() < 0.85:  # else refused: the reduce loop outside the thread loop
            sch.reorder(tx, ko)
        sch.bind(tx, "threadIdx.x")
        if rng.random() < 0.3 and stage in reductions:
            sch.try_(sch.decompose_reduction, stage, ko)
    _pragmas(sch, rng, row)
    return redundant


def tile_transpose(sch: Schedule, rng: random.Random) -> bool:
    """A tile per block, staged through padded shared memory (or a local register tile, or
    nothing), each stage over ty x tx threads."""
    (blk,) = sch.get_child_blocks(sch.get_block("root"))
    i, j = sch.get_loops(blk)
    ti_n = _factor(rng, _ext(sch, i), (4, 8, 12, 16))
    tj_n = _factor(rng, _ext(sch, j), (4, 8, 16))
    by, ti = sch.split(i, [None, ti_n])
    bx, tj = sch.split(j, [None, tj_n])
    sch.reorder(by, bx, ti, tj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    rows, cols = rng.choice((1, 2, 4)), rng.choice((2, 4, 8, 16))
    stages = [blk]
    scope = rng.choice((_shared(rng), _shared(rng), "local", ""))
    if scope:
        cache = sch.cache_read(blk, 0, scope)
        sch.compute_at(cache, bx)
        if scope.startswith("shared"):
            factor = rng.choice((1, 4, 8, 16))
            if rng.random() < 0.7:
                sch.storage_align(cache, 0, 0, factor, rng.randrange(factor) if factor else 0)
            stages.insert(0, cache)
    for stage in stages:
        fused = sch.fuse(*sch.get_loops(stage)[-2:])
        _, ty, tx, inner = sch.split(fused, [None, rows, cols, rng.choice((1, 2))])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        _decorate(sch, rng, inner)
    _pragmas(sch, rng, by)
    return False


def elementwise_chain(sch: Schedule, rng: random.Random) -> bool:
    """The last stage flat (blocks x threads x inner) or 2-D tiled; each producer inlined,
    computed under the thread loop in registers, under the block loop in shared memory
    (fetched cooperatively), or left as its own kernel."""
    *producers, last = sch.get_child_blocks(sch.get_block("root"))
    threads = rng.choice((2, 4, 8, 16, 32))
    bx, tx, _ = _flat(sch, rng, last, threads)
    where: tuple[LoopRV, LoopRV | None] = (bx, tx)  # the nearest consumer's block/thread loops
    redundant = False
    for p in reversed(producers):
        how = rng.choice(("inline", "local", "shared", "root"))
        if how == "local" and where[1] is None:
            how = "shared"
        if how == "inline":
            sch.compute_inline(p)
        elif how == "local" and where[1] is not None:
            sch.set_scope(p, 0, "local")
            sch.compute_at(p, where[1])
        elif how == "shared":
            sch.set_scope(p, 0, _shared(rng))
            sch.compute_at(p, where[0])
            redundant |= _cooperative(sch, rng, p, where[0], [("threadIdx.x", threads)])
            where = (where[0], None)
        else:
            threads = rng.choice((4, 16))
            own_bx, own_tx, _ = _flat(sch, rng, p, threads)
            where = (own_bx, own_tx)
    _pragmas(sch, rng, bx)
    return redundant


def _flat(sch: Schedule, rng: random.Random, block: BlockRV, threads: int) -> list[LoopRV]:
    loops = sch.get_loops(block)
    fused = sch.fuse(*loops)
    vec = rng.choice((1, 2, 4))
    bx, tx, inner = sch.split(fused, [None, threads, vec])
    if rng.random() < 0.3:  # inner elements strided by the block's threads
        sch.reorder(bx, inner, tx)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    _decorate(sch, rng, inner)
    return [bx, tx, inner]


Template = Callable[[Schedule, random.Random], bool]
TEMPLATES: dict[str, tuple[Template, ...]] = {
    "matmul": (tile_gemm,),
    "gemv": (cross_thread, tile_gemm),
    "sum": (block_per_row, cross_thread),
    "softmax": (block_per_row,),
    "rms_norm": (block_per_row,),
    "layer_norm": (block_per_row,),
    "transpose": (tile_transpose,),
    "elementwise": (elementwise_chain,),
}
"""The templates that apply to each kind of workload."""

"""Workloads and random steps of the random-schedule campaign (not a test module).

A *step* looks at a schedule, picks a primitive and random (seeded) arguments, and returns the
call to make (a zero-argument callable), or None when nothing applies. Steps name primitives
through ``Schedule`` attributes only, so the same steps run against an older tree that lacks
some primitive: such a step returns None (``available`` tells which steps apply).

Half of the workloads have a symbolic extent; each lists the runtime sizes its meaning is
checked at.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tilecraft as tc
from tilecraft.ir import Block, BufferStore, IterKind, PrimFunc, Select, post_order_visit
from tilecraft.schedule import BlockRV, LoopRV, Schedule
from tilecraft.schedule.tensor_intrin import register_tensor_intrin

te, topi = tc.te, tc.topi
Action = Callable[[], Any]
Step = Callable[[Schedule, random.Random], Action | None]


# ------------------------------------------------------------------------------------------
# workloads (small shapes: every sequence compiles once)
@dataclass(frozen=True)
class Workload:
    """A function to schedule and the symbolic sizes its results are compared at."""

    make: Callable[[], PrimFunc]
    sizes: tuple[dict[str, int], ...] = ({},)

    @property
    def symbolic(self) -> bool:
        """True when the function has a symbolic extent."""
        return self.sizes != ({},)


def _matmul() -> PrimFunc:
    a = te.placeholder((16, 24), "float32", name="A")
    b = te.placeholder((24, 32), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _batch_matmul() -> PrimFunc:
    a = te.placeholder((2, 16, 16), "float32", name="A")
    b = te.placeholder((2, 16, 8), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _softmax(rows: int | str = 8) -> PrimFunc:
    x = te.placeholder((rows, 32), "float32", name="x")
    return te.create_prim_func([x, topi.softmax(x)])


def _layer_norm(rows: int | str = 8) -> PrimFunc:
    x = te.placeholder((rows, 32), "float32", name="x")
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


def _sym_batch_matmul() -> PrimFunc:
    a = te.placeholder(("b", 12, 16), "float32", name="A")
    b = te.placeholder(("b", 16, 8), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _sym_matmul_rows() -> PrimFunc:
    a = te.placeholder(("n", 16), "float32", name="A")
    b = te.placeholder((16, 12), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _sym_elementwise() -> PrimFunc:
    x = te.placeholder(("n", 8), "float32", name="x")
    y = te.compute(("n", 8), lambda i, j: x[i, j] + 1.0, name="add")
    z = te.compute(("n", 8), lambda i, j: y[i, j] * 2.0, name="mul")
    return te.create_prim_func([x, topi.relu(z)])


def _sym_row_sum() -> PrimFunc:
    x = te.placeholder((8, "m"), "float32", name="x")
    k = te.reduce_axis((0, x.shape[1]), name="k")
    s = te.compute((8,), lambda i: te.sum(x[i, k] * x[i, k], axis=k), name="sumsq")
    return te.create_prim_func([x, te.compute((8,), lambda i: s[i] + 1.0, name="shift")])


ROWS = ({"n": 1}, {"n": 6}, {"n": 13})
WORKLOADS: dict[str, Workload] = {
    "matmul": Workload(_matmul),
    "batch_matmul": Workload(_batch_matmul),
    "softmax": Workload(_softmax),
    "layer_norm": Workload(_layer_norm),
    "conv2d": Workload(_conv2d),
    "transpose": Workload(_transpose),
    "sym_batch_matmul": Workload(_sym_batch_matmul, ({"b": 1}, {"b": 3})),
    "sym_matmul_rows": Workload(_sym_matmul_rows, ROWS),
    "sym_softmax": Workload(lambda: _softmax("n"), ROWS),
    "sym_layer_norm": Workload(lambda: _layer_norm("n"), ROWS),
    "sym_elementwise": Workload(_sym_elementwise, ROWS),
    "sym_row_sum": Workload(_sym_row_sum, ({"m": 1}, {"m": 7}, {"m": 16})),
}


# ------------------------------------------------------------------------------------------
# helpers
def block_names(func: PrimFunc) -> list[str]:
    """Non-root block names of ``func``, sorted."""
    names: list[str] = []

    def fn(n: object) -> None:
        if isinstance(n, Block) and n.name != "root":
            names.append(n.name)

    post_order_visit(func.body, fn)
    return sorted(names)


def _pick_block(sch: Schedule, rng: random.Random) -> BlockRV:
    return sch.get_block(rng.choice(block_names(sch.func)))


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


def _has(sch: Schedule, *names: str) -> bool:
    return all(hasattr(sch, n) for n in names)


# ------------------------------------------------------------------------------------------
# loop steps
def step_split(sch: Schedule, rng: random.Random) -> Action | None:
    loops = _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    factors = _factors(rng, _extent(sch, lp))
    return lambda: sch.split(lp, factors=factors)


def step_tile(sch: Schedule, rng: random.Random) -> Action | None:
    loops = _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    if rng.random() < 0.3:
        cat = sch.try_(sch.sample_categorical, [2, 4, 8], [0.3, 0.4, 0.3]).value_or(None)
        return None if cat is None else (lambda: sch.split(lp, factors=[None, cat]))
    vs = sch.try_(
        sch.sample_perfect_tile, lp, n=rng.choice([2, 3]), max_innermost_factor=8
    ).value_or(None)
    return None if vs is None else (lambda: sch.split(lp, factors=vs))


def step_fuse(sch: Schedule, rng: random.Random) -> Action | None:
    loops = _pick_loops(sch, rng)
    if len(loops) < 2:
        return None
    start = rng.randrange(len(loops) - 1)
    chosen = loops[start : start + rng.choice([2, 2, 3])]
    if rng.random() < 0.15:  # an invalid (non-adjacent or reversed) choice now and then
        chosen = list(reversed(chosen))
    return lambda: sch.fuse(*chosen)


def step_reorder(sch: Schedule, rng: random.Random) -> Action | None:
    loops = _pick_loops(sch, rng)
    if len(loops) < 2:
        return None
    chosen = rng.sample(loops, rng.randint(2, len(loops)))
    return lambda: sch.reorder(*chosen)


def step_annotate_loop(sch: Schedule, rng: random.Random) -> Action | None:
    loops = _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    kind = rng.choice(["parallel", "vectorize", "unroll", "add_unit_loop", "annotate", "bind"])
    if kind == "annotate":
        return lambda: sch.annotate(lp, "pragma_test", rng.randint(0, 4))
    if kind == "bind":  # built with thread loops run serially (the schedule's serial meaning)
        thread = rng.choice(["blockIdx.x", "threadIdx.x", "threadIdx.y", "vthread"])
        return lambda: sch.bind(lp, thread)
    return lambda: getattr(sch, kind)(lp)


def step_unannotate(sch: Schedule, rng: random.Random) -> Action | None:
    blk = _pick_block(sch, rng)
    if rng.random() < 0.5:
        sch.annotate(blk, "meta_test", 1)
    return lambda: sch.unannotate(blk, "meta_test")


def step_kind_pair(sch: Schedule, rng: random.Random) -> Action | None:
    """parallel/vectorize on two loops of one nest (either may be the outer one), in a random
    order: the second one must be rejected when the nesting is not allowed."""
    loops = _pick_loops(sch, rng)
    if len(loops) < 2:
        return None
    a, b = rng.sample(loops, 2)
    first, second = rng.choice(["parallel", "vectorize"]), rng.choice(["parallel", "vectorize"])
    sch.try_(getattr(sch, first), a)
    return lambda: getattr(sch, second)(b)


# ------------------------------------------------------------------------------------------
# block steps
def step_query(sch: Schedule, rng: random.Random) -> Action | None:
    blk = _pick_block(sch, rng) if rng.random() < 0.7 else sch.get_block("root")
    kinds = ["get_child_blocks", "get_producers", "get_consumers"]
    if _has(sch, "get_output_blocks"):
        kinds.append("get_output_blocks")
    kind = rng.choice(kinds)
    return lambda: getattr(sch, kind)(blk)


def step_compute_at(sch: Schedule, rng: random.Random) -> Action | None:
    blk = _pick_block(sch, rng)
    loops = _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    prim = rng.choice(["compute_at", "reverse_compute_at"])
    keep = rng.random() < 0.3
    return lambda: getattr(sch, prim)(blk, lp, preserve_unit_loops=keep)


def step_sampled_location(sch: Schedule, rng: random.Random) -> Action | None:
    blk = _pick_block(sch, rng)
    loc = sch.try_(sch.sample_compute_location, blk).value_or(None)
    if loc is None:
        return None
    return lambda: sch.compute_at(blk, loc)


def step_inline(sch: Schedule, rng: random.Random) -> Action | None:
    blk = _pick_block(sch, rng)
    prim = rng.choice(["compute_inline", "reverse_compute_inline"])
    return lambda: getattr(sch, prim)(blk)


def step_cache(sch: Schedule, rng: random.Random) -> Action | None:
    blk = _pick_block(sch, rng)
    scope = rng.choice(["global", "shared", "local"])
    idx = rng.choice([0, 0, 1, 2])
    if rng.random() < 0.5:
        return lambda: sch.cache_read(blk, idx, scope)
    return lambda: sch.cache_write(blk, rng.choice([0, 0, 1]), scope)


def step_buffer(sch: Schedule, rng: random.Random) -> Action | None:
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


LAYOUT_MAPS: list[Callable[..., Any]] = [
    lambda i: (i // 4, i % 4),
    lambda i, j: (j, i),
    lambda i, j: (i // 4, j, i % 4),
    lambda i, j: (i * 1000 + j,),
    lambda i, j, k: (k, i, j),
    lambda i, j, k, m: (i, k, m, j),
]


def step_layout(sch: Schedule, rng: random.Random) -> Action | None:
    blk = _pick_block(sch, rng)
    where = (rng.choice(["read", "write"]), rng.choice([0, 0, 1]))
    index_map = rng.choice(LAYOUT_MAPS)
    return lambda: sch.transform_layout(blk, where, index_map)


def step_reduction(sch: Schedule, rng: random.Random) -> Action | None:
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
    for name in block_names(sch.func):
        blk = sch.get(sch.get_block(name))
        if isinstance(blk, Block) and any(iv.kind is IterKind.REDUCE for iv in blk.iter_vars):
            out.append(name)
    return out


def step_rfactor_after_compute_at(sch: Schedule, rng: random.Random) -> Action | None:
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
        parts = sch.try_(sch.split, lp, factors=_factors(rng, _extent(sch, lp))).value_or(None)
        if parts:
            lp = rng.choice(parts)
    axis = rng.choice([0, 1, -1])
    return lambda: sch.rfactor(lp, factor_axis=axis)


# ------------------------------------------------------------------------------------------
# block shape and padding (issue 10); None on a tree without them
def _block_maps(n: int, extents: list[int | None], rng: random.Random) -> Callable[..., Any]:
    """A random map over ``n`` iterators: a permutation, a fusion of two constant extents,
    a split of a constant extent, or (now and then) a map that is no bijection."""
    perm = list(range(n))
    rng.shuffle(perm)
    choice = rng.random()
    if choice < 0.15:
        return lambda *v: tuple(v[p] * 2 for p in perm)  # not onto a box
    if choice < 0.45 and n >= 2:
        k = rng.randrange(n - 1)
        inner = extents[k + 1]
        if inner is not None:
            return lambda *v: (*v[:k], v[k] * inner + v[k + 1], *v[k + 2 :])
    if choice < 0.7:
        k = rng.randrange(n)
        f = rng.choice([2, 4])
        return lambda *v: (*v[:k], v[k] // f, v[k] % f, *v[k + 1 :])
    return lambda *v: tuple(v[p] for p in perm)


def step_block_layout(sch: Schedule, rng: random.Random) -> Action | None:
    if not _has(sch, "transform_block_layout"):
        return None
    blk = _pick_block(sch, rng)
    node = sch.get(blk)
    assert isinstance(node, Block)
    exts = [getattr(iv.dom.extent, "value", None) for iv in node.iter_vars]
    if not exts:
        return None
    fn = _block_maps(len(exts), exts, rng)
    index_map = tc.schedule.IndexMap.from_func(fn, ndim=len(exts))
    return lambda: sch.transform_block_layout(blk, index_map)


def step_pad_einsum(sch: Schedule, rng: random.Random) -> Action | None:
    if not _has(sch, "pad_einsum"):
        return None
    blk = _pick_block(sch, rng)
    node = sch.get(blk)
    assert isinstance(node, Block)
    padding = [rng.choice([1, 1, 2, 3, 4, 5, 8, 16]) for _ in node.iter_vars]
    if rng.random() < 0.1:
        padding = padding[:-1] or [0]  # a wrong length
    return lambda: sch.pad_einsum(blk, padding)


def _padding_blocks(sch: Schedule) -> list[str]:
    out = []
    for name in block_names(sch.func):
        blk = sch.get(sch.get_block(name))
        body = blk.body if isinstance(blk, Block) else None
        if isinstance(body, BufferStore) and isinstance(body.value, Select):
            out.append(name)
    return out


def step_decompose_padding(sch: Schedule, rng: random.Random) -> Action | None:
    if not _has(sch, "decompose_padding"):
        return None
    names = _padding_blocks(sch)
    if names and rng.random() < 0.8:
        blk = sch.get_block(rng.choice(names))
    else:
        blk = _pick_block(sch, rng)
    loops = sch.get_loops(blk) or _pick_loops(sch, rng)
    if not loops:
        return None
    lp = rng.choice(loops)
    return lambda: sch.decompose_padding(blk, lp)


# ------------------------------------------------------------------------------------------
# block-structure steps: blockize, tensorize (with the campaign's own toy intrinsics, whose
# implementations are plain statements a CPU build runs), and the postprocessing marker
def _elementwise_intrin(name: str, op: str) -> None:
    """Register ``C[0:4] = A[0:4] <op>`` (desc: a block loop; impl: two unrolled halves)."""
    head = '@T.prim_func\ndef f(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):\n'
    root = '    with T.block("root"):\n        T.reads(A[0:4])\n        T.writes(C[0:4])\n'
    desc = (
        f"{head}{root}        for i in range(4):\n"
        '            with T.block("c"):\n                vi = T.axis.spatial(4, i)\n'
        f"                T.reads(A[vi])\n                T.writes(C[vi])\n"
        f"                C[vi] = A[vi] {op}\n"
    )
    impl = (
        f"{head}{root}        for h in range(2):\n"
        f"            C[h * 2] = A[h * 2] {op}\n            C[h * 2 + 1] = A[h * 2 + 1] {op}\n"
    )
    parsed = [tc.script.parse(t) for t in (desc, impl)]
    register_tensor_intrin(name, *parsed, override=True)  # type: ignore[arg-type]


CAMPAIGN_INTRINS = {"campaign_add_one4": "+ T.float32(1.0)", "campaign_double4": "* T.float32(2.0)"}
for _name, _op in CAMPAIGN_INTRINS.items():
    _elementwise_intrin(_name, _op)


def step_blockize(sch: Schedule, rng: random.Random) -> Action | None:
    loops = _pick_loops(sch, rng)
    if not _has(sch, "blockize") or not loops:
        return None
    lp = rng.choice(loops)
    return lambda: sch.blockize(lp)


def step_tensorize(sch: Schedule, rng: random.Random) -> Action | None:
    """Split a block's innermost loop by 4 (when it is longer) and tensorize the 4-loop with
    a campaign intrinsic; it applies only where the block computes that intrinsic."""
    loops = _pick_loops(sch, rng)
    if not _has(sch, "tensorize") or not loops:
        return None
    inner, intrin = loops[-1], rng.choice(sorted(CAMPAIGN_INTRINS))
    if _extent(sch, inner) > 4 and rng.random() < 0.8:
        parts = sch.try_(sch.split, inner, factors=[None, 4]).value_or(None)
        inner = parts[-1] if parts else inner
    return lambda: sch.tensorize(inner, intrin)


def step_postproc(sch: Schedule, rng: random.Random) -> Action | None:
    return sch.enter_postproc if _has(sch, "enter_postproc") and rng.random() < 0.5 else None


STEPS: list[Step] = [
    step_split,
    step_tile,
    step_fuse,
    step_reorder,
    step_annotate_loop,
    step_unannotate,
    step_kind_pair,
    step_query,
    step_compute_at,
    step_sampled_location,
    step_inline,
    step_cache,
    step_buffer,
    step_layout,
    step_reduction,
    step_rfactor_after_compute_at,
    step_block_layout,
    step_pad_einsum,
    step_decompose_padding,
    step_blockize,
    step_tensorize,
    step_postproc,
]

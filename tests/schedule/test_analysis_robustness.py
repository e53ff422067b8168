"""Analysis of scheduled functions: random primitive sequences, then every analysis on every block.

Rules and the tuner run the analysis on whatever they are given; after split, fuse, rfactor,
cache_read, compute_at, inlining... every question must still be answered with a value (None
for "not this pattern"), never an exception, and must leave the function unchanged.
"""

from __future__ import annotations

import random

import pytest
from analysis_workloads import WORKLOADS

import tilecraft as tc
from tilecraft.ir import Block, post_order_visit
from tilecraft.schedule import Schedule
from tilecraft.schedule import analysis as an

NAMES = ["matmul_symbolic", "softmax_symbolic", "conv2d", "dense_bias_symbolic", "attention"]
NAMES += ["layer_norm", "take", "argmax", "batch_matmul_broadcast"]


def _random_step(sch: Schedule, rng: random.Random) -> None:
    blocks = [b for b in _all_blocks(sch.func) if b.name != "root"]
    block = sch.get_block(rng.choice(blocks).name)
    loops = sch.get_loops(block)
    op = rng.choice(["split", "fuse", "reorder", "rfactor", "cache_read", "compute_at"])
    op = op if loops else rng.choice(["cache_read", "inline"])
    if op == "split":
        sch.try_(sch.split, rng.choice(loops), factors=[None, rng.choice([2, 3, 4])])
    elif op == "fuse" and len(loops) > 1:
        k = rng.randrange(len(loops) - 1)
        sch.try_(sch.fuse, loops[k], loops[k + 1])
    elif op == "reorder" and len(loops) > 1:
        sch.try_(sch.reorder, *rng.sample(loops, 2))
    elif op == "rfactor":
        sch.try_(sch.rfactor, loops[-1], 0)
    elif op == "cache_read":
        sch.try_(sch.cache_read, block, 0, "local")
    elif op == "compute_at":
        consumers = sch.get_consumers(block)
        if consumers:
            target = sch.get_loops(rng.choice(consumers))
            if target:
                sch.try_(sch.compute_at, block, rng.choice(target))
    else:
        sch.try_(sch.compute_inline, block)


def _all_blocks(func: tc.ir.PrimFunc) -> list[Block]:
    out: list[Block] = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, Block) else None)
    return out


def _analyse_everything(sch: Schedule) -> None:
    func, trace_len = sch.func, len(sch.trace)
    pattern = an.classify_prim_func(func)
    assert isinstance(pattern, an.OpPattern)
    for block in _all_blocks(func):
        assert isinstance(an.block_op_pattern(block), an.OpPattern)
        for detect, why in [
            (an.classify_einsum, an.why_not_einsum),
            (an.detect_gemv, an.why_not_gemv),
            (an.detect_reduction, an.why_not_reduction),
        ]:
            assert (detect(block) is None) == isinstance(why(block), str)
        an.dominant_read(block)
        an.read_accesses(block)
    infos = an.normalize_prim_func(sch)
    assert sch.func is func
    if infos is None:
        assert isinstance(an.why_not_normalized(sch), str)
        assert len(sch.trace) == trace_len
        return
    assert an.why_not_normalized(sch) is None
    for info in infos:
        assert [lp.var for lp in sch.get_loops(info.block_rv)] == [lp.var for lp in info.loops]
        an.producers(infos, info)
        an.consumers(infos, info)
    an.output_blocks(infos)


def _run(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    sch = Schedule(WORKLOADS[rng.choice(NAMES)](), seed=seed)
    for _ in range(steps):
        _random_step(sch, rng)
        _analyse_everything(sch)


@pytest.mark.parametrize("seed", range(12))
def test_analysis_of_randomly_scheduled_functions(seed: int) -> None:
    _run(seed, steps=4)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 412))
def test_analysis_of_randomly_scheduled_functions_long(seed: int) -> None:
    _run(seed, steps=8)


def test_deep_expressions_do_not_overflow_the_stack() -> None:
    from tilecraft.ir import (
        Add,
        BlockRealize,
        Buffer,
        BufferRegion,
        BufferStore,
        For,
        ForKind,
        IterKind,
        IterVar,
        PrimFunc,
        Range,
        Var,
        as_expr,
        block_realize,
    )

    x, y = Buffer("x", (8,), "float32"), Buffer("y", (8,), "float32")
    i, vi = Var("i", "int32"), Var("vi", "int32")
    value = x[vi]
    for _ in range(3000):  # deeper than Python's default recursion limit
        value = Add(value, x[vi])
    block = Block(
        "y",
        (IterVar(vi, Range(0, 8), IterKind.SPATIAL),),
        (BufferRegion.point(x, [vi]),),
        (BufferRegion.point(y, [vi]),),
        BufferStore(y, value, (vi,)),
    )
    loop = For(i, as_expr(0), as_expr(8), ForKind.SERIAL, block_realize(block, [i]))
    root: BlockRealize = block_realize(Block("root", (), (), (), loop))
    func = PrimFunc((x, y), root)
    assert an.classify_prim_func(func) is an.OpPattern.ELEMWISE
    infos = an.normalize_prim_func(Schedule(func))
    assert infos is not None
    assert infos[0].is_elementwise()
    assert an.why_not_reduction(infos[0]) == 'block "y" has no reduction iterator'

"""Mutators change one decision and the result replays; postprocessors finish candidates
(sampled parallel/vectorize/unroll) or drop them (dynamic loops, GPU limits), counted."""

from __future__ import annotations

import random

import pytest
from tune_workloads import add_2d, matmul

import tilecraft as tc
from tilecraft.ir import For, ForKind, Node, PrimFunc, post_order_visit
from tilecraft.lower import AUTO_UNROLL
from tilecraft.schedule import Schedule, Trace
from tilecraft.tune.mutator import (
    MutateComputeLocation,
    MutateParallel,
    MutateThreadBinding,
    MutateTileSize,
    MutateUnroll,
    default_mutators,
)
from tilecraft.tune.postproc import (
    DisallowDynamicLoop,
    RewriteParallelVectorizeUnroll,
    RewriteUnboundBlock,
    VerifyGPUCode,
    apply_postprocs,
    default_postprocs,
    keys,
)
from tilecraft.tune.space import cpu_default_space

CPU = tc.Target("cpu -mcpu=x86-64-v3")
GPU = tc.Target("cuda -arch=sm_90")


def _decisions(trace: Trace) -> list[object]:
    return [trace[i].decision for i in trace.sampling_indices()]


def _replayed(func: PrimFunc, trace: Trace) -> Schedule:
    sch = Schedule(func)
    trace.apply_to_schedule(sch)
    return sch


def _loop_kinds(func: PrimFunc) -> list[tuple[int, ForKind, object]]:
    found: list[tuple[int, ForKind, object]] = []

    def visit(node: Node) -> None:
        if isinstance(node, For):
            found.append((node.extent.value, node.kind, node.annotations.get(AUTO_UNROLL)))

    post_order_visit(func.body, visit)
    return found[::-1]


def _check_one_change(func: PrimFunc, before: Trace, after: Trace | None) -> Schedule:
    assert after is not None
    old, new = _decisions(before), _decisions(after)
    assert sum(a != b for a, b in zip(old, new, strict=True)) == 1
    sch = _replayed(func, after)
    assert not tc.ir.structural_equal(sch.func, _replayed(func, before).func)
    return sch


def test_tile_size_mutations_are_valid_distinct_and_replay() -> None:
    func = matmul(64, 64, 64)
    sch = Schedule(func, seed=1)
    cpu_default_space(sch)
    rng = random.Random(0)
    keys_seen = set()
    for _ in range(10):
        new = MutateTileSize().apply(func, sch.trace, rng)
        out = _check_one_change(func, sch.trace, new)
        keys_seen.add(tc.ir.structural_hash(out.func))
        for i in new.sampling_indices():  # factors still multiply to the extent
            d = new[i].decision
            assert d[0] * d[1] == 64
    assert len(keys_seen) > 3
    tc.testing.check_numeric(out.func, func, rtol=1e-4, atol=1e-4)


def _annotated_space(sch: Schedule) -> None:
    block = sch.get_block("C")
    i, _ = sch.get_loops(block)
    unroll = sch.sample_categorical([0, 16, 64, 512], [1, 1, 1, 1])
    sch.annotate(i, AUTO_UNROLL, unroll)
    par = sch.sample_categorical([4, 16, 64], [1, 1, 1])
    sch.annotate(sch.get_block("root"), keys.PARALLEL, par)


def test_unroll_and_parallel_mutators_change_only_their_samples() -> None:
    func = add_2d(64, 64)
    sch = Schedule(func, seed=0)
    _annotated_space(sch)
    unroll_at, par_at = sch.trace.sampling_indices()
    rng = random.Random(1)
    for mutator, index in ((MutateUnroll(), unroll_at), (MutateParallel(), par_at)):
        new = mutator.apply(func, sch.trace, rng)
        _check_one_change(func, sch.trace, new)
        assert new[index].decision != sch.trace[index].decision
    assert MutateThreadBinding().apply(func, sch.trace, rng) is None
    assert MutateComputeLocation().apply(func, sch.trace, rng) is None


def test_thread_binding_mutator_and_gpu_verification() -> None:
    func = matmul(64, 64, 64)

    def space(sch: Schedule) -> None:
        i, _, _ = sch.get_loops(sch.get_block("C"))
        threads = sch.sample_categorical([8, 16, 32, 64], [1, 1, 1, 1])
        i0, i1 = sch.split(i, [None, threads])
        sch.bind(i0, "blockIdx.x")
        sch.bind(i1, "threadIdx.x")

    sch = Schedule(func, seed=0)
    space(sch)
    new = MutateThreadBinding().apply(func, sch.trace, random.Random(0))
    out = _check_one_change(func, sch.trace, new)
    assert apply_postprocs(out, default_postprocs(GPU)) is None
    too_many = Schedule(func)
    i, j, _ = too_many.get_loops(too_many.get_block("C"))
    too_many.bind(too_many.fuse(i, j), "threadIdx.x")  # 4096 threads in a block
    assert VerifyGPUCode(GPU).apply(too_many) is False
    assert VerifyGPUCode(CPU).apply(too_many) is True  # nothing to check on a CPU


def test_compute_location_mutator_moves_a_block() -> None:
    func = matmul(32, 32, 32, relu=True)

    def space(sch: Schedule) -> None:
        block = sch.get_block("D")
        _, j = sch.get_loops(block)
        sch.split(j, [None, 8])
        producer = sch.get_block("C")
        sch.compute_at(producer, sch.sample_compute_location(producer))

    sch = Schedule(func, seed=0)
    space(sch)
    seen = set()
    rng = random.Random(2)
    for _ in range(6):
        new = MutateComputeLocation().apply(func, sch.trace, rng)
        out = _check_one_change(func, sch.trace, new)
        seen.add(new[new.sampling_indices()[0]].decision)
        tc.testing.check_numeric(out.func, func, rtol=1e-4, atol=1e-4)
    assert len(seen) > 1


def test_default_mutators_per_target() -> None:
    cpu, gpu = default_mutators(CPU), default_mutators(GPU)
    assert sum(cpu.values()) == pytest.approx(1.0)
    assert sum(gpu.values()) == pytest.approx(1.0)
    assert {m.name for m in cpu} == {
        "tile_size",
        "tile_cache",
        "compute_location",
        "unroll",
        "parallel",
    }
    assert {m.name for m in gpu} == {"tile_size", "unroll", "thread_binding"}


def test_rewrite_parallel_vectorize_unroll() -> None:
    func = add_2d(64, 64)
    sch = Schedule(func)
    root = sch.get_block("root")
    sch.annotate(root, keys.PARALLEL, 16)  # the first loop is parallel whatever its extent
    sch.annotate(root, keys.VECTORIZE, 64)
    sch.annotate(root, keys.UNROLL, 16)
    assert apply_postprocs(sch, default_postprocs(CPU)) is None
    assert _loop_kinds(sch.func) == [
        (64, ForKind.PARALLEL, 16),
        (64, ForKind.VECTORIZED, None),
    ]
    assert "tc.tune" not in sch.func.script()
    tc.testing.check_numeric(sch.func, func)
    replay = _replayed(func, sch.trace)
    assert tc.ir.structural_equal(replay.func, sch.func)


def test_rewrite_leaves_reduction_loops_serial() -> None:
    func = matmul(16, 16, 16)
    sch = Schedule(func)
    sch.annotate(sch.get_block("C"), keys.PARALLEL, 256)
    sch.annotate(sch.get_block("C"), keys.VECTORIZE, 16)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    kinds = [k for _, k, _ in _loop_kinds(sch.func)]
    assert kinds == [ForKind.PARALLEL, ForKind.SERIAL]  # i, j fused (256); k stays serial
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


def test_failing_postprocs_drop_and_name_the_candidate() -> None:
    sch = Schedule(add_2d(8, 8))
    sch.annotate(sch.get_block("root"), keys.PARALLEL, "many")
    assert apply_postprocs(sch, default_postprocs(CPU)) == "rewrite_parallel_vectorize_unroll"
    n = tc.ir.Var("n", "int32")
    a = tc.te.placeholder((n,), "float32", name="A")
    b = tc.te.compute((n,), lambda i: a[i] * 2.0, name="B")
    dynamic = Schedule(tc.te.create_prim_func([a, b]))
    assert apply_postprocs(dynamic, [DisallowDynamicLoop()]) == "disallow_dynamic_loop"


def test_unbound_gpu_blocks_get_bound_and_run_under_the_race_checker() -> None:
    func = matmul(16, 16, 16, relu=True)
    sch = Schedule(func)
    assert VerifyGPUCode(GPU).apply(sch) is False  # no thread binding: refused
    assert apply_postprocs(sch, default_postprocs(GPU)) is None
    kinds = {(k, e) for e, k, _ in _loop_kinds(sch.func) if k is ForKind.THREAD_BINDING}
    assert kinds == {(ForKind.THREAD_BINDING, 256), (ForKind.THREAD_BINDING, 1)}
    tc.testing.check_numeric(
        sch.func, func, target=GPU, emulate_gpu="racecheck", rtol=1e-4, atol=1e-4
    )
    assert RewriteUnboundBlock(CPU).apply(Schedule(func))  # nothing to do on a CPU

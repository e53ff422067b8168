"""The CPU space's inner kernel: the vector axis tiled by whole SIMD vectors, only the
contiguous innermost loop vectorized (never a fused gather across rows), and the register-tile
write cache with the whole reduction inside it and its rows unrolled."""

from __future__ import annotations

import pytest
from tune_workloads import add_2d, matmul

import tilecraft as tc
from tilecraft.ir import BlockRealize, BufferStore, For, ForKind, Node, post_order_visit
from tilecraft.schedule import Schedule
from tilecraft.tune.postproc import (
    RewriteParallelVectorizeUnroll,
    apply_postprocs,
    default_postprocs,
    keys,
)
from tilecraft.tune.postproc.checks import recomputed_reduction
from tilecraft.tune.space import MultiLevelTiling, PostOrderApply, default_space

AVX512 = tc.Target("cpu -mcpu=avx512 -num-cores=1")
AVX2 = tc.Target("cpu -mcpu=avx2 -num-cores=1")


def _vector_stores(func: tc.ir.PrimFunc) -> list[tuple[For, BlockRealize]]:
    """(vectorized loop, the block realize directly under it) for every vectorized loop."""
    found: list[tuple[For, BlockRealize]] = []

    def visit(node: Node) -> None:
        if isinstance(node, For) and node.kind is ForKind.VECTORIZED:
            assert isinstance(node.body, BlockRealize), "a vectorized loop holds one block"
            found.append((node, node.body))

    post_order_visit(func.body, visit)
    return found


def _assert_contiguous(func: tc.ir.PrimFunc) -> None:
    """Each vectorized loop drives only the iterator that is its store's last index."""
    for loop, realize in _vector_stores(func):
        store = realize.block.body
        assert isinstance(store, BufferStore)
        last = store.indices[-1]
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
            uses = any(v is loop.loop_var for v in tc.ir.collect_vars(value))
            assert not uses or iv.var is last, f"{loop.loop_var.name} gathers across rows"


def _tiled(func: tc.ir.PrimFunc, target: tc.Target, seed: int) -> Schedule:
    sch = default_space(target).generate(func, target, seed)[0]
    assert apply_postprocs(sch, default_postprocs(target)) is None
    return sch


@pytest.mark.parametrize(("target", "lanes"), [(AVX512, 16), (AVX2, 8)])
def test_vector_axis_tiles_are_whole_vectors_and_only_they_are_vectorized(
    target: tc.Target, lanes: int
) -> None:
    func = matmul(64, 64, 32)
    for seed in range(6):
        sch = _tiled(func, target, seed)
        _assert_contiguous(sch.func)
        main = [(lp, r) for lp, r in _vector_stores(sch.func) if r.block.name == "C"]
        assert len(main) == 1
        width = main[0][0].extent.value
        assert width % lanes == 0
        assert width // lanes <= (4 if lanes == 16 else 2)
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


def _register_tile(func: tc.ir.PrimFunc, target: tc.Target, pack: int) -> Schedule:
    """The first sketch with the register-tile write cache and ``pack`` forced."""
    trace = PostOrderApply([MultiLevelTiling()]).generate(func, target, 0)[0].trace
    cats = [i for i in trace.sampling_indices() if trace[i].kind == "sample_categorical"]
    trace = trace.with_decision(cats[0], 3).with_decision(cats[1], pack)
    sch = Schedule(func, seed=0)
    trace.apply_to_schedule(sch)
    assert apply_postprocs(sch, default_postprocs(target)) is None
    return sch


@pytest.mark.parametrize("pack", [0, 1, 2])
def test_register_tile_accumulates_the_whole_reduction_with_rows_unrolled(pack: int) -> None:
    func = matmul(64, 64, 48)
    sch = _register_tile(func, AVX512, pack)
    text = sch.func.script()
    assert "C_local" in text
    assert "tc.tune" not in text
    kinds: list[tuple[str, ForKind]] = []

    def visit(node: Node) -> None:
        if isinstance(node, For):
            kinds.append((node.loop_var.name, node.kind))

    post_order_visit(sch.func.body, visit)
    names = [n for n, _ in kinds[::-1]]
    # the reduction loops lie inside every spatial tile loop but the register tile's
    k_first = min(i for i, n in enumerate(names) if n.startswith("k"))
    outer = [n for n in names[:k_first] if not n.startswith("ax")]
    assert all(n.startswith(("i", "j")) for n in outer)
    assert ("i_3", ForKind.UNROLLED) in kinds
    _assert_contiguous(sch.func)
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)
    lowered = tc.build(sch.mod, AVX512).source
    assert "C_local[" in lowered


def test_postproc_vectorizes_only_the_contiguous_innermost_loop() -> None:
    # C[i, j] with loops (j, i): the innermost loop strides a whole row of the output
    func = add_2d(16, 16)
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.reorder(j, i)
    sch.annotate(sch.get_block("root"), keys.VECTORIZE, 64)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert not _vector_stores(sch.func)
    # two short inner loops: the innermost alone is vectorized, never the fused pair
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.split(j, [4, 4])
    sch.annotate(sch.get_block("root"), keys.VECTORIZE, 64)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    ((loop, _),) = _vector_stores(sch.func)
    assert loop.extent.value == 4
    # a long contiguous row is vectorized whole (the compiler strip-mines it)
    sch = Schedule(add_2d(4, 768))
    sch.annotate(sch.get_block("root"), keys.VECTORIZE, 64)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    ((loop, _),) = _vector_stores(sch.func)
    assert loop.extent.value == 768
    tc.testing.check_numeric(sch.func, add_2d(4, 768))


def test_every_store_block_kind_keeps_contiguous_vectors() -> None:
    x = tc.te.placeholder((8, 48), "float32", name="x")
    func = tc.te.create_prim_func([x, tc.topi.softmax(x, axis=-1)])
    checked = 0
    for seed in range(4):
        for sch in default_space(AVX2).generate(func, AVX2, seed):
            if apply_postprocs(sch, default_postprocs(AVX2)) is None:
                _assert_contiguous(sch.func)
                checked += bool(_vector_stores(sch.func))
    assert checked


def _row_shift(m: int = 4, n: int = 16) -> tc.ir.PrimFunc:
    x = tc.te.placeholder((m, n), "float32", name="x")
    k = tc.te.reduce_axis((0, n), name="k")
    mx = tc.te.compute((m,), lambda i: tc.te.max(x[i, k], axis=k), name="mx")
    y = tc.te.compute((m, n), lambda i, j: x[i, j] - mx[i], name="y")
    return tc.te.create_prim_func([x, y])


@pytest.mark.parametrize(("depth", "dropped"), [(0, False), (1, True)])
def test_a_reduction_recomputed_per_element_is_dropped(depth: int, dropped: bool) -> None:
    func = _row_shift()
    sch = Schedule(func)
    sch.compute_at(sch.get_block("mx"), sch.get_loops(sch.get_block("y"))[depth])
    tc.testing.check_numeric(sch.func, func)
    assert (recomputed_reduction(sch.func) == "mx") is dropped
    failed = apply_postprocs(sch, default_postprocs(AVX2))
    assert failed == ("disallow_recomputed_reduction" if dropped else None)

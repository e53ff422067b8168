"""Guarded (padded) vector accesses: a vectorized copy whose loads sit under a padding guard
is never one unconditional vector load reading past the operand's end. A guard that holds for
all lanes or none predicates the vector load as a whole; a guard that changes between lanes
splits it into scalar loads. The emulator checks each vector access as the CUDA code makes it.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import RaceKind
from tilecraft.lower import gpu_vectorize
from tilecraft.runtime import BoundsCheckError
from tilecraft.testing import check_numeric

SM80 = tc.Target("cuda -arch=sm_80")


def _padded(shape: tuple[int, ...], padded: tuple[int, ...]) -> tc.ir.PrimFunc:
    """``B = 2 * pad(A)``: A zero-padded (at the end of each axis) from ``shape`` to ``padded``."""
    a = tc.te.placeholder(shape, "float32", name="A")

    def pad(*idx: tc.ir.Expr) -> tc.ir.Expr:
        inside = [i < n for i, n in zip(idx, shape, strict=True) if n != 0]
        cond = inside[0]
        for c in inside[1:]:
            cond = tc.ir.And(cond, c)
        return tc.ir.if_then_else(cond, a[idx], tc.ir.const(0.0, "float32"))

    p = tc.te.compute(padded, pad, name="P")
    b = tc.te.compute(padded, lambda *idx: p[idx] * 2.0, name="B")
    return tc.te.create_prim_func([a, b])


def _fetch_through_shared(func: tc.ir.PrimFunc, lanes: int = 4) -> tc.Schedule:
    """Blocks of 128 elements; the padded tile fetched cooperatively with ``lanes``-wide
    vectors by 16 threads."""
    sch = tc.Schedule(func)
    b = sch.get_block("B")
    bi, ii = sch.split(sch.fuse(*sch.get_loops(b)), [None, 128])
    sch.bind(bi, "blockIdx.x")
    _, tx = sch.split(ii, [None, 16])
    sch.bind(tx, "threadIdx.x")
    shared = sch.cache_read(b, 0, "shared")
    sch.compute_at(shared, bi)
    sch.compute_inline(sch.get_block("P"))
    fused = sch.fuse(*sch.get_loops(shared)[1:])
    _, tx, vec = sch.split(fused, [None, 16, lanes])
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    return sch


def _cuda(sch: tc.Schedule) -> str:
    return tc.codegen.cuda_source(sch.mod, SM80)


def _inputs(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype("float32")


def test_row_padding_predicates_the_vector_load_as_a_whole() -> None:
    func = _padded((70, 8), (80, 8))  # the guard (row < 70) is one value for the 4 lanes
    sch = _fetch_through_shared(func)
    src = _cuda(sch)
    loads = re.findall(r"(.*)= \*\(const float4\*\)\(A \+", src)
    assert len(loads) == 1, src
    assert re.search(r"if \(.*< 70", src) or "? *(const float4*)" in src, src
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80)


def test_padding_inside_a_vector_splits_the_vector_load() -> None:
    func = _padded((70,), (128,))  # the guard (i < 70) differs between lanes of the last one
    sch = _fetch_through_shared(func)
    src = _cuda(sch)
    assert "(const float4*)(A" not in src, src
    assert "*(float4*)(" in src  # the shared store stays one vector store
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80)


def test_emulator_reports_an_unguarded_vector_load_past_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the guard ignored (the code generator's old behaviour), the emulator sees the
    vector load read past A's end, although every lane it uses is in bounds."""
    monkeypatch.setattr(gpu_vectorize, "_lane_uniform", lambda guards, var: True)
    monkeypatch.setattr(gpu_vectorize, "_guard_of", lambda guards: None)
    func = _padded((70,), (128,))
    sch = _fetch_through_shared(func)
    lib = tc.build(sch.func, target=SM80, emulate="racecheck")
    a, b = _inputs(70), np.zeros(128, "float32")
    with pytest.raises(BoundsCheckError) as info:
        lib["main"](a, b)
    assert info.value.kind is RaceKind.OUT_OF_BOUNDS
    assert "vector load A" in str(info.value)


@pytest.mark.nvcc
def test_guarded_vector_loads_compile_with_ptxas() -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    from tilecraft.runtime.cuda_compile import ptxas_info

    sources = [
        _cuda(_fetch_through_shared(_padded(s, p)))
        for s, p in (((70, 8), (80, 8)), ((70,), (128,)))
    ]
    for src in sources:
        info = ptxas_info(src, "sm_80")
        assert info
        assert all(k.spill_stores == 0 for k in info.values())
    assert ptxas_info(_cuda(_padded_matmul_pipelined()[1]), "sm_80")  # cp.async zero-fill


def _padded_matmul_pipelined() -> tuple[tc.ir.PrimFunc, tc.Schedule]:
    """``C = pad(A) @ B``, A (70, 64) padded to 80 rows; the A tile is fetched into shared
    memory in a two-stage software pipeline (cp.async on sm_80)."""
    a = tc.te.placeholder((70, 64), "float32", name="A")
    b = tc.te.placeholder((64, 64), "float32", name="B")
    p = tc.te.compute(
        (80, 64),
        lambda i, k: tc.ir.if_then_else(i < 70, a[i, k], tc.ir.const(0.0, "float32")),
        name="P",
    )
    r = tc.te.reduce_axis((0, 64), name="k")
    c = tc.te.compute((80, 64), lambda i, j: tc.te.sum(p[i, r] * b[r, j], axis=r), name="C")
    func = tc.te.create_prim_func([a, b, c])
    sch = tc.Schedule(func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    bi, ii = sch.split(i, [None, 16])
    ko, ki = sch.split(k, [None, 16])
    sch.reorder(bi, j, ko, ki, ii)
    sch.bind(bi, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    shared = sch.cache_read(blk, 0, "shared")
    sch.compute_at(shared, ko)
    sch.compute_inline(sch.get_block("P"))
    fused = sch.fuse(*sch.get_loops(shared)[-2:])
    _, tx, vec = sch.split(fused, [None, 64, 4])
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    sch.decompose_reduction(blk, ko)
    sch.annotate(ko, "software_pipeline_stage", [0, 1])
    sch.annotate(ko, "software_pipeline_order", [0, 1])
    return func, sch


def test_guarded_cp_async_uses_the_zero_fill_form() -> None:
    func, sch = _padded_matmul_pipelined()
    src = _cuda(sch)
    assert "cp.async.cg.shared.global [%0], [%1], 16, %2;" in src, src
    assert "? 16 : 0" in src
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80)

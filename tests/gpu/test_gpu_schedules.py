"""The kernels of issue 11, built by the public Schedule API from te/topi functions
(tests/gpu/schedules.py): equal to the unscheduled function under GPU emulation at reduced
sizes, and compiled with nvcc/ptxas at full size with no spills, within the target's register
and shared-memory limits (sm_80 in the default run, sm_90 under ``-m slow``)."""

from __future__ import annotations

import pytest
import schedules as ks

import tilecraft as tc
from tilecraft.ir import For, ForKind, PrimFunc, Var, post_order_visit
from tilecraft.lower.gpu_nodes import ThreadSync
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.lower.gpu_verify import STATIC_SHARED_LIMIT
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.schedule import Schedule, Trace
from tilecraft.testing import check_numeric, verify_trace_roundtrip

SM90 = tc.Target("cuda -arch=sm_90")
ARCHS = ("sm_80", "sm_90")


def _emulate(sch: Schedule, func: PrimFunc, **kw: object) -> None:
    """Equal to the unscheduled function, run GPU-lowered under the race checker."""
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM90, **kw)  # type: ignore[arg-type]


def _syncs(func: PrimFunc) -> list[int]:
    """Barriers per kernel, counting a barrier in a loop once."""
    counts = []
    for k in lower_gpu(func, SM90).kernels:
        n = 0

        def fn(node: object) -> None:
            nonlocal n
            n += isinstance(node, ThreadSync)

        post_order_visit(k.body, fn)
        counts.append(n)
    return counts


# -- numerics under emulation, at reduced sizes ---------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_simt_gemm_matches_numpy(dtype: str) -> None:
    func = ks.gemm_func(64, 64, 64, dtype)
    sch = ks.schedule_gemm(func)
    _emulate(sch, func)
    verify_trace_roundtrip(sch, func)


def test_gemv_matches_numpy() -> None:
    func = ks.gemv_func(16, 2048, "float16")
    _emulate(ks.schedule_gemv(func), func)


def test_transpose_matches_numpy() -> None:
    func = ks.transpose_func(64)
    _emulate(ks.schedule_transpose(func), func)


@pytest.mark.parametrize("make", [ks.softmax_func, ks.rms_norm_func])
@pytest.mark.parametrize(
    ("rows", "cols", "sizes"),
    [(4, 512, {}), ("m", 512, {"m": 3}), (4, "n", {"n": 300}), (4, "n", {"n": 1000})],
)
def test_row_reductions_match_numpy(make, rows, cols, sizes) -> None:
    r = Var("m") if rows == "m" else rows
    c = Var("n") if cols == "n" else cols
    func = make(r, c)
    sch = ks.schedule_row_reduction(func)
    _emulate(sch, func, shape_vars=sizes or None)


# -- the structure the schedules promise ----------------------------------------------------


def test_gemm_tiles_are_compacted_padded_and_fetched_cooperatively() -> None:
    func = ks.gemm_func(1024, 1024, 1024, "float32")
    (k,) = lower_gpu(ks.schedule_gemm(func).func, SM90).kernels
    shared = {b.name: b.shape[0].value for b in k.shared}
    # 32 x 16 of A and 16 x 64 of B, each row padded by 4 floats
    assert shared == {"A_shared": 32 * 20, "B_shared": 16 * 68}
    assert sum(shared.values()) * 4 < 48 * 1024
    assert k.threads_per_block == 128
    assert _syncs(ks.schedule_gemm(func).func) == [2]  # tiles loaded; tiles consumed


def test_gemm_cuda_uses_vector_accesses_and_a_register_tile() -> None:
    src = build_cuda_source(ks.schedule_gemm(ks.gemm_func(1024, 1024, 1024)).mod, SM90).text
    assert "float C_local[16];" in src
    assert src.count("*(const float4*)(A +") == 1
    assert src.count("*(const float4*)(B +") == 1
    assert src.count("*(const float4*)(B_shared +") == 1  # a row of B into registers
    assert "*(float4*)(C +" in src  # the register tile stored back with vector stores
    half = build_cuda_source(ks.schedule_gemm(ks.gemm_func(1024, 1024, 1024, "float16")).mod, SM90)
    assert half.text.count("*(const uint4*)(") == 2  # half8 loads of A and B
    assert "*(uint2*)(D +" in half.text  # four halves per row of the register tile


def test_gemv_loads_weights_through_registers_with_128_bit_vectors() -> None:
    func = ks.gemv_func(4096, 4096, "float16")
    src = build_cuda_source(ks.schedule_gemv(func).mod, SM90).text
    assert "const uint4 tc_vec0 = *(const uint4*)(W +" in src
    assert "__half W_local[8];" in src
    assert "__shfl_down_sync" in src
    (k,) = lower_gpu(ks.schedule_gemv(func).func, SM90).kernels
    assert [e.value for e in k.grid] == [1024, 1, 1]


def test_transpose_tile_is_padded_by_one_element() -> None:
    (k,) = lower_gpu(ks.schedule_transpose(ks.transpose_func(4096)).func, SM90).kernels
    assert [b.shape[0].value for b in k.shared] == [32 * 33]
    assert _syncs(ks.schedule_transpose(ks.transpose_func(4096)).func) == [1]


@pytest.mark.parametrize("make", [ks.softmax_func, ks.rms_norm_func])
def test_row_reductions_run_one_block_per_symbolic_row(make) -> None:
    func = make(Var("m"), 4096)
    (k,) = lower_gpu(ks.schedule_row_reduction(func).func, SM90).kernels
    assert isinstance(k.grid[0], Var)
    assert k.block[0].value == 256


def test_schedules_replay_from_their_traces() -> None:
    func = ks.gemm_func(64, 64, 64, "float16")
    sch = ks.schedule_gemm(func)
    again = Schedule(func)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(again)
    assert tc.ir.structural_equal(again.func, sch.func)


def test_gemm_inner_loops_are_unrolled_by_the_pragma() -> None:
    low = lower_gpu(ks.schedule_gemm(ks.gemm_func(256, 256, 256)).func, SM90)
    kinds = []
    post_order_visit(
        low.kernels[0].body, lambda n: kinds.append(n.kind) if isinstance(n, For) else None
    )
    assert ForKind.UNROLLED in kinds
    assert kinds.count(ForKind.SERIAL) == 1  # only the k-tile loop stays rolled


# -- nvcc/ptxas at full size ----------------------------------------------------------------

FULL = {
    "gemm_fp32": lambda: ks.schedule_gemm(ks.gemm_func(1024, 1024, 1024, "float32")),
    "gemm_fp16": lambda: ks.schedule_gemm(ks.gemm_func(1024, 1024, 1024, "float16")),
    "gemv_fp16": lambda: ks.schedule_gemv(ks.gemv_func(4096, 4096, "float16")),
    "transpose": lambda: ks.schedule_transpose(ks.transpose_func(4096)),
    "softmax_rows": lambda: ks.schedule_row_reduction(ks.softmax_func(Var("m"), 4096)),
    "softmax_cols": lambda: ks.schedule_row_reduction(ks.softmax_func(4096, Var("n"))),
    "rms_norm_rows": lambda: ks.schedule_row_reduction(ks.rms_norm_func(Var("m"), 4096)),
    "rms_norm_cols": lambda: ks.schedule_row_reduction(ks.rms_norm_func(4096, Var("n"))),
}


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", [ARCHS[0], pytest.param(ARCHS[1], marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(FULL))
def test_kernel_compiles_without_spills(name: str, arch: str) -> None:
    target = tc.Target(f"cuda -arch={arch}")
    src = build_cuda_source(FULL[name]().mod, target)
    info = ptxas_info(src.text, arch)
    (kernel,) = [k for prog in src.programs.values() for k in prog.kernels]
    stats = info[kernel.name]
    limits = target.gpu
    assert limits is not None
    assert not stats.spills, stats
    assert stats.stack_bytes == 0, stats  # no local-memory arrays either
    assert 0 < stats.registers <= limits.max_registers_per_thread
    assert stats.registers * (kernel.threads_per_block or 1) <= limits.registers_per_block
    assert stats.shared_bytes <= STATIC_SHARED_LIMIT
    if name.startswith("gemm"):
        assert stats.shared_bytes < 48 * 1024

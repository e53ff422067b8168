"""The GPU emulator runs the GPU-lowered program: every kernel, every mode, Schedule-API GEMM.

``emulate=True`` and ``"racecheck"`` lower exactly as the CUDA backend does (barriers, cross-
thread reductions, vectorization, scopes, host/device split) and run the kernels thread by
thread on the CPU; ``"serial"`` is the old quick mode.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from emulator_schedules import GPU, make_reverse_rows_symbolic, make_row_sum, make_simt_gemm
from kernels import ALL, make_matmul, make_scale_symbolic, make_softmax, make_transpose
from test_gpu_storage_align import aligned_transpose

import tilecraft as tc
from tilecraft.errors import BuildError, EmulationError, RaceCheckError
from tilecraft.graph import GraphBuilder, Legalize
from tilecraft.lower.gpu_split_host_device import split_host_device
from tilecraft.runtime import ArgumentError, ArgumentTypeError
from tilecraft.runtime.emulate import EmulatedModule, EmulateMode, emulate_mode
from tilecraft.testing import check_numeric

MODES = [True, "racecheck"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(ALL))
def test_every_gpu_test_kernel_matches_numpy(name: str, mode: object) -> None:
    func, ref = ALL[name]()
    shape_vars = {"n": 700} if name == "scale_symbolic" else None
    check_numeric(func, ref, emulate_gpu=mode, target=GPU, shape_vars=shape_vars, rtol=1e-4,
                  atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scope", ["shared", "shared.dyn"])
def test_padded_transposes_of_the_storage_align_tests(mode: object, scope: str) -> None:
    _, sch, ref = aligned_transpose((2, 32, 1), scope=scope)
    check_numeric(sch.func, ref, emulate_gpu=mode, target=GPU)


def test_emulation_runs_the_gpu_lowering_not_serial_loops() -> None:
    func, _ = make_matmul()
    threads = tc.build(func, target=GPU, emulate=True)
    assert isinstance(threads, EmulatedModule)
    assert "tc_emu_barrier(tc_self" in threads.source  # the barriers InsertThreadSync placed
    (prog,) = threads.emulator.programs.values()
    assert [k.name for k in prog.kernels] == ["matmul_kernel0"]
    serial = tc.build(func, target=GPU, emulate="serial")
    assert not isinstance(serial, EmulatedModule)
    assert "tc_emu" not in serial.source
    assert "threadIdx" not in serial.source


@pytest.mark.parametrize("n", [1, 255, 256, 700])
@pytest.mark.parametrize("mode", MODES)
def test_symbolic_extent_sets_the_grid_at_call_time(n: int, mode: object) -> None:
    func, ref = make_scale_symbolic()
    check_numeric(func, ref, emulate_gpu=mode, target=GPU, shape_vars={"n": n})


@pytest.mark.parametrize("mode", MODES)
def test_symbolic_number_of_rows_with_warp_shuffles(mode: object) -> None:
    _, sch, ref = make_row_sum("m", 128, 32)
    for m in (1, 5, 17):
        check_numeric(sch.func, ref, emulate_gpu=mode, target=GPU, shape_vars={"m": m})


@pytest.mark.parametrize("mode", MODES)
def test_symbolic_row_length_in_dynamic_shared_memory(mode: object) -> None:
    _, sch, ref = make_reverse_rows_symbolic()
    (k,) = split_host_device(tc.lower.lower_gpu_function(sch.func, GPU)).kernels
    (tile,) = k.dyn_shared
    assert not isinstance(tile.shape[0], tc.ir.IntImm)
    for n in (1, 31, 100):
        check_numeric(sch.func, ref, emulate_gpu=mode, target=GPU, shape_vars={"n": n})


def test_simt_gemm_256_emulates_in_seconds() -> None:
    """A 256^3 GEMM from the Schedule API (16x16 tiles, 8x8 threads, 64 barrier phases per
    block, 256 blocks): about 0.05 s emulated and 0.1 s race-checked on one core."""
    _, sch, ref = make_simt_gemm(256)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (256, 256)).astype("float32")
    b = rng.uniform(-1, 1, (256, 256)).astype("float32")
    for mode in MODES:
        lib = tc.build(sch.func, target=GPU, emulate=mode)
        c = np.full((256, 256), np.nan, "float32")
        start = time.perf_counter()
        lib["main"](a, b, c)
        seconds = time.perf_counter() - start
        np.testing.assert_allclose(c, ref(a, b), rtol=1e-4, atol=1e-4)
        assert seconds < 5.0, f"{mode}: {seconds:.2f} s"


def test_simt_gemm_with_dynamic_shared_tiles() -> None:
    _, sch, ref = make_simt_gemm(128, bm=32, bn=32, bk=8, scope="shared.dyn")
    (k,) = split_host_device(tc.lower.lower_gpu_function(sch.func, GPU)).kernels
    assert [b.scope for b in k.dyn_shared] == ["shared.dyn", "shared.dyn"]
    for mode in MODES:
        check_numeric(sch.func, ref, emulate_gpu=mode, target=GPU, rtol=1e-4, atol=1e-4)


def test_emulate_argument_is_validated() -> None:
    func, _ = make_transpose(32)
    with pytest.raises(ArgumentError, match=r"'serial' or 'racecheck', got 'race'"):
        tc.build(func, target=GPU, emulate="race")
    with pytest.raises(ArgumentTypeError, match=r"emulate must be True, False.*int 1"):
        tc.build(func, target=GPU, emulate=1)  # type: ignore[arg-type]
    with pytest.raises(BuildError, match=r"racecheck.*needs a CUDA target"):
        tc.build(func, target="cpu", emulate="racecheck")
    with pytest.raises(ArgumentError, match=r"check_numeric: emulate must be"):
        check_numeric(func, lambda a: a.T, emulate_gpu="yes")
    assert emulate_mode(True) is EmulateMode.THREADS
    assert emulate_mode("serial") is EmulateMode.SERIAL
    assert emulate_mode(EmulateMode.RACECHECK) is EmulateMode.RACECHECK


def test_cpu_target_keeps_serial_emulation() -> None:
    func, _ = make_transpose(32)
    lib = tc.build(func, target="cpu", emulate=True)
    assert not isinstance(lib, EmulatedModule)
    a = np.arange(32 * 32, dtype="float32").reshape(32, 32)
    b = np.zeros_like(a)
    lib["transpose"](a, b)
    np.testing.assert_array_equal(b, a.T)


def test_check_numeric_emulates_gpu_schedules_for_a_cpu_target_too() -> None:
    """``emulate_gpu=True`` with the default target runs GPU-scheduled functions (the one
    under test, or a PrimFunc reference) through the emulator; unscheduled ones on the CPU."""
    func, sch, _ = make_row_sum(8, 64, 32)
    check_numeric(func, sch.func, emulate_gpu=True)
    check_numeric(sch.func, func, emulate_gpu="racecheck")
    check_numeric(sch.func, func, emulate_gpu="serial")


def test_a_fault_leaves_the_library_usable() -> None:
    func, _ = make_scale_symbolic()
    lines = func.script().splitlines()
    unguarded = tc.script.parse("\n".join(ln for ln in lines if "T.where" not in ln))
    lib = tc.build(unguarded, target=GPU, emulate="racecheck")
    a, b = np.ones(300, "float32"), np.zeros(300, "float32")
    with pytest.raises(RaceCheckError, match=r"scale: out-of-bounds (load A|store B)\[300\]"):
        lib["scale"](a, b)
    a, b = np.ones(512, "float32"), np.zeros(512, "float32")  # a whole number of blocks
    lib["scale"](a, b)
    np.testing.assert_array_equal(b, np.full(512, 3.0, "float32"))


def test_bounds_check_without_racecheck_raises_a_bounds_error() -> None:
    func, _ = make_scale_symbolic()
    lines = func.script().splitlines()
    unguarded = tc.script.parse("\n".join(ln for ln in lines if "T.where" not in ln))
    lib = tc.build(unguarded, target=GPU, emulate=True, bounds_check=True)
    assert lib.bounds_checked
    with pytest.raises(tc.runtime.BoundsCheckError, match=r"outside \[0, 300\)"):
        lib["scale"](np.ones(300, "float32"), np.zeros(300, "float32"))


def _graph_with_gpu_kernel(cols: int | str = 64) -> tc.IRModule:
    bb = GraphBuilder()
    x = bb.param("x", (4, cols), "float32")
    mod = Legalize()(tc.IRModule({"main": bb.finish(bb.emit("exp", [x]), "main")}))
    sch = tc.Schedule(mod["exp"])
    i, j = sch.get_loops(sch.get_block("T_exp"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    funcs = dict(mod.functions)
    funcs["exp"] = sch.func.update(name="exp", attrs=mod["exp"].attrs)
    return tc.IRModule(funcs)


@pytest.mark.parametrize("mode", MODES)
def test_graph_modules_link_the_emulator(mode: object) -> None:
    exe = tc.build(_graph_with_gpu_kernel(), GPU, emulate=mode)
    assert isinstance(exe.lib, EmulatedModule)
    assert exe.lib.racecheck == (mode == "racecheck")
    f = exe["main"]
    assert (f.native is None) == (mode == "racecheck")  # race-checked: kernel by kernel
    a = np.random.default_rng(3).standard_normal((4, 64)).astype("float32")
    np.testing.assert_allclose(f(a), np.exp(a), rtol=1e-6)


def test_graph_native_entry_reports_emulator_faults() -> None:
    """A block of n threads (n from the input's shape): 2000 threads cannot launch."""
    exe = tc.build(_graph_with_gpu_kernel("n"), GPU, emulate=True)
    f = exe["main"]
    assert f.native is not None
    a = np.zeros((4, 100), "float32")
    np.testing.assert_array_equal(f(a), np.ones((4, 100), "float32"))
    with pytest.raises(EmulationError, match=r"exp: cannot launch kernel exp_kernel0: a block "
                       r"of more than 1024 threads"):  # fmt: skip
        f(np.zeros((4, 2000), "float32"))
    np.testing.assert_array_equal(f(a), np.ones((4, 100), "float32"))  # still usable


def test_softmax_source_runs_shuffles_through_the_collective_registry() -> None:
    func, _ = make_softmax()
    lib = tc.build(func, target=GPU, emulate=True)
    assert "tc_emu_collective(tc_self" in lib.source
    assert "static void tc_emu_shfl(tc_emu_warp_call* c)" in lib.source

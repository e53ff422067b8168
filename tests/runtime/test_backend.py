"""One backend per target kind: the choice, the literal pipelines, artifacts that load alone,
and one build path shared by ``tc.build``, the graph executor and the tuner's builder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.codegen import emit_cuda
from tilecraft.errors import BuildError
from tilecraft.graph import GraphBuilder, get_pipeline
from tilecraft.lower import (
    CheckLocalPrivate,
    CollectStorageAlign,
    CompactBufferAllocation,
    CompactTensorCoreBuffers,
    CompactThreadDims,
    ConvertBlocksToLoops,
    ExpandWarpTiles,
    ExposeShapeVars,
    FlattenBuffer,
    HoistInvariantGuards,
    HoistSharedAllocations,
    InjectSoftwarePipeline,
    LowerInitBlock,
    LowerThreadBindings,
    LowerVirtualThreads,
    LowerWarpFragments,
    ParallelGrain,
    PlanAllocations,
    ShareOutputStorage,
    Simplify,
    UnrollLoops,
)
from tilecraft.lower.bounds_check import InsertBoundsChecks
from tilecraft.lower.gpu_cross_thread_reduction import LowerCrossThreadReduction
from tilecraft.lower.gpu_thread_sync import InsertThreadSync
from tilecraft.lower.gpu_vectorize import VectorizeGPULoops
from tilecraft.runtime import backend as be
from tilecraft.runtime.executor import kernel_prim_funcs
from tilecraft.tune.builder._compile import build_artifact

CPU = tc.Target("cpu")
GPU = tc.Target("cuda -arch=sm_80")


def _add_one(n: int = 256) -> tc.PrimFunc:
    A = tc.te.placeholder((n,), "float32", name="A")
    B = tc.te.compute((n,), lambda i: A[i] + tc.ir.FloatImm("float32", 1.0), name="B")
    return tc.te.create_prim_func([A, B])


def _gpu_add_one() -> tc.IRModule:
    sch = tc.Schedule(_add_one())
    bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod


@pytest.mark.parametrize(
    ("target", "emulate", "cls", "serial"),
    [
        (CPU, False, be.CPUBackend, False),
        (CPU, True, be.CPUBackend, True),
        (CPU, "serial", be.CPUBackend, True),
        (GPU, False, be.CUDABackend, None),
        (GPU, "serial", be.CPUBackend, True),
        (GPU, True, be.EmulatedCUDABackend, None),
        (GPU, "racecheck", be.EmulatedCUDABackend, None),
    ],
)
def test_backend_of_decides_the_kind(target, emulate, cls, serial) -> None:  # type: ignore[no-untyped-def]
    backend = be.backend_of(target, emulate)
    assert type(backend) is cls
    if serial is not None:
        assert backend.emulate_gpu is serial


def test_backend_of_refuses_what_no_backend_does() -> None:
    with pytest.raises(BuildError, match=r"racecheck.*needs a CUDA target"):
        be.backend_of(CPU, "racecheck")
    with pytest.raises(BuildError, match="bounds_check=True is not available"):
        be.backend_of(GPU, False, bounds_check=True)


def test_cuda_pipeline_is_the_literal_list_with_one_storage_align() -> None:
    expected = [
        CollectStorageAlign, LowerCrossThreadReduction, LowerInitBlock, PlanAllocations,
        ConvertBlocksToLoops, LowerWarpFragments, CompactTensorCoreBuffers,
        InjectSoftwarePipeline, CheckLocalPrivate, CompactBufferAllocation,
        HoistSharedAllocations, LowerVirtualThreads, UnrollLoops, ExposeShapeVars,
        CompactThreadDims, FlattenBuffer, Simplify, VectorizeGPULoops, InsertThreadSync,
    ]  # fmt: skip
    for backend in (be.CUDABackend(), be.EmulatedCUDABackend(tc.runtime.EmulateMode.THREADS)):
        passes = backend.pipeline(GPU)
        assert [type(p) for p in passes] == expected
        assert sum(isinstance(p, CollectStorageAlign) for p in passes) == 1
    sm75 = be.CUDABackend().pipeline(tc.Target("cuda -arch=sm_75"))
    assert [type(p) for p in sm75] == expected


def test_cpu_pipeline_is_the_literal_list() -> None:
    plain = [
        ExpandWarpTiles, CollectStorageAlign, LowerInitBlock, PlanAllocations,
        ConvertBlocksToLoops, LowerThreadBindings, HoistInvariantGuards, CompactBufferAllocation,
        ShareOutputStorage, UnrollLoops, ExposeShapeVars, FlattenBuffer, Simplify, ParallelGrain,
    ]  # fmt: skip
    assert [type(p) for p in be.CPUBackend().pipeline(CPU)] == plain
    checked = [type(p) for p in be.CPUBackend(bounds_check=True).pipeline(CPU)]
    assert checked == [*plain[:11], InsertBoundsChecks, *plain[11:]]
    assert [type(p) for p in tc.lower.get_pipeline(CPU)] == plain


def test_cpu_artifact_travels_as_json_and_loads_alone() -> None:
    backend = be.backend_of(CPU)
    mod = tc.IRModule({"add_one": _add_one()})
    art = backend.compile(backend.emit(backend.lower(mod, CPU), CPU), CPU)
    back = be.Artifact.from_message(json.loads(json.dumps(art.as_message())))
    assert back == art
    lib = be.load_artifact(back)
    a = np.arange(256, dtype="float32")
    b = np.zeros(256, "float32")
    lib["add_one"](a, b)
    np.testing.assert_array_equal(b, a + 1)
    assert lib.source == tc.build(mod, CPU).source


def test_loading_lowers_and_emits_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = be.CUDABackend()
    low = cuda.lower(_gpu_add_one(), GPU)
    text = cuda.emit(low, GPU).text
    decoded = be.program.decode(be.program.encode(low))  # what an artifact carries
    assert emit_cuda(decoded.programs, GPU).text == text  # the same kernels, launches, buffers

    emu = be.backend_of(GPU, True)
    art = emu.compile(emu.emit(emu.lower(_gpu_add_one(), GPU), GPU), GPU)
    message = json.loads(json.dumps(art.as_message()))

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a loader lowered or emitted")

    for mod, name in [
        (be.cuda, "lower_gpu"), (be.emulated, "emit_emulator"), (be.cpu, "emit_c"),
        (tc.ir.transform.Sequential, "__call__"),
    ]:  # fmt: skip
        monkeypatch.setattr(mod, name, forbidden)
    lib = be.load_artifact(be.Artifact.from_message(message))
    assert isinstance(lib, tc.runtime.EmulatedModule)
    a = np.arange(256, dtype="float32")
    b = np.zeros(256, "float32")
    lib["main"](a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_a_backend_refuses_another_kind_of_artifact() -> None:
    backend = be.backend_of(CPU)
    art = backend.compile(backend.emit(backend.lower(_add_one(), CPU), CPU), CPU)
    with pytest.raises(BuildError, match="loads 'cuda' artifacts"):
        be.CUDABackend().load(art)


def _scheduled_graph() -> tc.IRModule:
    from tilecraft import rules as dl

    bb = GraphBuilder()
    x = bb.param("x", (8, 64), "float32")
    w = bb.param("w", (64, 32), "float32")
    out = bb.emit("relu", [bb.emit("matmul", [x, w])])
    mod = tc.IRModule({"main": bb.finish(out, "main", {"num_input": 1})})
    with CPU:
        return dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(get_pipeline("zero")(mod))


def test_build_executor_and_tuner_emit_the_same_c_and_share_the_library() -> None:
    mod = _scheduled_graph()
    prims = kernel_prim_funcs(mod)
    assert len(prims.functions) == 1
    (name,) = prims.functions
    assert prims[name].attrs.get("tc.schedule_rule")  # a rule scheduled it
    lib = tc.build(prims, CPU)
    exe = tc.build(mod, CPU)
    assert exe.lib.source.startswith(lib.source)  # the executor appends its entries
    art = build_artifact(prims, CPU)
    assert art.source == lib.source
    assert art.lib_path == str(lib.path)  # the measured binary is the one tc.build loads
    with ms.LocalBuilder(max_workers=1, recycle_after=None) as builder:
        (res,) = builder.build([ms.BuilderInput(prims, CPU)])
    assert res.error is None
    assert res.artifact is not None
    assert res.artifact.source == lib.source
    assert res.artifact.lib_path == str(lib.path)


def test_march_reaches_the_compiler_in_place_of_native() -> None:
    art = build_artifact(tc.IRModule({"main": _add_one()}), CPU, march="x86-64")
    native = build_artifact(tc.IRModule({"main": _add_one()}), CPU)
    assert art.source == native.source
    assert art.lib_path != native.lib_path  # another key: other flags
    flags = tc.runtime.compiler.build_flags(tc.runtime.find_compiler(), "", ("-march=x86-64",))
    assert "-march=x86-64" in flags
    assert "-march=native" not in flags
    with pytest.raises(BuildError, match="not a machine option"):
        tc.runtime.compiler.build_flags(tc.runtime.find_compiler(), "", ("-o/tmp/x",))


@pytest.mark.nvcc
def test_cuda_artifact_loads_its_cubin_without_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    art = build_artifact(_gpu_add_one(), GPU)
    assert art.kind == "cuda"
    assert art.lib_bytes
    assert art.lib_path is not None
    assert Path(art.lib_path).read_bytes() == art.lib_bytes  # the cached cubin
    message = json.loads(json.dumps(art.as_message()))
    expected_source = tc.runtime.cuda_source(_gpu_add_one(), GPU)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the CUDA loader lowered or emitted")

    monkeypatch.setattr(be.cuda, "lower_gpu", forbidden)
    monkeypatch.setattr(be.cuda, "emit_cuda", forbidden)
    lib = be.load_artifact(be.Artifact.from_message(message))
    assert isinstance(lib, tc.runtime.CUDAModule)
    assert lib.cubin == art.lib_bytes
    assert lib.source == expected_source
    assert [k.name for k in lib["main"].program.kernels] == ["main_kernel0"]

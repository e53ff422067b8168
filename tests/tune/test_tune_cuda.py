"""CUDARunner on a real GPU (marked ``gpu``: skipped where no CUDA device can be opened)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tune_workloads import add_one

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import TuneError
from tilecraft.runtime.cuda_driver import device_available
from tilecraft.schedule import Schedule

GPU = tc.Target("cuda")


def bind_1d(sch: Schedule) -> None:
    """Split the loop by a sampled thread count and bind blocks and threads."""
    (loop,) = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(loop, sch.sample_perfect_tile(loop, n=2, max_innermost_factor=256))
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")


@pytest.mark.gpu
def test_cuda_runner_times_and_checks_candidates() -> None:
    func = add_one(1 << 16)
    schs = [ms.ScheduleFnSpace(bind_1d).generate(func, GPU, seed)[0] for seed in range(3)]
    with ms.LocalBuilder(max_workers=1) as builder, ms.CUDARunner(number=2, repeat=2) as runner:
        built = builder.build([ms.BuilderInput(s.mod, GPU) for s in schs])
        assert [b.error for b in built] == [None] * 3
        assert all(b.artifact is not None and b.artifact.lib_bytes for b in built)
        results = runner.run(
            [
                ms.RunnerInput(b.artifact, ms.args_info(func), func)  # type: ignore[arg-type]
                for b in built
            ]
        )
    for r in results:
        assert r.error is None
        assert r.run_secs is not None
        assert len(r.run_secs) == 2
        assert min(r.run_secs) > 0


@pytest.mark.gpu
def test_tune_tir_on_a_gpu(tmp_path: Path) -> None:
    func = add_one(1 << 16)
    db = ms.tune_tir(
        func,
        GPU,
        work_dir=tmp_path,
        max_trials_global=4,
        num_trials_per_iter=2,
        space=bind_1d,
        seed=0,
    )
    assert len(db) == 4
    assert all(r.ok for r in db.get_all_tuning_records())
    sch = ms.compile_tir(db, func, GPU)
    assert sch is not None
    lib = tc.build(sch.mod, target=GPU)
    assert "threadIdx.x" in lib.source or "threadIdx" in lib.source


def test_cuda_runner_refuses_cache_flush() -> None:
    with pytest.raises(TuneError, match="cache_flush"):
        ms.CUDARunner(cache_flush=True)


@pytest.mark.nvcc
def test_cuda_candidates_build_without_a_gpu() -> None:
    func = add_one(1 << 12)
    schs = [ms.ScheduleFnSpace(bind_1d).generate(func, GPU, seed)[0] for seed in range(2)]
    unbound = tc.IRModule({"main": func})  # no thread bindings: not a valid GPU kernel
    with ms.LocalBuilder(max_workers=1) as builder:
        built = builder.build(
            [ms.BuilderInput(m, GPU) for m in (schs[0].mod, schs[1].mod, unbound)]
        )
    for b in built[:2]:
        assert b.error is None
        assert b.artifact is not None
        assert b.artifact.kind == "cuda"
        assert b.artifact.lib_bytes
        assert "__global__" in b.artifact.source
    assert built[2].artifact is None
    assert built[2].error is not None
    if not device_available():  # measuring needs the driver: a failed result, not a crash
        art = built[0].artifact
        assert art is not None
        with ms.CUDARunner(timeout_s=30) as runner, pytest.warns(UserWarning, match="no GPU"):
            (res,) = runner.run([ms.RunnerInput(art, ms.args_info(func), func)])
        assert res.run_secs is None
        assert "CUDA" in (res.error or "")

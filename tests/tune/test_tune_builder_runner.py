"""LocalBuilder and LocalRunner: real builds and runs in worker processes, failures isolated."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import numpy as np
import pytest
from tune_workloads import PoisonBuilder, add_one, matmul, poison_source, tile_1d

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import TuneError
from tilecraft.runtime import compile_shared
from tilecraft.tune.builder._compile import handle_build
from tilecraft.tune.runner._measure import compare, load, make_args, time_calls

CPU = tc.Target("cpu")


def _split(func: tc.PrimFunc, block: str, factor: int) -> tc.IRModule:
    sch = tc.Schedule(func)
    sch.split(sch.get_loops(sch.get_block(block))[0], [None, factor])
    return sch.mod


@pytest.fixture(scope="module")
def builder() -> ms.LocalBuilder:
    b = ms.LocalBuilder(max_workers=2, timeout_s=60, recycle_after=None)
    yield b
    b.close()


@pytest.fixture(scope="module")
def runner() -> ms.LocalRunner:
    r = ms.LocalRunner(timeout_s=2.0, num_threads=1, number=2, repeat=2)
    yield r
    r.close()


def test_build_and_run_candidates(builder: ms.LocalBuilder, runner: ms.LocalRunner) -> None:
    func = add_one()
    mods = [_split(func, "B", f) for f in (8, 16, 32)]
    built = builder.build([ms.BuilderInput(m, CPU) for m in mods])
    assert [b.error for b in built] == [None, None, None]
    assert all(b.artifact is not None and os.path.exists(b.artifact.lib_path or "") for b in built)
    args = ms.args_info(func)
    results = runner.run([ms.RunnerInput(b.artifact, args, func) for b in built])  # type: ignore[arg-type]
    for r in results:
        assert r.error is None
        assert r.run_secs is not None
        assert len(r.run_secs) == 2
        assert all(s > 0 for s in r.run_secs)


def test_build_error_is_a_result(builder: ms.LocalBuilder) -> None:
    func = add_one()
    sch = tc.Schedule(func)
    _, inner = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 32])
    sch.bind(inner, "threadIdx.x")  # a CPU build cannot run thread-bound loops
    good, bad = builder.build(
        [ms.BuilderInput(_split(func, "B", 4), CPU), ms.BuilderInput(sch.mod, CPU)]
    )
    assert good.error is None
    assert bad.artifact is None
    assert bad.error is not None
    assert "LowerError" in bad.error
    assert "threadIdx.x" in bad.error


def test_a_group_builds_each_candidate_alone_and_isolates_a_bad_one(
    builder: ms.LocalBuilder,
) -> None:
    func = add_one()
    sch = tc.Schedule(func)
    _, inner = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 32])
    sch.bind(inner, "threadIdx.x")
    mods = [_split(func, "B", 4), sch.mod, _split(func, "B", 16)]
    reply = handle_build({"mods": [tc.ir.to_json(m) for m in mods], "target": "cpu"})
    first, bad, last = reply["results"]
    assert bad["error"].startswith("LowerError")
    arts = [ms.BuildArtifact.from_message(r["artifact"]) for r in (first, last)]
    assert arts[0].lib_path != arts[1].lib_path  # each its own library, as tc.build makes it
    for art, mod in zip(arts, (mods[0], mods[2]), strict=True):
        assert art.lib_path == str(tc.build(mod, CPU).path)
        b = np.zeros(1024, "float32")
        a = np.arange(1024, dtype="float32")
        load(art)(a, b)
        np.testing.assert_array_equal(b, a + 1)


def test_builder_timeout_kills_and_replaces_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))  # the compiler must really run
    b = ms.LocalBuilder(max_workers=1, timeout_s=0.01, recycle_after=None)
    try:
        sch = tc.Schedule(matmul(8, 8, 8))
        sch.unroll(sch.get_loops(sch.get_block("C"))[2])
        (res,) = b.build([ms.BuilderInput(sch.mod, CPU)])
        assert res.artifact is None
        assert res.error is not None
        assert "timed out" in res.error
        assert b.pool.started_total == 2  # the stuck worker was replaced
    finally:
        b.close()


def test_builder_recycles_workers_between_batches_and_caps_memory() -> None:
    b = ms.LocalBuilder(max_workers=1, memory_cap_mb=1024, recycle_after=2)
    try:
        b.pool.start()
        first = b.pool.pids()
        b.build([ms.BuilderInput(_split(add_one(), "B", 4), CPU)])
        assert b.pool.pids() == first  # one build so far: kept
        b.build([ms.BuilderInput(_split(add_one(), "B", 8), CPU)])
        assert b.pool.pids() != first  # two builds: replaced after the batch
        assert b.pool.wait_ready()
        info = b.pool.workers[0].info
        assert info is not None
        assert info["memory_limit"] == 1024 * 2**20
    finally:
        b.close()


def _poisoned(builder: ms.LocalBuilder, kind: str) -> ms.BuildArtifact:
    (res,) = builder.build([ms.BuilderInput(_split(add_one(), "B", 8), CPU)])
    art = res.artifact
    assert art is not None
    text = poison_source(art.source, art.symbol, kind)
    return dataclasses.replace(art, source=text, lib_path=str(compile_shared(text)))


def test_runner_records_each_failure_and_goes_on(builder: ms.LocalBuilder) -> None:
    func = add_one()
    args = ms.args_info(func)
    (good,) = builder.build([ms.BuilderInput(_split(func, "B", 4), CPU)])
    assert good.artifact is not None
    kinds = ["segfault", "exit", "hang", "wrong"]
    arts = [good.artifact]
    for kind in kinds:
        arts += [_poisoned(builder, kind), good.artifact]
    with ms.LocalRunner(timeout_s=1.0, num_threads=1, number=1, repeat=1) as runner:
        results = runner.run([ms.RunnerInput(a, args, func) for a in arts])
        assert runner.pool.started_total == 4  # replaced after the segfault, exit and hang
    assert [r.error for r in results[::2]] == [None] * 5  # the good ones between the bad
    errors = [r.error or "" for r in results[1::2]]
    assert all(r.run_secs is None for r in results[1::2])
    assert "was killed by SIGSEGV" in errors[0]
    assert "exited with status 3" in errors[1]
    assert "timed out after 1 s" in errors[2]
    assert "killed and replaced" in errors[2]
    assert errors[3].startswith("wrong result: output 'B'")


def test_runner_without_correctness_check_accepts_wrong_values(
    builder: ms.LocalBuilder, runner: ms.LocalRunner
) -> None:
    func = add_one()
    bad = _poisoned(builder, "wrong")
    with ms.LocalRunner(num_threads=1, check_correctness=False) as unchecked:
        (res,) = unchecked.run([ms.RunnerInput(bad, ms.args_info(func), func)])
    assert res.error is None
    assert res.run_secs is not None
    (checked,) = runner.run([ms.RunnerInput(bad, ms.args_info(func), func)])
    assert (checked.error or "").startswith("wrong result")


def test_evaluator_settings_are_validated_and_used() -> None:
    with pytest.raises(TuneError, match="number must be an int >= 1"):
        ms.EvaluatorConfig(number=0)
    with pytest.raises(TuneError, match="cooldown_s"):
        ms.EvaluatorConfig(cooldown_s=-1)
    calls = []
    cfg = ms.EvaluatorConfig(number=2, repeat=3, warmup=2, min_repeat_ms=0)
    secs = time_calls(lambda: calls.append(1), cfg)
    assert len(secs) == 3
    assert len(calls) == 2 + 3 * 2
    calls.clear()
    secs = time_calls(
        lambda: calls.append(1), ms.EvaluatorConfig(number=1, repeat=1, warmup=0, min_repeat_ms=5.0)
    )
    assert len(calls) > 1  # number raised until a repeat lasts 5 ms


def test_thread_clock_counts_only_the_calling_threads_work(builder: ms.LocalBuilder) -> None:
    with pytest.raises(TuneError, match="clock must be one of"):
        ms.EvaluatorConfig(clock="cycles")
    cfg = ms.EvaluatorConfig(number=1, repeat=2, warmup=0, clock="thread")
    assert ms.EvaluatorConfig.from_dict(cfg.as_dict()) == cfg

    def nap() -> None:  # elapsed time, almost no CPU time
        time.sleep(0.02)

    assert min(time_calls(nap, dataclasses.replace(cfg, clock="wall"))) >= 0.02
    assert max(time_calls(nap, cfg)) < 0.01
    for threads in (2, 4):
        with pytest.raises(TuneError, match="needs num_threads=1"):
            ms.LocalRunner(num_threads=threads, clock="thread")
    func = add_one()
    (res,) = builder.build([ms.BuilderInput(_split(func, "B", 8), CPU)])
    with ms.LocalRunner(num_threads=1, evaluator=cfg) as runner:
        (out,) = runner.run([ms.RunnerInput(res.artifact, ms.args_info(func), func)])  # type: ignore[arg-type]
    assert out.error is None
    assert out.run_secs is not None
    assert len(out.run_secs) == 2
    assert all(s >= 0 for s in out.run_secs)


def test_cache_flush_and_cooldown_run_in_the_worker(builder: ms.LocalBuilder) -> None:
    func = add_one()
    (res,) = builder.build([ms.BuilderInput(_split(func, "B", 8), CPU)])
    cfg = ms.EvaluatorConfig(number=1, repeat=2, cache_flush=True, cooldown_s=0.01)
    with ms.LocalRunner(num_threads=1, evaluator=cfg) as runner:
        (out,) = runner.run([ms.RunnerInput(res.artifact, ms.args_info(func), func)])  # type: ignore[arg-type]
    assert out.error is None
    assert out.run_secs is not None
    assert len(out.run_secs) == 2


def test_inputs_are_seeded_and_outputs_blank() -> None:
    args = ms.args_info(add_one(16))
    a1, b1 = make_args(args, 0)
    a2, _ = make_args(args, 0)
    np.testing.assert_array_equal(a1, a2)
    assert a1 is not a2
    assert np.isnan(b1).all()
    assert compare(args[1], a1 + 1, a1 + 1, None, None) is None
    assert "1 of 16 elements" in (
        compare(args[1], a1 + 1, np.where(a1 > 2, 0, a1 + 1) + (np.arange(16) == 3), None, None)
        or ""
    )


def test_args_info_needs_constant_shapes() -> None:
    n = tc.ir.Var("n", "int32")
    A = tc.te.placeholder((n,), "float32", name="A")
    B = tc.te.compute((n,), lambda i: A[i] * 2.0, name="B")
    with pytest.raises(TuneError, match="symbolic shape"):
        ms.args_info(tc.te.create_prim_func([A, B]))
    info = ms.args_info(add_one(8))
    assert [(a.name, a.shape, a.role) for a in info] == [
        ("A", (8,), ms.ArgRole.INPUT),
        ("B", (8,), ms.ArgRole.OUTPUT),
    ]
    assert ms.ArgInfo.from_dict(info[0].as_dict()) == info[0]
    with pytest.raises(TuneError, match="unknown dtype"):
        ms.ArgInfo.from_dict({**info[0].as_dict(), "dtype": "float33"})


def test_tuning_with_poisoned_candidates_records_each_failure(tmp_path: Path) -> None:
    # the Done-when case: a segfault, a hang, an exit and a wrong result among real candidates
    plan = {1: "segfault", 3: "hang", 5: "exit", 7: "wrong"}
    builder = PoisonBuilder(ms.LocalBuilder(max_workers=2), plan.get)
    runner = ms.LocalRunner(timeout_s=1.0, num_threads=1, number=1, repeat=1)
    db = ms.tune_tir(
        add_one(),
        CPU,
        work_dir=str(tmp_path),
        max_trials_global=10,
        num_trials_per_iter=10,
        space=tile_1d,
        seed=0,
        builder=builder,
        runner=runner,
    )
    builder.close()
    runner.close()
    records = db.get_all_tuning_records()
    assert len(records) == 10
    failed = {i: r.error for i, r in enumerate(records) if not r.ok}
    assert sorted(failed) == [1, 3, 5, 7]
    assert "SIGSEGV" in (failed[1] or "")
    assert "timed out" in (failed[3] or "")
    assert "exited with status 3" in (failed[5] or "")
    assert "wrong result" in (failed[7] or "")
    best = ms.compile_tir(db, add_one(), CPU)
    assert best is not None
    tc.testing.check_numeric(best.func, lambda a: a + 1)

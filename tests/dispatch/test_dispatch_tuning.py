"""The library as a tuning candidate: library records, the faster path per function, the order
with ``ApplyDatabase``, and BLAS threads from the target's ``-num-cores``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft import tune as ms
from tilecraft.dispatch import DispatchLibrary
from tilecraft.dispatch.measure import LibraryCandidate
from tilecraft.frontend import nn
from tilecraft.graph import CallExtern, get_pipeline
from tilecraft.ir import PrimFunc, scheduled_by
from tilecraft.tune._defaults import rules_candidate
from tilecraft.tune.database import _codec
from tilecraft.tune.database.workload import TuningRecord

pytest.importorskip("scipy_openblas32")

TARGET = tc.Target("x86-64-v2 -num-cores=1")


class Product(nn.Module):
    """``a @ b``."""

    def forward(self, a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
        return a @ b


class Dense(nn.Module):
    """Linear with bias then ReLU: a GEMM with an epilogue."""

    def __init__(self) -> None:
        self.fc = nn.Linear(24, 16)
        self.relu = nn.ReLU()

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.relu(self.fc(x))


def _product(n: int = 32) -> tc.IRModule:
    spec = {k: nn.spec.Tensor((n, n), "float32") for k in "ab"}
    mod, _ = Product().export({"forward": spec})
    with TARGET:
        return get_pipeline("default")(mod)


def _gemm(mod: tc.IRModule) -> tuple[str, PrimFunc]:
    ((task,),) = [ms.extract_tasks(mod, TARGET)]
    (func_mod,) = task.dispatched
    ((name, func),) = func_mod.prim_funcs()
    return name, func


def _db_with(mod: tc.IRModule, tuned_s: float, library_s: float) -> ms.Database:
    """A database holding a tuned record (the rules' schedule) and a library record, timed."""
    name, func = _gemm(mod)
    db = ms.MemoryDatabase()
    wl = db.commit_workload(func, TARGET)
    sch = rules_candidate(func, TARGET, name)
    assert sch is not None
    db.commit_tuning_record(TuningRecord(wl, sch.trace, (tuned_s,), str(TARGET)))
    extra: dict[str, object] = {"dispatch": "blas"}
    lib = TuningRecord(wl, tc.schedule.Trace(), (library_s,), str(TARGET), extra=extra)
    db.commit_tuning_record(lib)
    return db


def _externs(mod: tc.IRModule) -> list[CallExtern]:
    return [b.value for b in mod["forward"].bindings if isinstance(b.value, CallExtern)]


def _run_product(exe: object, n: int = 32) -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-4, atol=1e-4)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("tuned_s", "library_s", "dispatched"), [(2e-3, 1e-3, True), (1e-3, 2e-3, False)]
)
def test_the_faster_of_library_and_tuned_record_is_kept(
    tuned_s: float, library_s: float, dispatched: bool
) -> None:
    mod = _product()
    name, _ = _gemm(mod)
    db = _db_with(mod, tuned_s, library_s)
    with TARGET:
        pass_ = DispatchLibrary(database=db)
        after = pass_(mod)
    assert (pass_.report.dispatched == [name]) is dispatched
    if not dispatched:
        assert "the tuned kernel is faster" in pass_.report.declined[name]
    exe = tc.compile(mod, TARGET, database=db)  # the same choice on the default path
    compiled = set(exe.lib.function_names) if exe.lib is not None else set()
    assert (name in compiled) is not dispatched  # a dispatched GEMM is not compiled
    _run_product(exe)
    who = {n: scheduled_by(f) for n, f in after.prim_funcs()}
    assert who[name] == ("dispatch:blas" if dispatched else None)


def test_compile_with_database_picks_per_function() -> None:
    mod = _product()
    name, _ = _gemm(mod)
    for tuned_s, library_s, kind in ((2e-3, 1e-3, "dispatch:blas"), (1e-3, 2e-3, "database")):
        db = _db_with(mod, tuned_s, library_s)
        with TARGET:
            dispatched = DispatchLibrary(database=db)(mod)
            applied = ms.ApplyDatabase(database=db)(dispatched)
        assert scheduled_by(applied[name]) == kind  # type: ignore[arg-type]
        exe = tc.compile(mod, TARGET, database=db)
        _run_product(exe)


def test_without_a_library_measurement_nothing_is_dispatched() -> None:
    mod = _product()
    name, func = _gemm(mod)
    db = ms.MemoryDatabase()
    db.commit_workload(func, TARGET)
    with TARGET:
        pass_ = DispatchLibrary(database=db)
        assert pass_(mod) is mod
    assert pass_.report.declined[name] == "no blas measurement in the database"


def test_a_library_record_alone_is_no_measured_choice() -> None:
    # a task the search gave no trial still had its library measured: the library record was
    # "the best", and a tiny GEMM went to BLAS at 23x the rules' time (a small decode layer)
    mod = _product()
    name, func = _gemm(mod)
    db = ms.MemoryDatabase()
    wl = db.commit_workload(func, TARGET)
    extra: dict[str, object] = {"dispatch": "blas"}
    db.commit_tuning_record(
        TuningRecord(wl, tc.schedule.Trace(), (1e-9,), str(TARGET), extra=extra)
    )
    with TARGET:
        pass_ = DispatchLibrary(database=db)
        assert pass_(mod) is mod
    assert pass_.report.declined[name].startswith("no tuned record to compare blas with")
    exe = tc.compile(mod, TARGET, database=db)
    assert name in set(exe.lib.function_names)  # the rules' kernel, compiled
    _run_product(exe)


class FixedLibrary(LibraryCandidate):
    """BLAS with fixed timings: the choice is deterministic whatever the machine."""

    def __init__(self, secs: float) -> None:
        self.secs = secs

    def measure(self, func: PrimFunc, target: tc.Target, **kwargs: object) -> tuple[float, ...]:
        return (self.secs,) * 3


# the measured run where the library loses is under -m slow (the choice itself: the test above)
@pytest.mark.parametrize(
    ("library_s", "dispatched"), [(1e-12, True), pytest.param(10.0, False, marks=pytest.mark.slow)]
)
def test_tuning_measures_the_library_as_one_candidate(
    tmp_path: object, library_s: float, dispatched: bool
) -> None:
    mod = _product()
    name, func = _gemm(mod)
    db = ms.JSONDatabase(tmp_path)  # type: ignore[arg-type]
    with TARGET:
        ms.TuneIRMod(
            database=db, max_trials_global=3, num_trials_per_iter=2, progress=False,
            libraries=[FixedLibrary(library_s)],
        )(mod)  # fmt: skip
    records = db.records_of(db.key_of(func, TARGET))
    assert len(records) == 3  # one of the three trials is the library's
    (lib,) = [r for r in records if r.library == "blas"]
    assert lib.run_secs == (library_s,) * 3
    assert len(lib.trace) == 0
    assert db.query_library_record(func, "blas", TARGET) is lib
    tuned = db.query_tuning_record(func, TARGET)
    assert tuned is not None
    assert tuned.library is None  # library records are never a schedule to replay
    with TARGET:
        pass_ = DispatchLibrary(database=db)
        pass_(mod)
    assert (name in pass_.report.dispatched) is dispatched
    _run_product(tc.compile(mod, TARGET, database=db))
    # a resumed run measures the library again only when it has no record
    with TARGET:
        ms.TuneIRMod(database=db, max_trials_global=4, num_trials_per_iter=1, progress=False,
                     libraries=[FixedLibrary(library_s)])(mod)  # fmt: skip
    assert sum(r.library == "blas" for r in db.records_of(db.key_of(func, TARGET))) == 1


def test_library_records_are_versioned_and_older_readers_skip_them(tmp_path: object) -> None:
    mod = _product()
    db = _db_with(mod, 1e-3, 2e-3)
    lib, tuned = (
        [r for r in db.get_all_tuning_records() if r.library],
        [r for r in db.get_all_tuning_records() if not r.library],
    )
    line = json.loads(_codec.encode_record(lib[0]))
    assert line["version"] == 2
    assert line["extra"]["dispatch"] == "blas"
    assert json.loads(_codec.encode_record(tuned[0]))["version"] == 1
    with pytest.raises(_codec.ForeignVersionError):
        _codec._check_version(line, "old reader")  # what a reader of version 1 alone does
    wl = {lib[0].workload.key.id: lib[0].workload}
    back = _codec.decode_record(line, "new reader", wl.get)
    assert back is not None
    assert back.library == "blas"
    line["extra"] = {}
    with pytest.raises(tc.errors.DatabaseError, match="must name its library"):
        _codec.decode_record(line, "bad", wl.get)
    # JSON round trip: a fresh reader sees both kinds
    jdb = ms.JSONDatabase(tmp_path)  # type: ignore[arg-type]
    for r in db.get_all_tuning_records():
        jdb.commit_tuning_record(r)
    again = ms.JSONDatabase(tmp_path)  # type: ignore[arg-type]
    assert sorted(str(r.library) for r in again.get_all_tuning_records()) == ["None", "blas"]


def test_apply_database_never_replays_a_library_record() -> None:
    mod = _product()
    name, func = _gemm(mod)
    db = ms.MemoryDatabase()
    wl = db.commit_workload(func, TARGET)
    rec = TuningRecord(wl, tc.schedule.Trace(), (1e-9,), str(TARGET), extra={"dispatch": "blas"})
    db.commit_tuning_record(rec)
    with TARGET:
        pass_ = ms.ApplyDatabase(database=db)
        pass_(mod)
    assert name in pass_.report.missed


@pytest.mark.parametrize("first", ["dispatch", "database"])
def test_order_with_apply_database(first: str) -> None:
    mod = _product()
    name, _ = _gemm(mod)
    db = _db_with(mod, 1e-3, 2e-3)  # a tuned record exists; DispatchLibrary without db ignores it
    with TARGET:
        dispatch, apply = DispatchLibrary(), ms.ApplyDatabase(database=db)
        passes = [dispatch, apply] if first == "dispatch" else [apply, dispatch]
        out = mod
        for p in passes:
            out = p(out)
        out = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(out)
    if first == "dispatch":  # the first pass owns the function
        assert scheduled_by(out[name]) == "dispatch:blas"  # type: ignore[arg-type]
        assert apply.report.missed[name] == "already scheduled"
        assert len(_externs(out)) == 1
    else:
        assert scheduled_by(out[name]) == "database"  # type: ignore[arg-type]
        assert dispatch.report.declined[name].startswith("already scheduled")
        assert not _externs(out)
    _run_product(tc.build(out, TARGET))


def test_blas_threads_follow_the_targets_num_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilecraft.runtime.executor.extern import load_blas

    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # our kernels may use 4: the target's 3 hold

    blas = load_blas()
    before = blas.get_num_threads()
    target = tc.Target("x86-64-v2 -num-cores=3")
    spec = {k: nn.spec.Tensor((16, 16), "float32") for k in "ab"}
    mod, _ = Product().export({"forward": spec})
    try:
        with target:
            mod = DispatchLibrary()(get_pipeline("default")(mod))
            mod = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(mod)
        (ext,) = _externs(mod)
        assert ext.attrs["num_threads"] == 3
        blas.set_num_threads(1)
        _run_product(tc.build(mod, target), 16)
        assert blas.get_num_threads() == 3  # set through openblas_set_num_threads
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # never more than our own kernels use
        _run_product(tc.build(mod, target), 16)
        assert blas.get_num_threads() == 1
    finally:
        blas.set_num_threads(before)


def test_real_measurement_of_gemm_and_gemm_with_epilogue() -> None:
    cand = LibraryCandidate()
    assert cand.unavailable(TARGET) is None
    _, func = _gemm(_product(48))
    secs = cand.measure(func, TARGET, number=2, repeat=3, num_threads=1)
    assert len(secs) == 3
    assert all(0 < s < 1 for s in secs)
    mod, params = Dense().export({"forward": {"x": nn.spec.Tensor((4, 24), "float32")}})
    with TARGET:
        mod = get_pipeline("default", params=params)(mod)
    ((_, ffunc),) = [(n, f) for n, f in mod.prim_funcs() if "relu" in n]
    assert cand.declines(ffunc) is None
    assert all(s > 0 for s in cand.measure(ffunc, TARGET, number=1, repeat=2))
    assert cand.unavailable(tc.Target("cuda -arch=sm_80")) is not None

"""Cost models: XGBModel learns an ordering, retrains on growth, round-trips through JSON,
warm-starts from a database; RandomModel is seeded; a missing xgboost is a clear TuneError."""

from __future__ import annotations

import builtins
import json
import sys

import numpy as np
import pytest
from tune_workloads import matmul

import tilecraft as tc
from tilecraft.errors import TuneError
from tilecraft.schedule import Schedule
from tilecraft.tune import database as dbs
from tilecraft.tune.arg_info import args_info
from tilecraft.tune.cost_model import RandomModel, TrainingSet, XGBModel, task_kind, warm_start
from tilecraft.tune.features import NUM_FEATURES
from tilecraft.tune.space import cpu_default_space

CPU = tc.Target("cpu -mcpu=x86-64-v3")


def _synthetic(n: int, seed: int) -> tuple[list[np.ndarray], list[float]]:
    """Programs of 1-3 stores whose time falls as columns 3 and 7 of their rows grow."""
    rng = np.random.default_rng(seed)
    feats = [
        rng.random((int(rng.integers(1, 4)), NUM_FEATURES)).astype(np.float32) for _ in range(n)
    ]
    secs = [1.0 / (1.0 + float(f[:, 3].sum() + 2 * f[:, 7].sum())) for f in feats]
    return feats, secs


def _rank_corr(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_labels_are_normalised_throughput_per_group() -> None:
    data = TrainingSet()
    data.add("a", [np.zeros((1, NUM_FEATURES))] * 3, [2.0, 1.0, None])
    data.add("b", [np.zeros((2, NUM_FEATURES))], [4.0])
    np.testing.assert_allclose(data.labels(), [0.5, 1.0, 0.0, 1.0])
    with pytest.raises(TuneError, match="shape"):
        data.add("a", [np.zeros((0, NUM_FEATURES))], [1.0])


def test_xgb_learns_a_synthetic_ordering_and_round_trips(tmp_path) -> None:
    pytest.importorskip("xgboost")
    train, secs = _synthetic(200, 0)
    test, test_secs = _synthetic(40, 1)
    model = XGBModel(seed=0, min_train=8)
    assert model.booster is None
    model.update("task", train, secs)
    assert model.booster is not None
    assert model.trained_on == 200
    scores = model.predict(test)
    assert _rank_corr(scores, -np.asarray(test_secs)) > 0.85  # held out; at random: ~0
    model.save(tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    assert doc["kind"] == "xgb"
    assert len(doc["features"]) == 200
    loaded = XGBModel.load(tmp_path / "m")
    np.testing.assert_allclose(loaded.predict(test), scores, rtol=1e-6)
    assert loaded.trained_on == 200
    assert len(loaded.data) == 200


def test_xgb_retrains_only_when_the_data_grew_enough() -> None:
    pytest.importorskip("xgboost")
    feats, secs = _synthetic(60, 2)
    model = XGBModel(min_train=8, retrain_growth=0.5)
    model.update("t", feats[:4], secs[:4])
    assert model.booster is None  # fewer than min_train programs: random scores
    model.update("t", feats[4:40], secs[4:40])
    assert model.trained_on == 40
    model.update("t", feats[40:50], secs[40:50])
    assert model.trained_on == 40  # grew by 10 < 0.5 * 40
    model.update("t", feats[50:], secs[50:])
    assert model.trained_on == 60


def test_xgb_load_refuses_other_files(tmp_path) -> None:
    pytest.importorskip("xgboost")
    (tmp_path / "model.json").write_text(json.dumps({"kind": "random", "seed": 1}))
    with pytest.raises(TuneError, match="does not hold an XGBoost model"):
        XGBModel.load(tmp_path)
    with pytest.raises(TuneError, match="cannot read"):
        XGBModel.load(tmp_path / "missing")


def test_missing_xgboost_is_a_clear_tune_error(monkeypatch) -> None:
    real_import = builtins.__import__

    def no_xgboost(name: str, *args: object, **kwargs: object) -> object:
        if name == "xgboost":
            raise ImportError("No module named 'xgboost'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "xgboost", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_xgboost)
    with pytest.raises(TuneError, match=r"tilecraft\[tune\]"):
        XGBModel()


def test_random_model_is_seeded_and_saves(tmp_path) -> None:
    feats, _ = _synthetic(5, 3)
    a, b = RandomModel(7).predict(feats), RandomModel(7).predict(feats)
    np.testing.assert_array_equal(a, b)
    RandomModel(7).save(tmp_path)
    np.testing.assert_array_equal(RandomModel.load(tmp_path).predict(feats), a)


def test_task_kind_ignores_shapes() -> None:
    assert task_kind(matmul(32, 32, 32)) == task_kind(matmul(64, 16, 8))
    assert task_kind(matmul(32, 32, 32)) != task_kind(matmul(32, 32, 32, relu=True))


def test_warm_start_from_a_database_and_transfer_to_another_shape() -> None:
    pytest.importorskip("xgboost")
    db = dbs.MemoryDatabase()
    small = matmul(32, 32, 32)
    workload = db.commit_workload(small, CPU)
    for seed in range(12):
        sch = Schedule(small, seed=seed)
        cpu_default_space(sch)
        ok = seed != 5
        db.commit_tuning_record(
            dbs.TuningRecord(
                workload=workload,
                trace=sch.trace,
                run_secs=(1e-3 * (1 + seed % 4),) if ok else None,
                target=str(CPU),
                args_info=args_info(small),
                error=None if ok else "build failed",
            )
        )
    model = XGBModel(min_train=8)
    assert warm_start(model, db, CPU, kind=task_kind(matmul(64, 64, 64))) == 12
    assert model.booster is not None
    assert warm_start(XGBModel(), db, CPU, kind="no such kind") == 0
    assert warm_start(XGBModel(), db, tc.Target("cuda -arch=sm_90")) == 0
    sch = Schedule(matmul(64, 64, 64), seed=0)
    cpu_default_space(sch)
    from tilecraft.tune.features import per_store_features

    assert np.isfinite(model.predict([per_store_features(sch.func, CPU)])).all()

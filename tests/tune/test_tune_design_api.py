"""The tuning lines of DESIGN.md's "Public API at a glance" run as written (small budgets)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.frontend import nn


class Model(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(32, 16)
        self.relu = nn.ReLU()

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.relu(self.fc1(x))


def test_design_tuning_surface(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    workers = {
        "builder": ms.LocalBuilder(max_workers=1),
        "runner": ms.LocalRunner(num_threads=1, number=1, repeat=1),
    }
    target = tc.Target("cpu")
    mod, _ = Model().export({"forward": {"x": nn.spec.Tensor((2, 32), "float32")}})
    with target:
        mod = tc.graph.get_pipeline("zero")(mod)
    tasks = ms.extract_tasks(mod, target)
    assert all(isinstance(t, ms.ExtractedTask) and t.weight == 1 for t in tasks)
    (func,) = (t.func for t in tasks if "matmul" in t.task_name)

    db = ms.tune_tir(func, target, work_dir="tune", max_trials_global=2, seed=0, **workers)
    sch = ms.compile_tir(db, func, target)
    assert isinstance(sch, tc.Schedule)
    with target:
        mod = ms.TuneIRMod(
            work_dir="tune",
            max_trials_global=3,
            op_names=["matmul"],
            space=ms.space.cpu_default_space,
            **workers,
        )(mod)
        assert len(ms.JSONDatabase("tune")) == 3  # one more trial: two were recorded before
        applied = ms.ApplyDatabase(work_dir="tune")(mod)
        with db:
            also = ms.ApplyDatabase()(mod)
    names = [n for n, _ in mod.prim_funcs() if "matmul" in n]
    assert names
    assert all(applied[n].attrs.get("tc.tuned") for n in names)
    assert all(also[n].attrs.get("tc.tuned") for n in names)
    union = ms.database.OrderedUnionDatabase(
        ms.database.JSONDatabase(work_dir="mine"), ms.database.JSONDatabase(work_dir="tune")
    )
    assert union.query_schedule(func, target) is not None
    for w in workers.values():
        w.close()

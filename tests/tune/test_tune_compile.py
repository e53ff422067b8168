"""The default path applies tuning records: ``tc.compile(database=...)``, ``with db:``, explain."""

from __future__ import annotations

import numpy as np
import pytest
from fake_workers import HashBuilder, TableRunner

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.frontend import nn
from tilecraft.ir import scheduled_by
from tilecraft.rules import cpu as cpu_rules
from tilecraft.rules import explain

CPU = tc.Target("cpu -mcpu=x86-64-v3")


class Mlp(nn.Module):
    """Linear 16->32, ReLU, Linear 32->8."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(16, 32)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def model() -> tuple[tc.IRModule, dict[str, np.ndarray], ms.Database, list[str]]:
    """The exported model, its weights, a database tuning its first kernel, that kernel."""
    mod, _ = Mlp().export({"forward": {"x": nn.spec.Tensor((4, 16), "float32")}})
    rng = np.random.default_rng(0)
    params = {
        "fc1.weight": rng.standard_normal((32, 16), dtype=np.float32),
        "fc1.bias": rng.standard_normal((32,), dtype=np.float32),
        "fc2.weight": rng.standard_normal((8, 32), dtype=np.float32),
        "fc2.bias": rng.standard_normal((8,), dtype=np.float32),
    }
    with CPU:
        lowered = tc.graph.get_pipeline("default", params=params)(mod)
    (first, *_) = ms.extract_tasks(lowered, CPU)
    db = ms.MemoryDatabase()
    ms.tune_tasks([first], CPU, database=db, max_trials_global=3, builder=HashBuilder(),
                  runner=TableRunner(), progress=False)  # fmt: skip
    return mod, params, db, [first.task_name]


def _reference(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ params["fc1.weight"].T + params["fc1.bias"], 0)
    return h @ params["fc2.weight"].T + params["fc2.bias"]


def _check(exe: tc.graph.Executable, params: dict[str, np.ndarray], tuned: list[str]) -> None:
    marks = {name: scheduled_by(f) for name, f in exe.mod.prim_funcs()}
    for name, mark in marks.items():
        assert mark == ("database" if name in tuned else mark), marks
        assert mark is not None
    assert [n for n, m in marks.items() if m == "database"] == tuned
    x = np.random.default_rng(1).standard_normal((4, 16), dtype=np.float32)
    np.testing.assert_allclose(exe["forward"](x), _reference(params, x), rtol=1e-4, atol=1e-4)


def test_compile_applies_a_database_before_the_rules(model: tuple) -> None:
    mod, params, db, tuned = model
    _check(tc.compile(mod, CPU, params=params, database=db), params, tuned)


def test_with_db_is_no_longer_dropped(model: tuple) -> None:
    mod, params, db, tuned = model
    with db:
        exe = tc.compile(mod, CPU, params=params)
    _check(exe, params, tuned)
    # without a database, the rules schedule everything
    plain = tc.compile(mod, CPU, params=params)
    assert all(scheduled_by(f) != "database" for _, f in plain.mod.prim_funcs())


def test_explain_says_whether_a_record_or_a_rule_scheduled_each_function(model: tuple) -> None:
    mod, params, db, tuned = model
    exe = tc.compile(mod, CPU, params=params, database=db)
    report = explain(exe.mod, cpu_rules.default_rules(), CPU)
    by = {f.name: f.scheduled_by for f in report.functions}
    assert [n for n, b in by.items() if b == "database"] == tuned
    assert all(b is not None and b.startswith("rule:") for n, b in by.items() if n not in tuned)
    text = str(report)
    assert f"{tuned[0]}" in text
    assert "record (database)" in text
    assert report.to_dict()["functions"][tuned[0]]["scheduled_by"] == "database"
    # explained before scheduling: the rule each function would get
    with CPU:
        lowered = tc.graph.get_pipeline("default", params=params)(mod)
    fresh = explain(lowered, cpu_rules.default_rules(), CPU)
    assert all(f.scheduled_by.startswith("rule:") for f in fresh.functions)

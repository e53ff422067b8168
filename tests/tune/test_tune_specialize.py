"""Tuning a model with a symbolic extent: its functions are tuned at chosen sizes (size
variants, ``SpecializeShapes``) and ``tc.compile`` applies the records to the same variants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import IRError
from tilecraft.frontend import nn
from tilecraft.ir import scheduled_by
from tilecraft.lower.merge_specializations import SPECIALIZATION_OF_ATTR
from tilecraft.rules import SpecializeShapes
from tilecraft.tune.arg_info import args_info

CPU = tc.Target("cpu")


class MLP(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(32, 24)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(24, 8)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def _reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(x.astype(np.float64) @ p["fc1.weight"].T + p["fc1.bias"], 0)
    return h @ p["fc2.weight"].T + p["fc2.bias"]


def _lowered() -> tuple[tc.IRModule, dict[str, np.ndarray]]:
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor(("batch", 32), "float32")}})
    with CPU:
        return tc.graph.get_pipeline("default", params=params)(mod), params


def test_variants_named_by_shape_variable_only() -> None:
    lowered, _ = _lowered()
    out = SpecializeShapes({"batch": (1, 6)})(lowered)
    variants = {
        n: f.attrs[SPECIALIZATION_OF_ATTR]
        for n, f in out.prim_funcs()
        if SPECIALIZATION_OF_ATTR in f.attrs
    }
    generals = {n for n, f in lowered.prim_funcs() if "matmul" in n}
    assert generals
    assert sorted(set(variants.values())) == sorted(generals)
    assert sorted(variants) == sorted(f"{g}_batch{v}" for g in generals for v in (1, 6))
    # a name no function has specialises nothing, and says so
    with pytest.warns(UserWarning, match="no function has the shape variable.*seq.*batch"):
        assert SpecializeShapes({"seq": (4,)})(lowered) is lowered
    for bad in ({}, {"batch": ()}, {"batch": (-1,)}, {"batch": (True,)}, (2.5,)):
        with pytest.raises(IRError, match="SpecializeShapes"):
            SpecializeShapes(bad)  # type: ignore[arg-type]


def test_variants_are_tasks_with_their_general_function_weight() -> None:
    lowered, _ = _lowered()
    names = {t.task_name for t in ms.extract_tasks(lowered, CPU)}
    assert names
    assert not any("batch" in n for n in names)
    tasks = ms.extract_tasks(SpecializeShapes({"batch": (6,)})(lowered), CPU)
    by_name = {t.task_name: t for t in tasks}
    variants = [n for n in by_name if n.endswith("_batch6")]
    assert len(variants) == 2, sorted(by_name)  # both linear layers, static at batch 6
    assert all(by_name[n].weight == 1 for n in variants)
    for n in variants:  # static: the tuner can measure them (args_info raises otherwise)
        info = args_info(by_name[n].mod["main"])
        assert info[0].shape[0] == 6, info
        assert info[-1].shape[0] == 6, info


def test_tuned_variant_is_applied_by_compile_and_chosen_at_run_time(
    tmp_path: Path, workers: tuple[ms.LocalBuilder, ms.LocalRunner]
) -> None:
    builder, runner = workers
    lowered, params = _lowered()
    tune = ms.TuneIRMod(
        tmp_path,
        max_trials_global=4,
        target=CPU,
        specialize={"batch": (6,)},
        builder=builder,
        runner=runner,
        seed=0,
    )
    assert tune(lowered) is lowered
    assert tune.database is not None
    tuned_keys = {r.workload.key for r in tune.database.get_all_tuning_records() if r.ok}
    assert tuned_keys
    mod, _ = MLP().export({"forward": {"x": nn.spec.Tensor(("batch", 32), "float32")}})
    exe = tc.compile(mod, CPU, params=params, database=tune.database, specialize={"batch": (1, 6)})
    marks = {n: scheduled_by(f) for n, f in exe.mod.prim_funcs()}
    by_record = [n for n, m in marks.items() if m == "database"]
    assert by_record, marks
    assert all(n.endswith("_batch6") for n in by_record), marks
    assert all(m.startswith("rule:") for n, m in marks.items() if n.endswith("_batch1"))
    rng = np.random.default_rng(0)
    for batch in (1, 6, 5, 9):  # the two variants and the general kernel, one entry point
        x = rng.standard_normal((batch, 32)).astype(np.float32)
        np.testing.assert_allclose(exe["forward"](x), _reference(x, params), rtol=1e-4, atol=1e-4)
    # the same sizes without the database: the rules schedule the variants
    plain = tc.compile(mod, CPU, params=params, specialize={"batch": (6,)})
    assert all(scheduled_by(f).startswith("rule:") for _, f in plain.mod.prim_funcs())
    x = rng.standard_normal((6, 32)).astype(np.float32)
    np.testing.assert_allclose(plain["forward"](x), exe["forward"](x), rtol=1e-5, atol=1e-5)
    # and with none at all
    none = tc.compile(mod, CPU, params=params, specialize=())
    assert not any("_batch" in n for n, _ in none.mod.prim_funcs())

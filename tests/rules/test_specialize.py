"""``SpecializeShapes`` and the CPU backend's merge: variants at a fixed extent, scheduled by
the rules with the extent known, folded into one kernel that branches on the extent."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.errors import IRError
from tilecraft.frontend import nn
from tilecraft.ir import PrimFunc, Var
from tilecraft.lower.merge_specializations import (
    SPECIALIZATION_OF_ATTR,
    SPECIALIZATIONS_ATTR,
    merge_specializations,
)
from tilecraft.rules import SCHEDULE_RULE_ATTR, SpecializeShapes
from tilecraft.rules.specialize import specialize

# the rules' choices depend on the ISA: both presets, scheduled here and built for the host
PRESETS = [tc.Target("avx512 -num-cores=2"), tc.Target("avx2 -num-cores=2")]
te, T = tc.te, tc.topi


def _linear(n: Var, k: int, m: int, relu: bool = True) -> PrimFunc:
    """``relu(x @ W + b)`` with the batch ``n`` symbolic; W stored (K, M)."""
    x = te.placeholder((n, k), "float32", name="x")
    w = te.placeholder((k, m), "float32", name="W")
    b = te.placeholder((m,), "float32", name="b")
    y = T.add(T.matmul(x, w), b)
    return te.create_prim_func([x, w, b, T.relu(y) if relu else y])


def _schedule(func: PrimFunc, target: tc.Target, values: tuple[int, ...] = (1,)) -> tc.IRModule:
    with target:
        mod = SpecializeShapes(values)(tc.IRModule({"main": func}))
        return dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(mod)


def _run(lib: object, func: PrimFunc, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(got from ``lib["main"]``, want from the unscheduled ``func``) at batch ``n``."""
    rng = np.random.default_rng(seed)
    _x, w, _b = func.buffer_params[:3]
    k, m = int(w.shape[0].value), int(w.shape[1].value)  # type: ignore[attr-defined]
    args = [rng.standard_normal(s).astype(np.float32) for s in ((n, k), (k, m), (m,))]
    got, want = np.zeros((n, m), np.float32), np.zeros((n, m), np.float32)
    lib["main"](*args, got)  # type: ignore[index]
    tc.build(func, "cpu")["main"](*args, want)
    return got, want


def test_variant_is_the_function_at_the_fixed_extent() -> None:
    n = Var("n", "int32")
    func = _linear(n, 64, 48)
    mod = SpecializeShapes()(tc.IRModule({"main": func}))
    assert list(mod.functions) == ["main", "main_n1"]
    variant = mod["main_n1"]
    assert next(p.shape for p in variant.buffer_params)[0].value == 1
    assert variant.attrs[SPECIALIZATION_OF_ATTR] == "main"
    assert mod["main"].attrs[SPECIALIZATIONS_ATTR] == (("n", 1, "main_n1"),)
    # again: nothing more (a specialised function and a variant are left alone)
    assert SpecializeShapes()(mod) is mod
    with pytest.raises(IRError, match="values must be extents"):
        SpecializeShapes(())
    with pytest.raises(IRError, match="is a parameter"):
        specialize(func.update(params=(*func.params, n)), n, 1, "x")


def test_scheduled_functions_and_static_ones_are_left_alone() -> None:
    static = _linear(Var("n", "int32"), 16, 16)
    static = specialize(static, static.buffer_params[0].shape[0], 4, "main")  # type: ignore[arg-type]
    mod = tc.IRModule({"main": static.update(attrs={})})
    assert SpecializeShapes()(mod) is mod
    scheduled = tc.ir.mark_scheduled(_linear(Var("n", "int32"), 16, 16), "hand")
    mod = tc.IRModule({"main": scheduled})
    assert SpecializeShapes()(mod) is mod


@pytest.mark.parametrize("target", PRESETS, ids=["avx512", "avx2"])
def test_variant_gets_the_gemv_rule_and_the_merged_kernel_is_exact(target: tc.Target) -> None:
    n = Var("n", "int32")
    func = _linear(n, 300, 333)  # 333 columns: no tile of whole vectors divides them
    mod = _schedule(func, target)
    assert mod["main"].attrs[SCHEDULE_RULE_ATTR] == "Matmul"
    assert mod["main_n1"].attrs[SCHEDULE_RULE_ATTR] == "GEMV"
    lib = tc.build(mod, "cpu")
    assert list(lib.function_names) == ["main"]  # one kernel: the variant is a branch of it
    assert "if ((n == 1))" in lib.source
    for size in (1, 2, 7, 8, 9, 64):  # 8: the Matmul rule's row tile
        got, want = _run(lib, func, size, seed=size)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_several_values_and_a_value_crossing_a_tile_boundary() -> None:
    n = Var("n", "int32")
    func = _linear(n, 40, 24, relu=False)
    mod = _schedule(func, PRESETS[1], values=(1, 8))
    assert mod["main"].attrs[SPECIALIZATIONS_ATTR] == (("n", 1, "main_n1"), ("n", 8, "main_n8"))
    lib = tc.build(mod, "cpu")
    assert "if ((n == 1))" in lib.source
    assert "if ((n == 8))" in lib.source
    for size in (1, 7, 8, 9, 16):
        got, want = _run(lib, func, size, seed=size)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_merge_keeps_a_variant_whose_general_function_is_missing() -> None:
    n = Var("n", "int32")
    mod = SpecializeShapes()(tc.IRModule({"main": _linear(n, 8, 8)}))
    alone = {"main_n1": mod["main_n1"]}
    assert merge_specializations(alone) == alone


class MLP(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(40, 33)
        self.fc2 = nn.Linear(33, 5)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(nn.ReLU()(self.fc1(x)))


def _mlp_params(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in params.items()}


def test_compile_specializes_a_symbolic_batch_and_export_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor(("batch", 40), "float32")}})
    weights = _mlp_params(dict(params))
    exe = tc.compile(mod, "cpu", params=weights)
    variants = {n: f for n, f in exe.mod.prim_funcs() if SPECIALIZATION_OF_ATTR in f.attrs}
    assert variants
    assert all(f.attrs.get(SCHEDULE_RULE_ATTR) for f in variants.values())
    path = tmp_path / "mlp.tc"
    exe.export_library(str(path))
    loaded = tc.runtime.load_module(str(path))
    w1, b1, w2, b2 = (weights[k] for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"))
    for size in (1, 3, 64):
        x = np.random.default_rng(size).standard_normal((size, 40)).astype(np.float32)
        want = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
        for run in (exe, loaded):
            np.testing.assert_allclose(run["forward"](x), want, rtol=1e-4, atol=1e-4)


def test_explain_lists_the_variant_and_its_rule() -> None:
    n = Var("n", "int32")
    with PRESETS[0]:
        mod = SpecializeShapes()(tc.IRModule({"main": _linear(n, 64, 64)}))
        report = str(dl.explain(mod, rules=dl.cpu.default_rules()))
    assert "main_n1" in report
    assert "GEMV" in report


def test_explain_profiles_a_variant_through_its_general_kernel() -> None:
    n = Var("n", "int32")
    with PRESETS[1]:
        mod = SpecializeShapes()(tc.IRModule({"main": _linear(n, 32, 24)}))
        report = dl.explain(mod, rules=dl.cpu.default_rules(), profile=True,
                            shape_vars={"n": 16}, repeat=1)  # fmt: skip
    rows = {r.name: r for r in report.functions}
    assert rows["main_n1"].note == "variant of main at n = 1: a branch of main's kernel"
    assert rows["main"].note == "branches to its variants (n = 1: main_n1)"
    assert all(r.time_s is not None and r.time_s > 0 for r in rows.values())
    assert "(variant of main at n = 1" in str(report)


def test_two_symbolic_extents_get_one_variant_each() -> None:
    b, s = Var("b", "int32"), Var("s", "int32")
    x = te.placeholder((b, s, 24), "float32", name="x")
    w = te.placeholder((24, 40), "float32", name="W")
    func = te.create_prim_func([x, w, T.matmul(x, w)])
    mod = _schedule(func, PRESETS[0])
    assert mod["main"].attrs[SPECIALIZATIONS_ATTR] == (("b", 1, "main_b1"), ("s", 1, "main_s1"))
    lib = tc.build(mod, "cpu")
    ref = tc.build(func, "cpu")
    for bs in ((1, 1), (1, 5), (3, 1), (3, 5)):
        rng = np.random.default_rng(bs)
        xa = rng.standard_normal((*bs, 24)).astype(np.float32)
        wa = rng.standard_normal((24, 40)).astype(np.float32)
        got, want = np.zeros((*bs, 40), np.float32), np.zeros((*bs, 40), np.float32)
        lib["main"](xa, wa, got)
        ref["main"](xa, wa, want)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_a_kernel_without_reduction_gets_no_variant() -> None:
    s = Var("s", "int32")
    x = te.placeholder((s, 12, 64), "float32", name="x")
    mod = tc.IRModule({"main": te.create_prim_func([x, T.transpose(x, (1, 0, 2))])})
    assert SpecializeShapes()(mod) is mod

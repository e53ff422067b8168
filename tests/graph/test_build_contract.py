"""``tc.build`` runs no pipeline; the graph layer lowers graph functions for the runtime."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import BuildError
from tilecraft.graph import (
    AnnotateOpPattern,
    FuseOps,
    GraphBuilder,
    Legalize,
    get_pipeline,
    lower_graph_function,
)
from tilecraft.graph.ir import Binding, Constant, Function, TensorType
from tilecraft.runtime.executor import build_executable


def _add_matmul() -> tc.IRModule:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 4), "float32")
    y = bb.param("y", ("n", 4), "float32")
    w = bb.param("w", (4, 2), "float32")
    out = bb.emit("matmul", [bb.emit("add", [x, y]), w])
    return tc.IRModule({"main": bb.finish(out, "main")})


def _args() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(s).astype("float32") for s in ((3, 4), (3, 4), (4, 2)))


def test_build_refuses_operator_calls_and_names_the_pipeline() -> None:
    mod = _add_matmul()
    with pytest.raises(
        BuildError,
        match=r"build: main still calls operators \(add, matmul\); run "
        r"tc\.graph\.get_pipeline\('zero'\) under the target first, or use tc\.compile",
    ):
        tc.build(mod, "cpu")
    with tc.Target("cpu"):
        lowered = get_pipeline("zero")(mod)
    x, y, w = _args()
    np.testing.assert_allclose(tc.build(lowered, "cpu")["main"](x, y, w), (x + y) @ w, rtol=1e-5)


def test_build_refuses_fused_groups_left_unfused() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (8,), "float32")
    out = bb.emit("tanh", [bb.emit("exp", [x])])
    mod = tc.IRModule({"main": bb.finish(out, "main")})
    with tc.Target("cpu"):
        grouped = FuseOps()(AnnotateOpPattern()(Legalize()(mod)))  # FuseTIR not run
    with pytest.raises(BuildError, match=r"main still calls fused group functions \(fused_"):
        tc.build(grouped, "cpu")


def test_runtime_build_builds_prim_funcs_only() -> None:
    with tc.Target("cpu"):
        mod = get_pipeline("zero")(_add_matmul())
    with pytest.raises(BuildError, match=r"holds graph functions \(main\).*call tc\.build"):
        tc.runtime.build(mod, "cpu")
    assert not hasattr(tc.runtime, "register_builder")
    prims = tc.IRModule(dict(mod.prim_funcs()))
    lib = tc.runtime.build(prims, "cpu")
    assert all(n in lib for n, _ in mod.prim_funcs())


def test_lowered_graph_function_slots_steps_and_liveness() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 4), "float32")
    a = bb.emit("exp", [x])
    b = bb.emit("tanh", [a])
    out = bb.emit("add", [b, a])
    func = Legalize()(tc.IRModule({"main": bb.finish(out, "main")}))["main"]
    assert isinstance(func, Function)
    prog = lower_graph_function(func)
    assert prog.name == "main"
    assert prog.param_names == ("x",)
    assert [s.func for s in prog.steps] == ["exp", "tanh", "add"]
    assert [(s.args, s.out, s.free_after) for s in prog.steps] == [
        ((0,), 1, ()),
        ((1,), 2, ()),
        ((2, 1), 3, (1, 2)),  # a and b die after their last use; x and the result are kept
    ]
    assert prog.ret_slot == 3
    assert [v.name for v in prog.shape_vars] == ["n"]
    assert prog.result_type.describe() == "Tensor((n, 4), float32)"


def test_the_runtime_runs_a_lowered_program_with_a_constant() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (4,), "float32")
    func = Legalize()(tc.IRModule({"main": bb.finish(bb.emit("exp", [x]), "main")}))
    main = func["main"]
    assert isinstance(main, Function)
    data = np.arange(4, dtype="float32")
    t = TensorType((4,), "float32")
    c = Binding(tc.graph.TensorVar("c", t), Constant(t, data))
    call = main.bindings[0]  # exp(x): its result is dead, freed right after
    out = Binding(tc.graph.TensorVar("d", t), tc.graph.CallTIR("exp", (c.var,), t))
    with_const = Function(main.params, (c, call, out), out.var, name="main")
    prog = lower_graph_function(with_const)
    assert dict(prog.const_of_slot) == {1: 0}
    np.testing.assert_array_equal(prog.constants[0], data)
    exe = build_executable(func, {"main": prog}, "cpu")
    np.testing.assert_allclose(exe["main"](np.zeros(4, "float32")), np.exp(data), rtol=1e-6)

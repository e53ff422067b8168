"""Graph functions returning a tuple: IR, script, passes, executor (numpy and torch)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import IRError
from tilecraft.graph import GraphBuilder, get_pipeline
from tilecraft.graph import script as gscript
from tilecraft.graph.ir import Function, TensorType, TensorVar
from tilecraft.graph.transform import DeadCodeElimination

PAIR = """
@R.function
def main(x: R.Tensor(("n", 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tuple(R.Tensor(("n", 8), "float32"), R.Tensor(("n", 8), "float32")):
    R.func_attr({'num_input': 1})
    with R.dataflow():
        h = R.matmul(x, w)
        a = R.relu(h)
        b = R.exp(h)
        R.output(a, b)
    return a, b
"""  # noqa: E501


def _pair(swap: bool = False) -> Function:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 8), "float32")
    w = bb.param("w", (8, 8), "float32")
    h = bb.emit("matmul", [x, w], name="h")
    a = bb.emit("relu", [h], name="a")
    b = bb.emit("exp", [h], name="b")
    return bb.finish((b, a) if swap else (a, b), "main", {"num_input": 1})


def test_tuple_result_construct_and_properties() -> None:
    f = _pair()
    assert f.returns_tuple
    assert [r.name for r in f.rets] == ["a", "b"]
    assert [t.describe() for t in f.ret_types] == ["Tensor((n, 8), float32)"] * 2
    with pytest.raises(IRError, match="returns a tuple of 2; use ret_types"):
        _ = f.ret_type
    single = Function(f.params, f.bindings, f.rets[0], f.attrs)
    assert not single.returns_tuple
    assert single.rets == (f.rets[0],)
    assert single.ret_type is f.rets[0].type


def test_tuple_script_round_trip_is_exact() -> None:
    f = gscript.parse(PAIR)
    assert f.script() == PAIR.strip()
    assert tc.ir.structural_equal(f, _pair())
    one = gscript.parse(PAIR.replace("return a, b", "return (a,)"))
    assert one.returns_tuple
    assert len(one.rets) == 1
    assert "return (a,)" in one.script()
    assert gscript.parse(one.script()).returns_tuple


def test_structural_hash_sees_result_order_and_tuple() -> None:
    h = tc.ir.structural_hash(_pair())
    assert h == tc.ir.structural_hash(gscript.parse(PAIR))
    assert h != tc.ir.structural_hash(_pair(swap=True))
    assert not tc.ir.structural_equal(_pair(), _pair(swap=True))
    f = _pair()
    one = Function(f.params, f.bindings, f.rets[:1], f.attrs)
    alone = Function(f.params, f.bindings, f.rets[0], f.attrs)
    assert tc.ir.structural_hash(one) != tc.ir.structural_hash(alone)
    back = tc.ir.from_json(tc.ir.to_json(f))
    assert tc.ir.structural_equal(back, f)
    assert back.returns_tuple


def test_ill_formed_results_are_rejected() -> None:
    f = _pair()
    stray = TensorVar("stray", TensorType((8,), "float32"))
    with pytest.raises(IRError, match=r"result 1 stray is not defined in the function"):
        Function(f.params, f.bindings, (f.rets[0], stray))
    with pytest.raises(IRError, match="returns an empty tuple"):
        Function(f.params, f.bindings, ())
    with pytest.raises(IRError, match="result 0 must be a TensorVar"):
        Function(f.params, f.bindings, ("a",))  # type: ignore[arg-type]


def test_dce_keeps_every_result() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (4, 8), "float32")
    a = bb.emit("relu", [x], name="a")
    bb.emit("exp", [x], name="dead")
    b = bb.emit("sigmoid", [a], name="b")
    mod = tc.IRModule({"main": bb.finish((a, b), "main")})
    out = DeadCodeElimination()(mod)["main"]
    assert [b.var.name for b in out.bindings] == ["a", "b"]
    assert [r.name for r in out.rets] == ["a", "b"]


def _result_used_later() -> tc.IRModule:
    """``a`` is a result and feeds ``b``: fusion must keep it as a value of its own."""
    bb = GraphBuilder()
    x = bb.param("x", ("n", 8), "float32")
    a = bb.emit("exp", [x], name="a")
    b = bb.emit("relu", [bb.emit("add", [a, x])], name="b")
    return tc.IRModule({"main": bb.finish((a, b, a, x), "main", {"num_input": 1})})


def test_fusion_keeps_a_result_that_is_used_later() -> None:
    with tc.Target("cpu"):
        mod = get_pipeline("zero")(_result_used_later())
    main = mod["main"]
    calls = list(main.bindings)
    assert len(calls) == 2  # exp alone; add + relu fused
    assert main.rets[0] is calls[0].var
    assert main.rets[1] is calls[1].var


@pytest.mark.parametrize("python", [False, True])
def test_executor_returns_a_tuple(python: bool) -> None:
    exe = tc.compile(_result_used_later(), target="cpu")
    f = exe["main"]
    if python:
        f.native = None
    else:
        assert f.native is not None
    x = np.random.default_rng(0).standard_normal((5, 8)).astype("float32")
    out = f(x)
    assert isinstance(out, tuple)
    assert len(out) == 4
    a, b, a2, x2 = out
    np.testing.assert_allclose(a, np.exp(x), rtol=1e-5)
    np.testing.assert_allclose(b, np.maximum(np.exp(x) + x, 0), rtol=1e-5)
    np.testing.assert_array_equal(a2, a)
    np.testing.assert_array_equal(x2, x)
    # every result is an array of its own: repeats and parameters are copies
    assert not np.shares_memory(a, a2)
    assert not np.shares_memory(x2, x)
    assert f(x[:2])[1].shape == (2, 8)  # another extent


def test_executor_tuple_with_weights_and_constants() -> None:
    w = np.random.default_rng(1).standard_normal((8, 8)).astype("float32")
    exe = tc.compile(tc.IRModule({"main": _pair()}), target="cpu", params={"w": w})
    x = np.random.default_rng(2).standard_normal((3, 8)).astype("float32")
    a, b = exe(x)
    np.testing.assert_allclose(a, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, np.exp(x @ w), rtol=1e-5, atol=1e-6)
    bb = GraphBuilder()
    x_ = bb.param("x", (2, 3), "float32")
    c = bb.param("c", (3,), "float32")
    y = bb.emit("add", [x_, c])
    mod = tc.IRModule({"main": bb.finish((c, y, c), "main", {"num_input": 1})})
    cv = np.arange(3, dtype="float32")
    exe = tc.compile(mod, target="cpu", params={"c": cv})
    c0, y0, c1 = exe(np.ones((2, 3), "float32"))
    np.testing.assert_array_equal(c0, cv)
    np.testing.assert_array_equal(c1, cv)
    np.testing.assert_array_equal(y0, np.broadcast_to(cv + 1, (2, 3)))
    assert not np.shares_memory(c0, c1)
    assert exe["main"].native is not None  # constants in a tuple run natively (copied in C)


def test_executor_tuple_torch_in_torch_out() -> None:
    torch = pytest.importorskip("torch")
    exe = tc.compile(_result_used_later(), target="cpu")
    x = torch.randn(3, 8, requires_grad=True)
    out = exe["main"](x)
    assert isinstance(out, tuple)
    assert all(isinstance(o, torch.Tensor) for o in out)
    torch.testing.assert_close(out[0], torch.exp(x.detach()))
    torch.testing.assert_close(out[3], x.detach())

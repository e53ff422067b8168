"""Constants in the graph IR, BindParams, FoldConstants and FuseTransposeMatmul."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import IRError, ScriptParseError
from tilecraft.graph import (
    BindParams,
    Constant,
    FoldConstants,
    FuseTransposeMatmul,
    GraphBuilder,
    GraphError,
    Legalize,
    TensorType,
    TensorVar,
    get_pipeline,
)
from tilecraft.graph import script as gscript
from tilecraft.graph.ir import Binding, CallTIR, Function, OpCall
from tilecraft.graph.transform.fuse_transpose_matmul import LONG_ROWS


def _const_func(values: np.ndarray, dtype: str = "float32") -> Function:
    t = TensorType(values.shape, dtype)
    v = TensorVar("c", t)
    return Function((), (Binding(v, Constant(t, values)),), v, name="main")


# Constant ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        (np.array([1.5, -0.0, math.inf, math.nan], "float32"), "float32"),
        (np.arange(6, dtype="float64").reshape(2, 3) / 7, "float64"),
        (np.array([[1, -2], [3, 2**40]], "int64"), "int64"),
        (np.array([True, False, True]), "bool"),
        (np.array(3.25, "float32"), "float32"),
    ],
)
def test_constants_round_trip_exactly(values: np.ndarray, dtype: str) -> None:
    func = _const_func(values, dtype)
    text = func.script()
    assert "R.const(R.Tensor((" in text
    back = gscript.parse(text)
    assert isinstance(back, Function)
    assert tc.ir.structural_equal(func, back)
    assert tc.ir.structural_hash(func) == tc.ir.structural_hash(back)
    got = back.bindings[0].value
    assert isinstance(got, Constant)
    assert got.data.tobytes() == values.tobytes()
    loaded = tc.ir.from_json(tc.ir.to_json(func))
    assert loaded.bindings[0].value.data.tobytes() == values.tobytes()
    mod = tc.IRModule({"main": func})
    assert tc.ir.structural_equal(gscript.parse(mod.script()), mod)


def test_constants_compare_by_value_and_are_private_copies() -> None:
    values = np.arange(4, dtype="float32")
    a, b = _const_func(values), _const_func(values.copy())
    assert tc.ir.structural_equal(a, b)
    assert tc.ir.structural_hash(a) == tc.ir.structural_hash(b)
    other = values.copy()
    other[3] = np.nextafter(np.float32(3), np.float32(4))
    assert not tc.ir.structural_equal(a, _const_func(other))
    assert tc.ir.structural_hash(a) != tc.ir.structural_hash(_const_func(other))
    values[0] = 99  # the constant copied the array
    held = a.bindings[0].value.data
    assert held[0] == 0
    assert not held.flags.writeable


def test_bad_constants_are_rejected() -> None:
    t = TensorType((2,), "float32")
    with pytest.raises(IRError, match="must be a numpy array of"):
        Constant(t, np.zeros(3, "float32"))
    with pytest.raises(IRError, match="must be a numpy array of"):
        Constant(t, np.zeros(2, "float64"))
    with pytest.raises(IRError, match="static shape"):
        Constant(TensorType((tc.ir.Var("n", "int32"),), "float32"), np.zeros(2, "float32"))
    with pytest.raises(IRError, match="cannot hold a constant"):
        Binding(TensorVar("v", TensorType((3,), "float32")), Constant(t, np.zeros(2, "float32")))
    text = _const_func(np.zeros(2, "float32")).script()
    payload = text.split('"float32"), "')[1].split('"')[0]
    for bad, message in (
        (text.replace(payload, "A" * 12), "payload holds 9 bytes"),
        (text.replace(payload, "!!!!"), "not base64"),
        (text.replace(f', "{payload}"', ""), "expected R.const"),
    ):
        with pytest.raises(ScriptParseError, match=message):
            gscript.parse(bad)


# FuseTransposeMatmul -------------------------------------------------------------------------
def _linear_graph(
    w_shape: tuple[int, ...] = (4, 8),
    axes: tuple[int, ...] | None = None,
    extra_use: bool = False,
) -> Function:
    bb = GraphBuilder()
    x = bb.param("x", (3, "n", 8), "float32")
    w = bb.param("w", w_shape, "float32")
    t = bb.emit("permute_dims", [w], {"axes": axes} if axes else None)
    y = bb.emit("matmul", [x, t])
    if extra_use:
        y = bb.emit("add", [y, bb.emit("sum", [t], {"axis": 0})])
    return bb.finish(y, "main")


def test_matmul_of_a_transposed_weight_reads_the_weight() -> None:
    mod = tc.IRModule({"main": _linear_graph()})
    out = FuseTransposeMatmul()(mod)
    (b,) = out["main"].bindings
    assert isinstance(b.value, OpCall)
    assert b.value.op == "matmul"
    assert [a.name for a in b.value.args] == ["x", "w"]
    assert b.value.attrs["transpose_b"] is True
    assert "R.matmul(x, w, transpose_b=True)" in out.script()
    assert tc.ir.structural_equal(gscript.parse(out.script()), out)
    exe = tc.build(get_pipeline("zero")(out), "cpu")
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((3, 2, 8)).astype("float32")
    wv = rng.standard_normal((4, 8)).astype("float32")
    np.testing.assert_allclose(exe["main"](xv, wv), xv @ wv.T, rtol=1e-5, atol=1e-5)


def test_batched_transposes_fuse_and_other_uses_keep_theirs() -> None:
    batched = FuseTransposeMatmul()(tc.IRModule({"main": _linear_graph((3, 4, 8), (0, 2, 1))}))
    assert [b.value.op for b in batched["main"].bindings] == ["matmul"]
    reversed_axes = tc.IRModule({"main": _linear_graph((4, 8, 3), (2, 1, 0))})
    kept = FuseTransposeMatmul()(reversed_axes)
    assert kept["main"] is reversed_axes["main"]  # nothing to fuse: the function is kept
    assert [b.value.op for b in kept["main"].bindings] == ["permute_dims", "matmul"]
    shared = FuseTransposeMatmul()(tc.IRModule({"main": _linear_graph(extra_use=True)}))
    ops = [b.value.op for b in shared["main"].bindings]
    assert ops == ["permute_dims", "matmul", "sum", "add"]  # the transpose has another use
    assert shared["main"].bindings[1].value.attrs["transpose_b"] is True
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((3, 2, 8)).astype("float32")
    wv = rng.standard_normal((3, 4, 8)).astype("float32")
    got = tc.build(get_pipeline("zero")(batched), "cpu")["main"](xv, wv)
    np.testing.assert_allclose(got, xv @ wv.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_a_bound_weight_of_a_matmul_of_several_rows_is_transposed_at_compile_time() -> None:
    # the Matmul rule packs panels of the (in, out) layout cheaply: the transpose of a bound
    # weight is kept for FoldConstants; a one-row matmul (a GEMV) reads (out, in) rows
    rng = np.random.default_rng(2)
    w = rng.standard_normal((3, 4)).astype("float32")
    rows = BindParams({"fc_weight": w})(_weighted())
    assert FuseTransposeMatmul()(rows)["main"] is rows["main"]
    folded = get_pipeline("default", params={"fc_weight": w})(_weighted())
    consts = [b.value.data for b in folded["main"].bindings if isinstance(b.value, Constant)]
    assert [c.shape for c in consts] == [(4, 3)]
    np.testing.assert_array_equal(consts[0], w.T)
    x, bias = rng.standard_normal((5, 4)).astype("float32"), np.ones(3, "float32")
    got = tc.build(folded, "cpu")["main"](x, bias)
    np.testing.assert_allclose(got, x @ w.T + bias, rtol=1e-5, atol=1e-5)

    bb = GraphBuilder()
    xv = bb.param("x", (1, 1, 4), "float32")
    wv = bb.param("fc_weight", (3, 4), "float32")
    one_row = tc.IRModule(
        {"main": bb.finish(bb.emit("matmul", [xv, bb.emit("permute_dims", [wv])]), "main")}
    )
    fused = FuseTransposeMatmul()(BindParams({"fc_weight": w})(one_row))
    assert [b.value.op for b in fused["main"].bindings if isinstance(b.value, OpCall)] == ["matmul"]
    unbound = FuseTransposeMatmul()(_weighted())
    assert [b.value.op for b in unbound["main"].bindings] == ["matmul", "add"]


def test_a_bound_weight_of_long_rows_is_read_as_stored() -> None:
    # from LONG_ROWS on, the (out, in) layout packs faster than a compile-time transpose
    k = LONG_ROWS
    bb = GraphBuilder()
    x = bb.param("x", ("n", k), "float32")
    w = bb.param("fc_weight", (3, k), "float32")
    mod = tc.IRModule(
        {"main": bb.finish(bb.emit("matmul", [x, bb.emit("permute_dims", [w])]), "main")}
    )
    weight = np.random.default_rng(3).standard_normal((3, k)).astype("float32")
    fused = FuseTransposeMatmul()(BindParams({"fc_weight": weight})(mod))
    ops = [b.value.op for b in fused["main"].bindings if isinstance(b.value, OpCall)]
    assert ops == ["matmul"]
    xv = np.random.default_rng(4).standard_normal((5, k)).astype("float32")
    got = tc.build(get_pipeline("default", params={"fc_weight": weight})(mod), "cpu")["main"](xv)
    np.testing.assert_allclose(got, xv @ weight.T, rtol=1e-4, atol=1e-4)


def test_transpose_b_type_inference() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (2, 8), "float32")
    w = bb.param("w", (4, 8), "float32")
    assert bb.emit("matmul", [x, w], {"transpose_b": True}).type.describe() == (
        "Tensor((2, 4), float32)"
    )
    with pytest.raises(GraphError, match=r"inner dimensions differ.*\^T"):
        bb.emit("matmul", [x, bb.param("v", (8, 4), "float32")], {"transpose_b": True})
    with pytest.raises(GraphError, match="'transpose_b' must be a bool"):
        bb.emit("matmul", [x, w], {"transpose_b": 1})


# BindParams -------------------------------------------------------------------------------------
def _weighted() -> tc.IRModule:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 4), "float32")
    w = bb.param("fc_weight", (3, 4), "float32")
    b = bb.param("fc_bias", (3,), "float32")
    y = bb.emit("add", [bb.emit("matmul", [x, bb.emit("permute_dims", [w])]), b])
    return tc.IRModule({"main": bb.finish(y, "main", {"num_input": 1})})


def test_bind_params_makes_weights_constants() -> None:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 4)).astype("float32")
    b = rng.standard_normal(3).astype("float32")
    mod = _weighted()
    bound = BindParams({"fc.weight": w, "fc_bias": b})(mod)
    func = bound["main"]
    assert [p.name for p in func.params] == ["x"]
    assert func.attrs["num_input"] == 1
    assert [type(b.value).__name__ for b in func.bindings[:2]] == ["Constant", "Constant"]
    assert len(mod["main"].params) == 3  # input untouched
    exe = tc.build(get_pipeline("default")(bound), "cpu")
    x = rng.standard_normal((5, 4)).astype("float32")
    np.testing.assert_allclose(exe["main"](x), x @ w.T + b, rtol=1e-5, atol=1e-5)
    only_x = BindParams({"x": np.zeros((2, 4), "float32")}, ["main"])
    with pytest.raises(GraphError, match="symbolic shape"):
        only_x(mod)


@pytest.mark.parametrize(
    ("params", "func_names", "message"),
    [
        ({"fc.wieght": np.zeros((3, 4), "float32")}, None, r"no parameter named \['fc.wieght'\]"),
        ({"fc_weight": np.zeros((4, 3), "float32")}, None, r"got an array of dtype float32 and"),
        ({"fc_weight": np.zeros((3, 4), "float64")}, None, "dtype float64"),
        ({"fc_weight": [[0.0] * 4] * 3}, None, "expected a numpy array or a DLPack tensor"),
        (
            {"fc_weight": np.zeros((3, 4), "float32"), "fc.weight": np.zeros((3, 4), "float32")},
            None,
            "both name parameter fc_weight",
        ),
        ({"fc_bias": np.zeros(3, "float32")}, ["forward"], "no graph function 'forward'"),
    ],
)
def test_bind_params_rejects_bad_requests(params, func_names, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        BindParams(params, func_names)(_weighted())


# FoldConstants ----------------------------------------------------------------------------------
def test_fold_constants_evaluates_parameter_only_chains() -> None:
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 3)).astype("float32")
    bb = GraphBuilder()
    x = bb.param("x", ("n", 3), "float32")
    wp = bb.param("w", (4, 3), "float32")
    scaled = bb.emit("exp", [bb.emit("permute_dims", [wp])])  # parameter-only
    y = bb.emit("add", [bb.emit("matmul", [x, scaled]), bb.emit("sum", [scaled], {"axis": 0})])
    mod = BindParams({"w": w})(tc.IRModule({"main": bb.finish(y, "main")}))
    before = mod.script()
    for stage in (mod, Legalize()(mod)):  # operator calls and call_tir both fold
        folded = FoldConstants()(stage)
        kinds = {b.var.name: type(b.value).__name__ for b in folded["main"].bindings}
        rest = type(stage["main"].bindings[-1].value).__name__
        assert kinds == {
            "w": "Constant",
            "permute_dims": "Constant",
            "exp": "Constant",
            "matmul": rest,
            "sum": "Constant",
            "gv": rest,
        }
        values = {b.var.name: b.value for b in folded["main"].bindings}
        np.testing.assert_allclose(values["exp"].data, np.exp(w.T), rtol=1e-6)
        np.testing.assert_allclose(values["sum"].data, np.exp(w.T).sum(0), rtol=1e-5)
    assert mod.script() == before
    out = get_pipeline("default")(mod)
    assert [b.value.func for b in out["main"].bindings if isinstance(b.value, CallTIR)] == [
        "fused_matmul_add"
    ]
    xv = rng.standard_normal((2, 3)).astype("float32")
    got = tc.build(out, "cpu")["main"](xv)
    e = np.exp(w.T.astype(np.float64))
    np.testing.assert_allclose(got, xv @ e + e.sum(0), rtol=1e-5, atol=1e-5)


def test_data_movement_of_constants_is_folded_by_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    # a weight transpose or reshape needs no compiled kernel (TinyLlama: 2 s of compile time)
    from tilecraft.graph.transform import fold_constants

    def no_build(*args: object, **kw: object) -> None:
        raise AssertionError("FoldConstants built kernels for pure data movement")

    monkeypatch.setattr(fold_constants, "build", no_build)
    bb = GraphBuilder()
    x = bb.param("x", (2, 6), "float32")
    w = bb.param("w", (3, 4), "float32")
    t = bb.emit("reshape", [bb.emit("permute_dims", [w])], {"shape": (2, 6)})
    mod = tc.IRModule({"main": bb.finish(bb.emit("add", [x, t]), "main")})
    wv = np.arange(12, dtype="float32").reshape(3, 4)
    folded = FoldConstants()(BindParams({"w": wv})(mod))
    consts = [b.value.data for b in folded["main"].bindings if isinstance(b.value, Constant)]
    np.testing.assert_array_equal(consts[-1], wv.T.reshape(2, 6))
    assert consts[-1].flags.c_contiguous
    monkeypatch.undo()
    xv = np.ones((2, 6), "float32")
    out = tc.build(get_pipeline("zero")(folded), "cpu")["main"](xv)
    np.testing.assert_array_equal(out, xv + wv.T.reshape(2, 6))


def test_fold_constants_leaves_a_module_without_constants_alone() -> None:
    mod = _weighted()
    assert FoldConstants()(mod) is mod


def test_a_fully_folded_function_still_checks_inputs_and_returns_copies() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (2,), "float32")
    w = bb.param("w", (2,), "float32")
    mod = tc.IRModule({"main": bb.finish(bb.emit("exp", [w]), "main")})
    folded = get_pipeline("default", params={"w": np.zeros(2, "float32")})(mod)
    assert [type(b.value).__name__ for b in folded["main"].bindings] == ["Constant"]
    assert [p.name for p in folded["main"].params] == [x.name]
    f = tc.build(folded, "cpu")["main"]
    out = f(np.ones(2, "float32"))
    np.testing.assert_array_equal(out, [1, 1])
    out[0] = 5  # the caller owns its result; the constant is not touched
    np.testing.assert_array_equal(f(np.ones(2, "float32")), [1, 1])
    with pytest.raises(GraphError, match=r"argument 0 \(x\) has dtype float64"):
        f(np.ones(2))


@pytest.mark.parametrize(
    ("make_pass", "bind_weight"),
    [
        (FuseTransposeMatmul, False),
        (lambda: BindParams({"fc_bias": np.ones(3, "float32")}), True),
        (FoldConstants, True),
    ],
)
def test_each_pass_leaves_its_input_unchanged(make_pass, bind_weight: bool) -> None:
    mod = _weighted()
    if bind_weight:
        mod = BindParams({"fc_weight": np.ones((3, 4), "float32")})(mod)
    text, funcs = mod.script(), dict(mod.functions)
    out = make_pass()(mod)
    assert out.script() != text  # the pass did rewrite something...
    assert mod.script() == text  # ...in a new module
    assert all(mod.functions[n] is f for n, f in funcs.items())

"""The graph executor: memory planning and reuse, and wrong calls that raise, never crash."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.graph import GraphBuilder, GraphError, Legalize, build_graph_module, get_pipeline
from tilecraft.graph.script import parse as parse_graph
from tilecraft.lower.graph_program import GraphStep as Step
from tilecraft.runtime.executor.memory_plan import RESULT, plan_memory

CHAIN = ("exp", "tanh", "sigmoid", "negative", "relu", "tanh")


def _chain_exe() -> tc.graph.Executable:
    """x -> exp -> tanh -> ... as separate (unfused) kernels."""
    bb = GraphBuilder()
    v = bb.param("x", ("n", 32), "float32")
    for op in CHAIN:
        v = bb.emit(op, [v])
    return build_graph_module(Legalize()(tc.IRModule({"main": bb.finish(v, "main")})), "cpu")


def _np_chain(x: np.ndarray) -> np.ndarray:
    fns = {
        "exp": np.exp,
        "tanh": np.tanh,
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "negative": np.negative,
        "relu": lambda v: np.maximum(v, 0),
    }
    for op in CHAIN:
        x = fns[op](x)
    return x


def test_chain_uses_two_storages_and_reuses_them() -> None:
    exe = _chain_exe()
    f = exe["main"]
    x = np.random.default_rng(0).standard_normal((5, 32)).astype("float32")
    plan = f.plan_for(x)
    # a value dies as soon as its consumer has run, so two blocks alternate
    assert plan.storage == (0, 1, 0, 1, 0, RESULT)
    assert plan.storage_bytes == (5 * 32 * 4, 5 * 32 * 4)
    seen: list[tuple[str, int]] = []
    out = f.run([x], lambda kernel, arr, _t: seen.append((kernel, arr.ctypes.data)))
    np.testing.assert_allclose(out, _np_chain(x.astype("float64")), rtol=1e-5, atol=1e-6)
    addresses = [a for _, a in seen]
    # six kernels write into three distinct arrays: two reused storages and the result
    assert len(set(addresses)) == 3
    assert addresses[0] == addresses[2] == addresses[4]
    assert addresses[1] == addresses[3]
    assert addresses[5] == out.ctypes.data
    assert f.plan_for(x) is plan  # cached per binding of n
    # kernels named like C math functions (exp, tanh) are compiled under other symbols
    single = np.empty_like(x)
    exe["exp"](x, single)
    np.testing.assert_allclose(single, np.exp(x), rtol=1e-6)
    assert f.plan_for(np.zeros((7, 32), "float32")).storage_bytes == (7 * 32 * 4,) * 2


def test_plan_reuses_a_larger_block_for_a_smaller_value() -> None:
    steps = [
        Step("a", (0,), 1, (0,)),
        Step("b", (1,), 2, (1,)),
        Step("c", (2,), 3, (2,)),
        Step("d", (3,), 4, (3,)),
    ]
    shapes = [(64,), (8,), (16,), (4,)]
    plan = plan_memory(steps, shapes, ["float32"] * 4, result_slot=4)
    # b cannot take a's block (a is b's argument); c takes a's 256-byte block, which fits
    assert plan.storage == (0, 1, 0, RESULT)
    assert plan.storage_bytes == (256, 32)
    storages = plan.allocate()
    view = plan.output(2, storages)
    assert view.shape == (16,)
    assert view.dtype == np.float32
    assert view.flags.c_contiguous
    assert np.shares_memory(view, storages[0])


def test_plan_grows_a_free_block_instead_of_adding_one() -> None:
    steps = [
        Step("a", (0,), 1, (0,)),
        Step("b", (1,), 2, (1,)),
        Step("c", (2,), 3, (2,)),
        Step("d", (3,), 4, (3,)),
    ]
    plan = plan_memory(steps, [(4,), (4,), (32,), (2,)], ["float32"] * 4, result_slot=4)
    assert plan.storage == (0, 1, 0, RESULT)
    assert plan.storage_bytes == (128, 16)


def test_values_used_later_are_not_overwritten() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (4, 8), "float32")
    a = bb.emit("exp", [x])
    b = bb.emit("tanh", [a])
    c = bb.emit("sigmoid", [b])
    d = bb.emit("add", [a, c])  # a stays alive across b and c
    exe = build_graph_module(Legalize()(tc.IRModule({"main": bb.finish(d, "main")})), "cpu")
    xv = np.random.default_rng(1).standard_normal((4, 8)).astype("float32")
    plan = exe["main"].plan_for(xv)
    assert plan.storage == (0, 1, 2, RESULT)
    e = np.exp(xv.astype("float64"))
    np.testing.assert_allclose(exe["main"](xv), e + 1 / (1 + np.exp(-np.tanh(e))), rtol=1e-5)


@pytest.fixture(scope="module")
def exe() -> tc.graph.Executable:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 4), "float32")
    y = bb.param("y", ("n", 4), "float32")
    w = bb.param("w", (4, 2), "float32")
    out = bb.emit("matmul", [bb.emit("add", [x, y]), w])
    with tc.Target("cpu"):  # build runs no pipeline: legalize and fuse first
        mod = get_pipeline("zero")(tc.IRModule({"main": bb.finish(out, "main")}))
    return build_graph_module(mod, "cpu")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (lambda x, y, w: (x, y), r"main: expected 3 arguments \(x, y, w\), got 2"),
        (lambda x, y, w: (x, y, w, w), r"expected 3 arguments"),
        (lambda x, y, w: (x, y[:2], w), r"argument 1 \(y\).*dimension 0 should be 3"),
        (lambda x, y, w: (x, y, w.T.copy()), r"argument 2 \(w\) has shape \(2, 4\)"),
        (lambda x, y, w: (x, y.astype("float64"), w), r"argument 1 \(y\) has dtype float64"),
        (lambda x, y, w: (x, y.astype("int32"), w), r"has dtype int32, expected float32"),
        (lambda x, y, w: (x[None], y, w), r"argument 0 \(x\) has shape \(1, 3, 4\)"),
        (lambda x, y, w: (x.tolist(), y, w), r"argument 0 \(x\): expected a numpy array"),
        (lambda x, y, w: (None, y, w), r"expected a numpy array or a DLPack tensor, got NoneType"),
        (lambda x, y, w: ("x", y, w), r"got str"),
    ],
)
def test_wrong_calls_raise_clear_errors(exe: tc.graph.Executable, args, message) -> None:
    x, y = np.ones((3, 4), "float32"), np.ones((3, 4), "float32")
    w = np.ones((4, 2), "float32")
    with pytest.raises(GraphError, match=message):
        exe["main"](*args(x, y, w))
    # the executable still works after a rejected call
    np.testing.assert_array_equal(exe["main"](x, y, w), np.full((3, 2), 8, "float32"))


def test_non_contiguous_and_empty_inputs_work(exe: tc.graph.Executable) -> None:
    x = np.arange(24, dtype="float32").reshape(4, 6)[:3, :4]  # a strided view
    y = np.ones((3, 4), "float32")
    w = np.eye(4, 2, dtype="float32")
    np.testing.assert_array_equal(exe["main"](x, y, w), (x + y) @ w)
    empty = np.zeros((0, 4), "float32")
    assert exe["main"](empty, empty, w).shape == (0, 2)


MISMATCHED = """
@T.ir_module
class Module:
    @T.prim_func
    def double(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        with T.block("root"):
            for i in range(4):
                with T.block("B"):
                    vi = T.axis.spatial(4, i)
                    T.reads(A[vi])
                    T.writes(B[vi])
                    B[vi] = A[vi] * T.float32(2.0)

    @R.function
    def main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        cls = Module
        with R.dataflow():
            gv = R.call_tir(cls.double, (x,), out_sinfo=R.Tensor((8,), "float32"))
            R.output(gv)
        return gv
"""


def test_build_rejects_a_call_tir_that_does_not_fit_its_prim_func() -> None:
    mod = parse_graph(MISMATCHED)
    assert isinstance(mod, tc.IRModule)
    with pytest.raises(
        GraphError,
        match=r"main calls 'double' at gv: parameter A is "
        r"Tensor\(\(4,\), float32\), but the call passes "
        r"Tensor\(\(8,\), float32\)",
    ):
        build_graph_module(mod, "cpu")
    fixed = parse_graph(MISMATCHED.replace("(8,)", "(4,)"))
    assert isinstance(fixed, tc.IRModule)
    out = build_graph_module(fixed, "cpu")["main"](np.arange(4, dtype="float32"))
    np.testing.assert_array_equal(out, [0, 2, 4, 6])

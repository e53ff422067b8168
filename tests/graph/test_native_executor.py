"""The native graph executor: one call from Python per forward, same results and errors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.codegen.graph_c import NativeStatus
from tilecraft.graph import GraphBuilder, GraphError, Legalize, build_graph_module
from tilecraft.graph.ir import Binding, Constant, Function, TensorType
from tilecraft.runtime.executor import GraphFunction
from tilecraft.runtime.module import Function as KernelFunction

CHAIN = ("exp", "tanh", "sigmoid", "negative", "relu", "tanh")


def _build(func: Function, *prims: tuple[str, tc.ir.PrimFunc]) -> tc.graph.Executable:
    mod = tc.IRModule({**dict(prims), func.name: func})
    return build_graph_module(Legalize()(mod), "cpu")


def _chain() -> GraphFunction:
    bb = GraphBuilder()
    v = bb.param("x", ("n", 32), "float32")
    for op in CHAIN:
        v = bb.emit(op, [v])
    return _build(bb.finish(v, "main"))["main"]


class CallCounter:
    """Counts kernel calls through the Python wrappers and calls of a native entry."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, f: GraphFunction) -> None:
        self.kernel_calls = 0
        self.native_calls = 0
        original = KernelFunction.__call__

        def counted_kernel(fn: KernelFunction, *args: Any) -> None:
            self.kernel_calls += 1
            original(fn, *args)

        monkeypatch.setattr(KernelFunction, "__call__", counted_kernel)
        assert f.native is not None
        call = f.native.call

        def counted_call(*args: Any) -> Any:
            self.native_calls += 1
            return call(*args)

        monkeypatch.setattr(f.native, "call", counted_call)


def test_a_forward_is_one_native_call_and_no_kernel_wrapper_call(monkeypatch) -> None:
    f = _chain()
    x = np.random.default_rng(0).standard_normal((5, 32)).astype("float32")
    expected = f.run([x])
    counter = CallCounter(monkeypatch, f)
    for _ in range(3):
        np.testing.assert_array_equal(f(x), expected)
    assert counter.kernel_calls == 0
    assert counter.native_calls == 3
    f.run([x])  # the Python executor, for comparison, calls every kernel wrapper
    assert counter.kernel_calls == len(CHAIN)


def test_native_forward_writes_into_the_planned_storages() -> None:
    f = _chain()
    x = np.random.default_rng(1).standard_normal((5, 32)).astype("float32")
    out, records = f.profile(x)
    assert [r.kernel for r in records] == list(CHAIN)
    assert all(r.seconds >= 0 for r in records)
    addresses = [r.address for r in records]
    # the plan of test_executor's chain test: two storages alternate, then the result
    assert f.plan_for(x).storage == (0, 1, 0, 1, 0, -1)
    assert len(set(addresses)) == 3
    assert addresses[0] == addresses[2] == addresses[4]
    assert addresses[1] == addresses[3]
    assert addresses[5] == out.ctypes.data
    assert f.native is not None
    assert addresses[0] == f.native.storages[0].ctypes.data
    assert addresses[1] == f.native.storages[1].ctypes.data
    np.testing.assert_array_equal(out, f.run([x]))


def test_workspace_is_planned_again_only_when_it_must_grow(monkeypatch) -> None:
    f = _chain()
    assert f.native is not None
    plans: list[tuple[int, ...]] = []
    replan = f.native.replan

    def counted() -> None:
        replan()
        plans.append(tuple(s.nbytes for s in f.native.storages))  # type: ignore[union-attr]

    f.native._replan = counted
    f.native.ctx[f.native.layout.REPLAN] = id(counted)
    rng = np.random.default_rng(2)
    for n in (4, 4, 9, 2, 9, 0, 16):
        x = rng.standard_normal((n, 32)).astype("float32")
        np.testing.assert_array_equal(f(x), f.run([x]))
    # planned at n=4, grown at 9 and 16; n=2, 9 again and 0 fit the blocks already there
    assert plans == [(4 * 128,) * 2, (9 * 128,) * 2, (16 * 128,) * 2]


def test_symbolic_extents_at_several_sizes_and_errors() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", "m"), "float32")
    y = bb.param("y", ("m", 3), "float32")
    b = bb.param("b", ("n", 1), "float32")
    out = bb.emit("add", [bb.emit("matmul", [x, y]), b])
    f = _build(bb.finish(out, "main"))["main"]
    rng = np.random.default_rng(3)
    # (m = 0 is left out: a reduction over an empty extent leaves its output uninitialized,
    # a lowering defect reported separately)
    for n, m in ((1, 1), (2, 7), (9, 4), (0, 5), (3, 1)):
        xv = rng.standard_normal((n, m)).astype("float32")
        yv = rng.standard_normal((m, 3)).astype("float32")
        bv = rng.standard_normal((n, 1)).astype("float32")
        got = f(xv, yv, bv)
        assert got.shape == (n, 3)
        np.testing.assert_array_equal(got, f.run([xv, yv, bv]))
        np.testing.assert_allclose(got, xv @ yv + bv, rtol=1e-5, atol=1e-5)
    with pytest.raises(GraphError, match=r"argument 1 \(y\).*dimension 0 should be 2"):
        f(np.ones((4, 2), "float32"), np.ones((3, 3), "float32"), np.ones((4, 1), "float32"))
    with pytest.raises(GraphError, match=r"argument 2 \(b\).*dimension 0 should be 4"):
        f(np.ones((4, 2), "float32"), np.ones((2, 3), "float32"), np.ones((5, 1), "float32"))


def test_inputs_that_need_converting_take_the_checked_path(monkeypatch) -> None:
    f = _chain()
    x = np.random.default_rng(4).standard_normal((6, 64)).astype("float32")
    expected = f.run([np.ascontiguousarray(x[:, ::2])])
    strided = x[:, ::2]
    readonly = np.ascontiguousarray(strided)
    readonly.flags.writeable = False
    fortran = np.asfortranarray(strided)
    counter = CallCounter(monkeypatch, f)
    for arg in (strided, readonly, fortran, _DLPackOnly(readonly)):
        np.testing.assert_array_equal(f(arg), expected)
    assert counter.kernel_calls == 0
    # strided, Fortran-ordered and DLPack-only inputs are declined once, converted, run natively
    assert counter.native_calls == 1 + 2 * 3


class _DLPackOnly:
    """A tensor offering only DLPack (no buffer protocol), like a CPU torch tensor."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.arr.__dlpack_device__()


def test_int64_arrays_of_either_buffer_format_are_accepted() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (4,), "int64")
    f = _build(bb.finish(bb.emit("negative", [x]), "main"))["main"]
    for dt in (np.int64, np.longlong):
        arr = np.arange(4, dtype=dt)
        np.testing.assert_array_equal(f(arr), -np.arange(4))


def test_a_call_while_another_runs_takes_the_python_path() -> None:
    f = _chain()
    native = f.native
    assert native is not None
    x = np.random.default_rng(5).standard_normal((3, 32)).astype("float32")
    native.ctx[native.layout.BUSY] = 1  # as if another thread were inside the entry
    try:
        assert native.call(x) is None
        assert native.status() is NativeStatus.BUSY
        np.testing.assert_array_equal(f(x), f.run([x]))
    finally:
        native.ctx[native.layout.BUSY] = 0


def test_concurrent_forwards_give_correct_results() -> None:
    f = _chain()
    rng = np.random.default_rng(6)
    inputs = [rng.standard_normal((n, 32)).astype("float32") for n in (64, 200, 3, 128)]
    expected = [f.run([x]) for x in inputs]
    errors: list[str] = []

    def work(k: int) -> None:
        for i in range(40):
            j = (k + i) % len(inputs)
            if not np.array_equal(f(inputs[j]), expected[j]):
                errors.append(f"thread {k} call {i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_constants_and_an_input_returned_as_is() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (2, 3), "float32")
    bias = tc.graph.TensorVar("bias", TensorType((2, 3), "float32"))
    values = np.arange(6, dtype="float32").reshape(2, 3)
    add = tc.graph.TensorVar("gv", TensorType((2, 3), "float32"))
    from tilecraft.graph.legalize_ops import _TABLE  # noqa: F401  (registers legalizations)

    func = Function(
        (x,),
        (
            Binding(bias, Constant(bias.type, values)),
            Binding(add, tc.graph.OpCall("add", (x, bias))),
        ),
        add,
        name="main",
    )
    f = _build(func)["main"]
    assert f.native is not None
    xv = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(f(xv), values + 1)
    np.testing.assert_array_equal(f.run([xv]), values + 1)
    with pytest.raises(GraphError, match=r"main: expected 1 arguments \(x\), got 2"):
        f(xv, values)
    ident = _build(Function((x,), (), x, name="ident"))
    assert ident["ident"](xv) is xv


def test_a_negative_extent_raises_graph_error() -> None:
    a = tc.te.placeholder((tc.ir.Var("n", "int32"),), "float32", name="A")
    drop = tc.te.create_prim_func(
        [a, tc.te.compute((a.shape[0] - 5,), lambda i: a[i + 5], name="B")], name="drop5"
    )
    bb = GraphBuilder()
    x = bb.param("x", ("n",), "float32")
    n = bb.shape_vars["n"]
    out = bb.emit_call_tir("drop5", [x], TensorType((n - 5,), "float32"))
    f = _build(bb.finish(out, "main"), ("drop5", drop))["main"]
    np.testing.assert_array_equal(f(np.arange(8, dtype="float32")), [5, 6, 7])
    with pytest.raises(GraphError, match=r"extent .* is -2 for these inputs"):
        f(np.arange(3, dtype="float32"))
    with pytest.raises(GraphError, match=r"is -2 for these inputs"):
        f.run([np.arange(3, dtype="float32")])


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.ones((3, 32), "float64"),
        lambda: np.ones((3, 31), "float32"),
        lambda: np.ones((32,), "float32"),
        lambda: [[1.0] * 32],
        lambda: None,
    ],
)
def test_native_and_python_paths_raise_the_same_errors(make: Callable[[], Any]) -> None:
    f = _chain()
    with pytest.raises(GraphError) as native_error:
        f(make())
    with pytest.raises(GraphError) as python_error:
        f.run([make()])
    assert str(native_error.value) == str(python_error.value)


def test_gpu_scheduled_kernels_run_natively_under_emulation() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (4, 8), "float32")
    mod = Legalize()(tc.IRModule({"main": bb.finish(bb.emit("exp", [x]), "main")}))
    sch = tc.Schedule(mod["exp"])
    i, j = sch.get_loops(sch.get_block("T_exp"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    funcs = dict(mod.functions)
    funcs["exp"] = sch.func.update(name="exp", attrs=mod["exp"].attrs)
    exe = tc.build(tc.IRModule(funcs), tc.Target("cuda -arch=sm_90"), emulate=True)
    f = exe["main"]
    assert f.native is not None
    a = np.random.default_rng(7).standard_normal((4, 8)).astype("float32")
    np.testing.assert_array_equal(f(a), f.run([a]))
    np.testing.assert_allclose(f(a), np.exp(a), rtol=1e-6)

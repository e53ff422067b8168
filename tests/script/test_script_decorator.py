"""The decorator form (source read with inspect + ast, never executed) equals the string form."""

from __future__ import annotations

import inspect

import pytest
from reference_kernels import MATMUL

import tilecraft as tc
from tilecraft.errors import ScriptParseError
from tilecraft.ir import IRModule, PrimFunc
from tilecraft.script import T


@T.prim_func
def add_one(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):  # noqa: N803
    """Docstrings are skipped."""
    for i in range(128):
        B[i] = A[i] + T.float32(1.0)


ADD_ONE = """
@T.prim_func
def add_one(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for i in range(128):
        B[i] = A[i] + T.float32(1.0)
"""


@T.prim_func
def matmul(
    A: T.Buffer((128, 128), "float32"),  # noqa: N803
    B: T.Buffer((128, 128), "float32"),  # noqa: N803
    C: T.Buffer((128, 128), "float32"),  # noqa: N803
):
    T.func_attr({"global_symbol": "matmul", "tir.noalias": True})
    with T.block("root"):
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.ir_module
class Module:
    T.module_attr({"target": "cpu"})

    @T.prim_func
    def scale(X: T.Buffer((16,), "float32"), n: T.int32):  # noqa: N803, N805
        for i in T.parallel(16):
            X[i] = X[i] * T.Cast("float32", n)

    @T.prim_func
    def fill(Y: T.Buffer((8, 8), "float16")):  # noqa: N803, N805
        for i, j in T.grid(8, 8):
            Y[i, j] = T.float16(0.5)


MODULE = """
@T.ir_module
class Module:
    T.module_attr({"target": "cpu"})

    @T.prim_func
    def scale(X: T.Buffer((16,), "float32"), n: T.int32):
        for i in T.parallel(16):
            X[i] = X[i] * T.Cast("float32", n)

    @T.prim_func
    def fill(Y: T.Buffer((8, 8), "float16")):
        for i, j in T.grid(8, 8):
            Y[i, j] = T.float16(0.5)
"""


def test_function_decorator_equals_string() -> None:
    assert isinstance(add_one, PrimFunc)
    assert add_one.name == "add_one"
    assert tc.ir.structural_equal(add_one, tc.script.parse(ADD_ONE))
    assert add_one.script() == ADD_ONE.strip()


def test_matmul_decorator_equals_reference_text() -> None:
    assert tc.ir.structural_equal(matmul, tc.script.parse(MATMUL))


def test_module_decorator_equals_string() -> None:
    assert isinstance(Module, IRModule)
    assert list(Module) == ["scale", "fill"]
    assert Module.attrs["target"] == "cpu"
    parsed = tc.script.parse(MODULE)
    assert tc.ir.structural_equal(Module, parsed)
    assert Module.script() == MODULE.strip()


def test_show_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    Module.show()
    assert capsys.readouterr().out == MODULE.strip() + "\n"


def test_decorator_errors_point_into_this_file() -> None:
    def bad(A: T.Buffer((4,), "float32")):  # noqa: N803
        A[0] = undefined_name  # noqa: F821

    with pytest.raises(ScriptParseError, match="undefined variable 'undefined_name'") as info:
        T.prim_func(bad)
    assert info.value.line == inspect.getsourcelines(bad)[1] + 1
    assert "undefined_name" in info.value.source_line


def test_stubs_are_inert() -> None:
    assert T.Buffer((4,), "float32") is T.Buffer
    assert callable(T.int64)
    assert callable(T.axis.spatial)
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        _ = T.nonexistent

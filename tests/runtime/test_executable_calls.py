"""A compiled executable is called as ``exe(x)``, ``exe.forward(x)`` or ``exe["forward"](x=x)``;
wrong, missing and extra arguments raise the runtime's argument errors (TypeErrors)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.runtime import ArgumentTypeError, GraphArgumentError
from tilecraft.runtime.arguments import NoSuchAttributeError


class Scale(nn.Module):
    def __init__(self) -> None:
        self.w = nn.Parameter((4,), init="ones")

    def forward(self, x: nn.Tensor, y: nn.Tensor) -> nn.Tensor:
        return x * self.w + y * 2.0

    def double(self, x: nn.Tensor) -> nn.Tensor:
        return x * 2

    def twice(self, x: nn.Tensor) -> nn.Tensor:
        return x + x


def build(methods: dict[str, dict[str, nn.spec.Tensor]]) -> tc.runtime.Executable:
    mod, params = Scale().export(methods)
    return tc.compile(mod, target="cpu", params=params)


XY = {"x": nn.spec.Tensor((4,)), "y": nn.spec.Tensor((4,))}
X = np.arange(4, dtype="float32")
Y = np.ones(4, "float32")


@pytest.fixture(scope="module")
def exe() -> tc.runtime.Executable:
    return build({"forward": XY, "double": {"x": nn.spec.Tensor((4,))}})


def test_every_call_form_gives_the_same_result(exe) -> None:  # type: ignore[no-untyped-def]
    want = X + 2 * Y
    for out in (
        exe(X, Y),
        exe(x=X, y=Y),
        exe(X, y=Y),
        exe.forward(X, Y),
        exe.forward(y=Y, x=X),
        exe["forward"](X, Y),
        exe["forward"](x=X, y=Y),
    ):
        np.testing.assert_allclose(out, want)
    np.testing.assert_allclose(exe.double(X), 2 * X)
    np.testing.assert_allclose(exe["double"](x=X), 2 * X)


def test_the_only_function_is_the_default_whatever_its_name() -> None:
    only = build({"double": {"x": nn.spec.Tensor((4,))}})
    np.testing.assert_allclose(only(X), 2 * X)
    np.testing.assert_allclose(only(x=X), 2 * X)


def test_without_forward_exe_call_names_the_functions() -> None:
    two = build({"double": {"x": nn.spec.Tensor((4,))}, "twice": {"x": nn.spec.Tensor((4,))}})
    with pytest.raises(ArgumentTypeError, match=r"none is named 'forward'.*exe\['double'\]"):
        two(X)
    with pytest.raises(TypeError):
        two(X)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, r"forward: expected 2 arguments \(x, y\), got 0"),
        ((X,), {}, r"forward: expected 2 arguments \(x, y\), got 1"),
        ((X, Y, Y), {}, r"forward: expected 2 arguments \(x, y\), got 3"),
        ((X,), {"z": Y}, r"forward: unknown argument 'z'; the parameters are \(x, y\)"),
        ((), {"y": Y}, r"forward: missing argument 'x'; the parameters are \(x, y\)"),
        ((X,), {"x": X, "y": Y}, r"forward: argument 'x' given twice"),
        ((X, Y, Y), {"y": Y}, r"forward: expected 2 arguments \(x, y\), got 3 positional"),
        ((X.astype("float64"), Y), {}, r"argument 0 \(x\) has dtype float64, expected float32"),
        ((X[:3], Y), {}, r"argument 0 \(x\) has shape \(3,\)"),
        (("x", Y), {}, r"argument 0 \(x\): expected a numpy array or a DLPack tensor, got str"),
    ],
)
def test_argument_errors_are_the_runtimes_type_errors(exe, args, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    for call in (exe, exe.forward, exe["forward"]):
        with pytest.raises(GraphArgumentError, match=message) as info:
            call(*args, **kwargs)
        assert isinstance(info.value, TypeError)
        assert isinstance(info.value, tc.errors.GraphError)
        assert isinstance(info.value, tc.runtime.ArgumentError)


def test_an_unknown_attribute_is_a_tilecraft_attribute_error(exe) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NoSuchAttributeError, match=r"no attribute or function 'backward'.*"):
        exe.backward(X)
    assert not hasattr(exe, "backward")
    assert isinstance(NoSuchAttributeError("x"), tc.errors.TilecraftError)
    with pytest.raises(tc.errors.GraphError, match=r"no function 'backward'; graph functions"):
        exe["backward"]

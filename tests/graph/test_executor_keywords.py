"""Graph functions take their inputs by parameter name too: ``exe["main"](x=x, w=w)``."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.graph import GraphBuilder, Legalize, build_graph_module
from tilecraft.runtime.arguments import ArgumentError, ArgumentTypeError


@pytest.fixture(scope="module")
def exe() -> tc.graph.Executable:
    """main(x, w) = relu(x + w)."""
    bb = GraphBuilder()
    x = bb.param("x", ("n", 8), "float32")
    w = bb.param("w", ("n", 8), "float32")
    out = bb.emit("relu", [bb.emit("add", [x, w])])
    return build_graph_module(Legalize()(tc.IRModule({"main": bb.finish(out, "main")})), "cpu")


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8)).astype("float32")
    w = rng.standard_normal((3, 8)).astype("float32")
    return x, w, np.maximum(x + w, 0)


def test_keyword_and_mixed_calls_match_the_positional_one(exe: tc.graph.Executable) -> None:
    x, w, want = _inputs()
    f = exe["main"]
    np.testing.assert_allclose(f(x, w), want, rtol=1e-6)
    np.testing.assert_allclose(f(x=x, w=w), want, rtol=1e-6)
    np.testing.assert_allclose(f(w=w, x=x), want, rtol=1e-6)
    np.testing.assert_allclose(f(x, w=w), want, rtol=1e-6)


@pytest.mark.parametrize(
    ("positional", "keywords", "error", "message"),
    [
        (0, {"x": 0, "v": 1}, ArgumentTypeError, r"main: unknown argument 'v'.*\(x, w\)"),
        (0, {"w": 1}, ArgumentError, r"main: missing argument 'x'"),
        (1, {}, None, None),  # positional only: unchanged (checked by the executor)
        (1, {"x": 1}, ArgumentTypeError, r"main: argument 'x' given twice.*position 0"),
        (2, {"w": 1}, ArgumentTypeError, r"main: argument 'w' given twice.*position 1"),
        (3, {"x": 0}, ArgumentError, r"main: expected 2 arguments \(x, w\), got 3 positional"),
    ],
)
def test_wrong_keyword_calls_name_the_arguments(
    exe: tc.graph.Executable,
    positional: int,
    keywords: dict[str, int],
    error: type[Exception] | None,
    message: str | None,
) -> None:
    x, w, _ = _inputs()
    arrays = [x, w, x]
    args = arrays[:positional]
    kwargs = {k: arrays[v] for k, v in keywords.items()}
    if error is None:
        with pytest.raises(tc.graph.GraphError, match="expected 2 arguments"):
            exe["main"](*args, **kwargs)
        return
    assert message is not None
    with pytest.raises(error, match=message):
        exe["main"](*args, **kwargs)

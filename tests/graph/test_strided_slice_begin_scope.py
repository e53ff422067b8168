"""strided_slice whose start is a shape variable: the variable must come with an argument."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.graph import GraphBuilder, GraphError


def test_begin_naming_a_variable_no_argument_has_is_refused_at_emit() -> None:
    # regression: the ONNX importer sliced a weight at the KV cache's length without the
    # cache in scope; type inference let it through and constant folding then failed
    bb = GraphBuilder()
    bb.param("cache", ("p", 4), "float32")
    w = bb.param("w", (16, 4), "float32")
    with pytest.raises(GraphError, match="'p' is not a shape variable of the arguments"):
        bb.emit("strided_slice", [w], {"axis": 0, "begin": "p", "shape": (1, 4)})


def test_begin_from_a_scope_argument_with_bound_weight_runs() -> None:
    bb = GraphBuilder()
    cache = bb.param("cache", ("p", 4), "float32")
    w = bb.param("w", (16, 4), "float32")
    row = bb.emit("strided_slice", [w, cache], {"axis": 0, "begin": "p", "shape": (1, 4)})
    out = bb.emit("add", [cache, row])
    mod = tc.IRModule({"main": bb.finish(out, "main", {"num_input": 1})})
    wv = np.arange(64, dtype="float32").reshape(16, 4)
    exe = tc.compile(mod, params={"w": wv})  # w is a constant; the slice is not folded
    for p in (3, 7):
        c = np.ones((p, 4), "float32")
        np.testing.assert_array_equal(exe(c), c + wv[p])

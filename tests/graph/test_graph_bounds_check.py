"""Bounds-checked builds of graph modules: every kernel call is checked, the process survives."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.runtime import BoundsCheckError

# A transpose whose column index comes from the data (weights scaled by 1000): the verifier
# cannot prove such an access out of range, only a bounds-checked run can catch it.
BROKEN_TRANSPOSE = """
@T.prim_func
def transpose(fc_weight: T.Buffer((8, 16), "float32"), T_transpose: T.Buffer((16, 8), "float32")):
    for i0, i1 in T.grid(16, 8):
        with T.block("T_transpose"):
            vi0 = T.axis.spatial(16, i0)
            vi1 = T.axis.spatial(8, i1)
            T.reads(fc_weight[vi1, 0:16])
            T.writes(T_transpose[vi0, vi1])
            T_transpose[vi0, vi1] = fc_weight[
                vi1, T.Cast("int32", fc_weight[vi1, vi0] * T.float32(1000.0))
            ]
"""


class _Linear(nn.Module):
    def __init__(self) -> None:
        self.fc = nn.Linear(16, 8)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc(x)


def _module() -> tuple[tc.IRModule, dict[str, np.ndarray]]:
    mod, params = _Linear().export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    with tc.Target("cpu"):
        mod = tc.graph.get_pipeline("zero")(mod)
    assert "transpose" in mod
    return mod, params


def test_checked_graph_build_matches_the_unchecked_one() -> None:
    mod, params = _module()
    x = np.random.default_rng(0).standard_normal((2, 16)).astype("float32")
    plain = tc.build(mod, "cpu")["forward"](x, *params.values())
    checked_exe = tc.build(mod, "cpu", bounds_check=True)
    assert checked_exe.lib.bounds_checked
    np.testing.assert_array_equal(checked_exe["forward"](x, *params.values()), plain)


def test_checked_graph_build_reports_the_kernel_that_reads_out_of_range() -> None:
    mod, params = _module()
    mod = mod.with_function("transpose", tc.script.parse(BROKEN_TRANSPOSE))
    exe = tc.build(mod, "cpu", bounds_check=True)
    x = np.ones((2, 16), "float32")
    assert np.abs(params["fc.weight"] * 1000).max() >= 16  # some column index is out of range
    with pytest.raises(BoundsCheckError, match=r"transpose.*fc_weight"):
        exe["forward"](x, *params.values())
    # the library stays usable: the same call fails the same way, cleanly, again
    with pytest.raises(BoundsCheckError):
        exe["forward"](x, *params.values())


def test_every_library_kind_has_a_time_evaluator() -> None:
    """tc.build of a graph module times graph functions and kernels like a kernel library."""
    mod, params = _module()
    exe = tc.build(mod, "cpu")
    x = np.ones((2, 16), "float32")
    forward = exe.time_evaluator("forward", number=2, repeat=3)(x, *params.values())
    assert len(forward.results) == 3
    assert all(t > 0 for t in forward.results)
    out = np.empty((16, 8), "float32")
    kernel = exe.time_evaluator("transpose", number=1, repeat=2)(params["fc.weight"], out)
    assert kernel.median > 0
    np.testing.assert_array_equal(out, params["fc.weight"].T)
    with pytest.raises(tc.graph.GraphError, match="no function 'nope'"):
        exe.time_evaluator("nope")

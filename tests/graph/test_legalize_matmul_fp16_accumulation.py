"""A float16 matmul legalizes to an einsum accumulated in float32 and rounded once (the form
tensor cores compute, and what every other float16 reduction does): a 4096-long dot product
keeps its small addends."""

from __future__ import annotations

import numpy as np

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.graph import get_pipeline
from tilecraft.schedule.analysis import classify_einsum, normalize_prim_func


class _Proj(nn.Module):
    def __init__(self) -> None:
        self.fc = nn.Linear(4096, 8, bias=False, dtype="float16")

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc(x)


def test_fp16_matmul_accumulates_in_fp32() -> None:
    model = _Proj()
    w = np.full((8, 4096), 1.0, np.float16)
    model.load_state_dict({"fc.weight": w})
    mod, _ = model.export({"forward": {"x": nn.spec.Tensor((1, 4096), "float16")}})
    with tc.Target("cpu"):
        lowered = get_pipeline("zero")(mod)
    einsums = []
    for _, func in lowered.prim_funcs():
        for info in normalize_prim_func(tc.Schedule(func)) or []:
            e = classify_einsum(info) if info.is_reduction() else None
            if e is not None:
                einsums.append(e)
    assert len(einsums) == 1
    assert str(einsums[0].output.buffer.dtype) == "float32"
    assert str(einsums[0].lhs.buffer.dtype) == "float16"
    # the result is the float32 sum rounded once to float16 (spacing 2 at 2048)
    x = np.full((1, 4096), 2.0**-11, np.float16)
    x[0, 0] = 2048.0
    exe = tc.compile(mod, "cpu")
    got = np.asarray(exe["forward"](x, w), dtype=np.float64)
    np.testing.assert_array_equal(got, np.float16(2048.0 + 4095 * 2.0**-11))

"""Quick start: compile the reference tutorial's model on the CPU and check it against numpy.

Linear 768->768, ReLU, LayerNorm 768, Linear 768->256 on a (1, 768) input: export the model,
run the "zero" pipeline (legalize every operator to a PrimFunc, fuse), build, run, and compare
with a numpy implementation. Prints the kernels, the max abs error and per-kernel times.

    python examples/quickstart_model.py
"""

from __future__ import annotations

import numpy as np

import tilecraft as tc
from tilecraft.frontend import nn


class DemoModel(nn.Module):
    """The model of the reference tutorial."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(768, 768)
        self.relu = nn.ReLU()
        self.norm = nn.LayerNorm(768)
        self.fc2 = nn.Linear(768, 256)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """fc2(norm(relu(fc1(x))))."""
        return self.fc2(self.norm(self.relu(self.fc1(x))))


def reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """The same model in numpy (float64)."""
    h = np.maximum(x @ p["fc1.weight"].T.astype(np.float64) + p["fc1.bias"], 0)
    mu = h.mean(-1, keepdims=True)
    var = ((h - mu) ** 2).mean(-1, keepdims=True)
    h = (h - mu) / np.sqrt(var + 1e-5) * p["norm.weight"] + p["norm.bias"]
    return h @ p["fc2.weight"].T + p["fc2.bias"]


def main() -> None:
    """Export, compile, run, compare and profile."""
    mod, params = DemoModel().export({"forward": {"x": nn.spec.Tensor((1, 768), "float32")}})
    with tc.Target("cpu"):
        mod = tc.graph.get_pipeline("zero")(mod)
    print("PrimFuncs after the 'zero' pipeline:")
    for name, _ in sorted(mod.prim_funcs()):
        print(f"  {name}")
    print("\nforward:")
    print(mod["forward"].script())

    exe = tc.build(mod, target="cpu")
    x = np.random.default_rng(0).standard_normal((1, 768)).astype("float32")
    out = exe["forward"](x, *params.values())
    err = float(np.abs(out - reference(x, params)).max())
    print(f"\noutput {out.shape} {out.dtype}; max abs error vs numpy: {err:.3e}")

    exe["forward"](x, *params.values())  # warm up
    print("\nper-kernel time (one run):")
    for kernel, seconds in exe.profile("forward", x, *params.values()):
        print(f"  {kernel:<24} {seconds * 1e6:10.1f} us")


if __name__ == "__main__":
    main()

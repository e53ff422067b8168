"""Quick start: compile the reference tutorial's model on the CPU and check it against numpy.

Linear 768->768, ReLU, LayerNorm 768, Linear 768->256 on a (1, 768) input: export the model,
run the "zero" pipeline (legalize every operator to a PrimFunc, fuse), build with
``tc.build``, run, and compare with a numpy implementation. Prints the kernels, the graph
function ``forward``, the max abs error and a per-kernel time table.

    python examples/quickstart_model.py
"""

from __future__ import annotations

import statistics

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
    h = np.maximum(x.astype(np.float64) @ p["fc1.weight"].T + p["fc1.bias"], 0)
    mu = h.mean(-1, keepdims=True)
    var = ((h - mu) ** 2).mean(-1, keepdims=True)
    h = (h - mu) / np.sqrt(var + 1e-5) * p["norm.weight"] + p["norm.bias"]
    return h @ p["fc2.weight"].T + p["fc2.bias"]


def kernel_times(
    exe: tc.graph.Executable, args: list[np.ndarray], runs: int = 5
) -> list[tuple[str, float]]:
    """Median seconds of each kernel call of ``forward`` over ``runs`` runs (after a warm-up)."""
    exe["forward"](*args)
    samples = [exe.profile("forward", *args) for _ in range(runs)]
    return [
        (name, statistics.median(run[i][1] for run in samples))
        for i, (name, _) in enumerate(samples[0])
    ]


def main() -> float:
    """Export, compile, run, compare and profile; returns the max abs error."""
    mod, params = DemoModel().export({"forward": {"x": nn.spec.Tensor((1, 768), "float32")}})
    with tc.Target("cpu"):
        mod = tc.graph.get_pipeline("zero")(mod)
    exe = tc.build(mod, target="cpu")

    calls = [b.value.func for b in mod["forward"].bindings]
    print(f"PrimFuncs after the 'zero' pipeline ({len(calls)} calls):")
    for name in dict.fromkeys(calls):
        print(f"  {name}")
    print(f"\n{mod['forward'].script()}\n")

    x = np.random.default_rng(0).standard_normal((1, 768)).astype("float32")
    args = [x, *params.values()]
    out = exe["forward"](*args)
    err = float(np.abs(out - reference(x, params)).max())
    print(f"output {out.shape} {out.dtype}; max abs error vs numpy: {err:.2e}\n")

    times = kernel_times(exe, args)
    total = sum(t for _, t in times)
    print(f"{'kernel':<24}{'time (us)':>12}{'share':>8}")
    for name, t in times:
        print(f"{name:<24}{t * 1e6:>12.1f}{t / total:>8.0%}")
    print(f"{'total':<24}{total * 1e6:>12.1f}")
    return err


if __name__ == "__main__":
    main()

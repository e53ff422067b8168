"""Quick start: compile the reference tutorial's model with ``tc.compile`` and race numpy.

Linear 768->768, ReLU, LayerNorm 768, Linear 768->256 on a (1, 768) input: export the model,
compile it the default way (``tc.compile``: the "default" graph pipeline with the weights
bound, so parameter-only work such as weight transposes is done once at compile time; the CPU
schedule rules; build), run it and compare with numpy. Prints the ``explain`` table (which rule
scheduled each kernel, its time and share of the model's time) and the model's time against
numpy's, measured in the same run.

    python examples/quickstart_model.py [--batch N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import tilecraft as tc
from tilecraft import rules as dl
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


def numpy_forward(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """The model in numpy float32, as a numpy user writes it: the baseline to beat."""
    h = np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0)
    mu = h.mean(-1, keepdims=True)
    var = ((h - mu) ** 2).mean(-1, keepdims=True)
    h = (h - mu) / np.sqrt(var + np.float32(1e-5)) * p["norm.weight"] + p["norm.bias"]
    return h @ p["fc2.weight"].T + p["fc2.bias"]


def median_seconds(fn: Callable[[], object], budget_s: float = 0.3, rounds: int = 5) -> float:
    """Median time of one call of ``fn``: ``rounds`` rounds of calls for ``budget_s`` each."""
    fn()
    samples = []
    for _ in range(rounds):
        end = time.perf_counter() + budget_s
        while time.perf_counter() < end:
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(batch: int = 1, timing_s: float = 1.5) -> float:
    """Export, compile, check, explain and time (``timing_s`` seconds for each of the two
    forwards); returns the max abs error against numpy."""
    spec = {"forward": {"x": nn.spec.Tensor((batch, 768), "float32")}}
    mod, params = DemoModel().export(spec)
    exe = tc.compile(mod, target="cpu", params=params)  # the weights are bound: exe["forward"](x)

    x = np.random.default_rng(0).standard_normal((batch, 768)).astype("float32")
    out = exe["forward"](x)
    err = float(np.abs(out - reference(x, params)).max())
    print(f"output {out.shape} {out.dtype}; max abs error vs numpy: {err:.2e}\n")

    # which rule scheduled each kernel, and where the time goes: the same graph pipeline as
    # tc.compile, then the rules explained and each scheduled kernel timed inside forwards
    with tc.Target("cpu"):
        graph_mod = tc.graph.get_pipeline("default", params=params)(mod)
    print(dl.explain(graph_mod, dl.cpu.default_rules(), target="cpu", profile=True))

    ours = median_seconds(lambda: exe["forward"](x), timing_s / 5)
    theirs = median_seconds(lambda: numpy_forward(x, params), timing_s / 5)
    print(f"\nforward, batch {batch}: tilecraft {ours * 1e6:.1f} us, numpy {theirs * 1e6:.1f} us; "
          f"tilecraft / numpy = {ours / theirs:.2f} (<= 1: at most numpy's time)")  # fmt: skip
    return err


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1, help="rows of the input (default 1)")
    main(parser.parse_args().batch)

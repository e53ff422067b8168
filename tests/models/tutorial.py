"""The two tutorial models.

* ``reference``: the reference tutorial's (and ``examples/quickstart_model.py``'s) model:
  Linear 768->768, ReLU, LayerNorm 768, Linear 768->256.
* ``metaschedule``: the MetaSchedule tutorial's model: Linear 784->256 with bias, ReLU,
  Linear 256->10 without bias.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tilecraft.frontend import nn

from .common import ModelCase, export_case, f64, np_layer_norm


class ReferenceModel(nn.Module):
    """fc2(norm(relu(fc1(x))))."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(768, 768)
        self.relu = nn.ReLU()
        self.norm = nn.LayerNorm(768)
        self.fc2 = nn.Linear(768, 256)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """The model."""
        return self.fc2(self.norm(self.relu(self.fc1(x))))


class MetaScheduleModel(nn.Module):
    """fc2(relu(fc1(x))), fc2 without bias."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(784, 256)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(256, 10, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """The model."""
        return self.fc2(self.relu(self.fc1(x)))


def np_reference(x: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """ReferenceModel in float64."""
    h = np.maximum(f64(x) @ f64(p["fc1.weight"]).T + f64(p["fc1.bias"]), 0)
    h = np_layer_norm(h, f64(p["norm.weight"]), f64(p["norm.bias"]), 1e-5)
    return h @ f64(p["fc2.weight"]).T + f64(p["fc2.bias"])


def np_metaschedule(x: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """MetaScheduleModel in float64."""
    h = np.maximum(f64(x) @ f64(p["fc1.weight"]).T + f64(p["fc1.bias"]), 0)
    return h @ f64(p["fc2.weight"]).T


MODELS = {
    "reference": (ReferenceModel, 768, np_reference),
    "metaschedule": (MetaScheduleModel, 784, np_metaschedule),
}


def case(name: str = "reference", batch: int = 1, seed: int = 0) -> ModelCase:
    """``forward`` of tutorial model ``name`` on a static ``(batch, width)`` input."""
    cls, width, ref = MODELS[name]
    x = np.random.default_rng(seed + batch).standard_normal((batch, width)).astype(np.float32)
    return export_case(
        f"tutorial_{name}_b{batch}",
        cls(),
        "forward",
        {"x": nn.spec.Tensor((batch, width))},
        (x,),
        lambda inputs, p: ref(inputs[0], p),
        seed,
        rtol=1e-4,
        atol=1e-4,
    )

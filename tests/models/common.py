"""What every model fixture provides: a :class:`ModelCase` and the shared numpy helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from tilecraft.frontend import nn
from tilecraft.ir import IRModule

Params = dict[str, np.ndarray]
Reference = Callable[[tuple[np.ndarray, ...], Mapping[str, np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class ModelCase:
    """One exported entry point of a model, ready for a pipeline, with inputs and a reference.

    ``mod`` holds one graph function, ``entry``; ``exe[entry](*inputs, *params.values())``
    (unbound) or ``exe[entry](*inputs)`` (``params`` bound) returns what
    ``reference(inputs, params)`` computes in float64, within ``rtol``/``atol``.
    Unpacks as ``mod, params, inputs = case``.
    """

    name: str
    entry: str
    model: nn.Module
    mod: IRModule
    params: Params
    inputs: tuple[np.ndarray, ...]
    reference: Reference
    rtol: float = 1e-4
    atol: float = 1e-4

    def __iter__(self) -> Iterator[object]:
        """Tuple-style unpacking: ``mod, params, inputs = case``."""
        return iter((self.mod, self.params, self.inputs))

    def expected(self) -> np.ndarray:
        """The float64 reference output for :attr:`inputs`."""
        return self.reference(self.inputs, self.params)


def random_params(model: nn.Module, seed: int) -> Params:
    """Random weights loaded into ``model`` (and returned), scaled like a trained network's.

    Weights drawn uniformly at init get a Gaussian of the same scale (``1/sqrt(fan_in)``),
    so activations keep unit size; ones-initialised weights (norm scales) get ``1 + N(0, 0.1)``,
    zero-initialised ones (biases, means) ``N(0, 0.1)``, running variances ``U(0.5, 1.5)``.
    """
    rng = np.random.default_rng(seed)
    out: Params = {}
    for name, p in model.named_parameters():
        shape = p.param_shape
        if name.endswith("running_var"):
            value = rng.uniform(0.5, 1.5, shape)
        elif p.init == "ones":
            value = 1.0 + rng.standard_normal(shape) * 0.1
        elif p.init == "zeros":
            value = rng.standard_normal(shape) * 0.1
        else:
            value = rng.standard_normal(shape) * p.scale
        out[name] = value.astype(p.param_dtype)
    model.load_state_dict(out)
    return out


def export_case(
    name: str,
    model: nn.Module,
    entry: str,
    spec: Mapping[str, nn.spec.Tensor],
    inputs: tuple[np.ndarray, ...],
    reference: Reference,
    seed: int,
    **kw: object,
) -> ModelCase:
    """Load random weights into ``model``, export ``entry`` and bundle the case."""
    params = random_params(model, seed)
    mod, exported = model.export({entry: spec})
    assert list(exported) == list(params)
    return ModelCase(name, entry, model, mod, params, inputs, reference, **kw)  # type: ignore[arg-type]


def np_layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis (biased variance)."""
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis."""
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def f64(a: np.ndarray) -> np.ndarray:
    """``a`` as float64."""
    return np.asarray(a, dtype=np.float64)

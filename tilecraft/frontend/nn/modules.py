"""Layers: Linear, activations, norms, BatchNorm2d, Embedding, Conv2d, Sequential, ModuleList."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from ._composite import batch_norm
from .core import Module, Parameter, Tensor, emit


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features)."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, dtype: str = "float32"
    ) -> None:
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter((out_features, in_features), dtype, "uniform", bound)
        self.bias = Parameter((out_features,), dtype, "uniform", bound) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        """Trace permute_dims(weight), matmul and (with bias) add."""
        y = emit("matmul", [x, emit("permute_dims", [self.weight])])
        return emit("add", [y, self.bias]) if self.bias is not None else y


class _Activation(Module):
    op = ""

    def forward(self, x: Tensor) -> Tensor:
        """Apply the activation elementwise."""
        return emit(self.op, [x])


class ReLU(_Activation):
    """``max(x, 0)``."""

    op = "relu"


class GELU(_Activation):
    """GELU (erf form)."""

    op = "gelu"


class SiLU(_Activation):
    """``x * sigmoid(x)``."""

    op = "silu"


class Sigmoid(_Activation):
    """Logistic function."""

    op = "sigmoid"


class Tanh(_Activation):
    """Hyperbolic tangent."""

    op = "tanh"


class Softmax(Module):
    """Softmax along ``axis``."""

    def __init__(self, axis: int = -1) -> None:
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        """Trace softmax."""
        return emit("softmax", [x], {"axis": self.axis})


class LayerNorm(Module):
    """Normalise the last axis to zero mean and unit variance, then scale and shift."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5, dtype: str = "float32") -> None:
        self.weight = Parameter((normalized_shape,), dtype, "ones")
        self.bias = Parameter((normalized_shape,), dtype, "zeros")
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """Trace layer_norm."""
        return emit("layer_norm", [x, self.weight, self.bias], {"eps": self.eps})


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis."""

    def __init__(self, hidden_size: int, eps: float = 1e-6, dtype: str = "float32") -> None:
        self.weight = Parameter((hidden_size,), dtype, "ones")
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """Trace rms_norm."""
        return emit("rms_norm", [x, self.weight], {"eps": self.eps})


class BatchNorm2d(Module):
    """Inference-mode batch normalization of NCHW data with running statistics.

    Parameters are named as PyTorch's (``weight``, ``bias``, ``running_mean``,
    ``running_var``), so a state dict loads as is (without ``num_batches_tracked``).
    """

    def __init__(self, num_features: int, eps: float = 1e-5, dtype: str = "float32") -> None:
        self.weight = Parameter((num_features,), dtype, "ones")
        self.bias = Parameter((num_features,), dtype, "zeros")
        self.running_mean = Parameter((num_features,), dtype, "zeros")
        self.running_var = Parameter((num_features,), dtype, "ones")
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """Trace the per-channel scale and shift (see ``functional.batch_norm``)."""
        return batch_norm(
            x, self.weight, self.bias, self.running_mean, self.running_var, self.eps, axis=1
        )


class Embedding(Module):
    """Rows of ``weight`` (num, dim) selected by integer ids."""

    def __init__(self, num: int, dim: int, dtype: str = "float32") -> None:
        self.weight = Parameter((num, dim), dtype, "normal", 0.02)

    def forward(self, ids: Tensor) -> Tensor:
        """Trace take(weight, ids, axis=0)."""
        return emit("take", [self.weight, ids], {"axis": 0})


class Conv2d(Module):
    """2-D convolution of NCHW data with an OIHW weight (groups=1)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        bias: bool = True,
        dtype: str = "float32",
    ) -> None:
        bound = 1.0 / math.sqrt(in_channels * kernel_size * kernel_size)
        self.weight = Parameter(
            (out_channels, in_channels, kernel_size, kernel_size), dtype, "uniform", bound
        )
        self.bias = Parameter((out_channels,), dtype, "uniform", bound) if bias else None
        self.out_channels = out_channels
        self.attrs = {"strides": stride, "padding": padding, "dilation": dilation}

    def forward(self, x: Tensor) -> Tensor:
        """Trace conv2d and a broadcast bias add."""
        y = emit("conv2d", [x, self.weight], self.attrs)
        if self.bias is None:
            return y
        b = emit("reshape", [self.bias], {"shape": (1, self.out_channels, 1, 1)})
        return emit("add", [y, b])


class Sequential(Module):
    """Apply modules in order."""

    def __init__(self, *modules: Module) -> None:
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def forward(self, x: Any) -> Any:
        """Chain the modules."""
        for m in vars(self).values():
            if isinstance(m, Module):
                x = m(x)
        return x


class ModuleList(Module):
    """A list of modules registered as ``0``, ``1``, ... (for parameter names)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> None:
        """Register ``module`` under the next index."""
        setattr(self, str(len(self)), module)

    def __len__(self) -> int:
        return sum(1 for v in vars(self).values() if isinstance(v, Module))

    def __iter__(self) -> Iterator[Module]:
        return (v for v in vars(self).values() if isinstance(v, Module))

    def __getitem__(self, i: int) -> Module:
        module = getattr(self, str(i % len(self)))
        assert isinstance(module, Module)
        return module

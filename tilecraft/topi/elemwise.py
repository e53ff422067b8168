"""Elementwise unary operators and activations.

Every operator returns one stage named ``T_<op>`` computed in the input's dtype (16-bit float
types are upcast by the code generator, not here).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..errors import TilecraftError
from ..ir import Expr, as_expr
from ..ir import dtype as to_dtype
from ..ir import op as irop
from ..ir.dtype import DTypeLike
from ..te import Tensor, compute


def unary(x: Tensor, f: Callable[[Expr], Expr], name: str) -> Tensor:
    """The stage ``out[idx] = f(x[idx])``."""
    return compute(x.shape, lambda *idx: f(x[idx]), name=name)  # type: ignore[no-any-return]


def _float_only(x: Tensor, what: str) -> None:
    if not x.dtype.is_float:
        raise TilecraftError(f"{what}: needs a floating-point tensor, got {x.dtype}")


def _math(fn: Callable[[Expr], Expr], tag: str) -> Callable[..., Tensor]:
    def op(x: Tensor, name: str = f"T_{tag}") -> Tensor:
        _float_only(x, tag)
        return unary(x, fn, name)

    op.__name__ = tag
    op.__doc__ = f"""Elementwise ``{tag}(x)`` of a floating-point tensor.

    Parameters
    ----------
    x
        Input tensor.
    name
        Stage name.

    Returns
    -------
    Tensor
        Same shape and dtype as ``x``.
    """
    return op


exp = _math(irop.exp, "exp")
log = _math(irop.log, "log")
sqrt = _math(irop.sqrt, "sqrt")
rsqrt = _math(irop.rsqrt, "rsqrt")
tanh = _math(irop.tanh, "tanh")
sigmoid = _math(irop.sigmoid, "sigmoid")
erf = _math(irop.erf, "erf")
sin = _math(irop.sin, "sin")
cos = _math(irop.cos, "cos")
floor = _math(irop.floor, "floor")
ceil = _math(irop.ceil, "ceil")


def negative(x: Tensor, name: str = "T_negative") -> Tensor:
    """Elementwise ``-x``."""
    return unary(x, lambda v: -v, name)


def abs(x: Tensor, name: str = "T_abs") -> Tensor:
    """Elementwise ``|x|`` (integers too)."""
    if x.dtype.is_float:
        return unary(x, irop.fabs, name)
    return unary(x, lambda v: irop.select(v < 0, -v, v), name)


def relu(x: Tensor, name: str = "T_relu") -> Tensor:
    """Elementwise ``max(x, 0)``; NaN stays NaN (numpy's ``maximum(x, 0)``)."""
    return unary(x, lambda v: irop.max(v, as_expr(0, v.dtype)), name)


def gelu(x: Tensor, approximate: str = "none", name: str = "T_gelu") -> Tensor:
    """Gaussian error linear unit.

    Parameters
    ----------
    x
        Floating-point input.
    approximate
        ``"none"``: ``0.5 x (1 + erf(x / sqrt(2)))``; ``"tanh"``: ``0.5 x (1 + tanh(sqrt(2/pi)
        (x + 0.044715 x^3)))`` (as in PyTorch).
    name
        Stage name.

    Returns
    -------
    Tensor
        Same shape and dtype as ``x``.
    """
    _float_only(x, "gelu")
    if approximate == "none":
        return unary(x, lambda v: v * 0.5 * (irop.erf(v * (1.0 / math.sqrt(2.0))) + 1.0), name)
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return unary(x, lambda v: v * 0.5 * (irop.tanh((v + v * v * v * 0.044715) * c) + 1.0), name)
    raise TilecraftError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x: Tensor, name: str = "T_silu") -> Tensor:
    """Elementwise ``x * sigmoid(x)``."""
    _float_only(x, "silu")
    return unary(x, lambda v: v * irop.sigmoid(v), name)


def clip(x: Tensor, lo: float, hi: float, name: str = "T_clip") -> Tensor:
    """Elementwise ``min(max(x, lo), hi)``; NaN stays NaN (numpy's ``clip``)."""
    return unary(
        x, lambda v: irop.min(irop.max(v, as_expr(lo, v.dtype)), as_expr(hi, v.dtype)), name
    )


def cast(x: Tensor, dtype: DTypeLike, name: str = "T_cast") -> Tensor:
    """Elementwise conversion to ``dtype`` (C conversion rules: float to int truncates)."""
    d = to_dtype(dtype)
    return unary(x, lambda v: irop.cast(v, d), name)


def identity(x: Tensor, name: str = "T_copy") -> Tensor:
    """A copy of ``x``."""
    return unary(x, lambda v: v, name)

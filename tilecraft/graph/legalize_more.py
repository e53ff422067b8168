"""Legalization of the operators of :mod:`tilecraft.graph.op_types_more` to topi."""

from __future__ import annotations

from collections.abc import Sequence

from .. import te, topi
from ..ir import Attrs
from ..topi.slicing import broadcast_to, strided_slice
from .ir import TensorType
from .op import OPS, LegalizeFn, attr_int, int_tuple
from .op_types_more import slice_plan

Tensor = te.Tensor
Args = Sequence[Tensor]


def _erf(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.erf(args[0])


def _power(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.power(args[0], args[1])


def _strided_slice(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    types = [TensorType(a.shape, a.dtype) for a in args]
    plan = slice_plan("strided_slice", types, attrs)
    return strided_slice(args[0], plan.axes, plan.begin, plan.extent, plan.strides)


def _broadcast_to(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return broadcast_to(args[0], out.shape)


def _grouped_conv2d(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    op = "grouped_conv2d"
    return topi.conv2d(
        args[0],
        args[1],
        stride=int_tuple(op, attrs, "strides", 2, 1),
        padding=int_tuple(op, attrs, "padding", 4, 0),
        dilation=int_tuple(op, attrs, "dilation", 2, 1),
        groups=attr_int(op, attrs, "groups", 1),
    )


_TABLE: dict[str, LegalizeFn] = {
    "erf": _erf,
    "power": _power,
    "strided_slice": _strided_slice,
    "broadcast_to": _broadcast_to,
    "grouped_conv2d": _grouped_conv2d,
}

for _name, _fn in _TABLE.items():
    OPS[_name].legalize = _fn

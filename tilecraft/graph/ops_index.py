"""``index_put``: ``values`` put (or added) into ``x`` at positions given per axis.

Arguments ``(x, values, index_0, ..., index_k-1)``; attributes ``axes`` (the axis of ``x``
each index tensor addresses) and ``accumulate``. The index tensors share one shape ``I``
and ``values`` has shape ``I + rest`` (``rest``: the other axes of ``x``, in order); the
importers broadcast and arrange them so. Computation: :func:`tilecraft.topi.index_put`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import te
from ..ir import Attrs
from ..topi.index_put import index_put
from .ir import TensorType
from .op import OPS, GraphError, attr_axes, dims_equal, register_op

Types = Sequence[TensorType]


def _axes(op: str, attrs: Attrs, ndim: int, count: int) -> tuple[int, ...]:
    axes = attr_axes(op, attrs, "axes") or ()
    if len(axes) != count or len(set(axes)) != count or not all(0 <= a < ndim for a in axes):
        raise GraphError(f"{op}: 'axes' must name {count} distinct axes of a rank-{ndim} tensor")
    return axes


def _index_put(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x, values, *indices = ts
    axes = _axes(op, attrs, x.ndim, len(indices))
    ishape = indices[0].shape
    for t in indices:
        if not t.dtype.is_integer or len(t.shape) != len(ishape):
            raise GraphError(f"{op}: index tensors must be integer, of one shape")
        if not all(dims_equal(a, b) for a, b in zip(t.shape, ishape, strict=True)):
            raise GraphError(f"{op}: index tensors must be integer, of one shape")
    rest = [x.shape[d] for d in range(x.ndim) if d not in axes]
    want = (*ishape, *rest)
    if values.ndim != len(want) or not all(
        dims_equal(a, b) for a, b in zip(values.shape, want, strict=True)
    ):
        raise GraphError(f"{op}: values {values.describe()} must have the index shape + the rest")
    if values.dtype != x.dtype:
        raise GraphError(f"{op}: values {values.describe()} differ in dtype from {x.describe()}")
    return x


def _lower(args: Sequence[te.Tensor], attrs: Attrs, out: TensorType) -> te.Tensor:
    x, values, *indices = args
    axes = attr_axes("index_put", attrs, "axes") or ()
    return index_put(x, values, indices, axes, bool(attrs.get("accumulate", False)))


register_op("index_put", (3, None), _index_put)
OPS["index_put"].legalize = _lower

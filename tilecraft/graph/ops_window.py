"""Windowed and sampled operators of imported models: N-d pooling, col2im, grid sampling.

Type inference and legalization of:

- ``max_pool``, ``max_pool_index`` (int64 flat positions of the maxima) and ``avg_pool`` over
  the last ``len(pool_size)`` axes, with ``strides``, ``padding``, ``dilation``, ``ceil_mode``
  and, for ``avg_pool``, ``count_include_pad`` and ``divisor_override`` (PyTorch's options);
- ``adaptive_avg_pool`` of the last ``len(output_size)`` axes;
- ``col2im``: ``(N, C * kh * kw, L)`` column blocks summed back into ``(N, C, H, W)``;
- ``grid_sample``: ``(N, C, H, W)`` sampled at ``(N, Ho, Wo, 2)`` normalized positions.

The computations are in :mod:`tilecraft.topi.pool` and :mod:`tilecraft.topi.sample`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import te
from ..errors import TilecraftError
from ..ir import Attrs, as_expr
from ..ir import dtype as to_dtype
from ..topi import pool, sample
from .ir import TensorType
from .op import OPS, GraphError, attr_axes, register_op

Types = Sequence[TensorType]
Args = Sequence[te.Tensor]


def window(op: str, attrs: Attrs) -> pool.Window:
    """The pooling window of ``attrs`` (``pool_size``; the rest default per axis)."""
    k = attr_axes(op, attrs, "pool_size")
    if not k:
        raise GraphError(f"{op}: attribute 'pool_size' is required")
    r = len(k)

    def per_axis(key: str, default: int) -> tuple[int, ...]:
        v = attr_axes(op, attrs, key)
        if v is None:
            return k if key == "strides" else (default,) * r
        return v * r if len(v) == 1 else v

    try:
        ceil = bool(attrs.get("ceil_mode", False))
        return pool.Window(k, per_axis("strides", 1), per_axis("padding", 0),
                           per_axis("dilation", 1), ceil)  # fmt: skip
    except TilecraftError as e:
        raise GraphError(f"{op}: {e}") from e


def _pool(op: str, ts: Types, attrs: Attrs) -> TensorType:
    win = window(op, attrs)
    try:
        shape = pool.pool_shape(ts[0].shape, win, op)
    except TilecraftError as e:
        raise GraphError(str(e)) from e
    if op == "avg_pool" and not ts[0].dtype.is_float:
        raise GraphError(f"{op}: needs a floating-point tensor, got {ts[0].describe()}")
    return TensorType(shape, to_dtype("int64") if op == "max_pool_index" else ts[0].dtype)


def _adaptive(op: str, ts: Types, attrs: Attrs) -> TensorType:
    out = attr_axes(op, attrs, "output_size")
    x = ts[0]
    if not out or min(out) < 1 or not x.dtype.is_float:
        raise GraphError(f"{op}: needs output_size of positive ints and a float tensor")
    try:
        pool.spatial_extents(x.shape, len(out), op)
    except TilecraftError as e:
        raise GraphError(str(e)) from e
    return TensorType((*x.shape[: x.ndim - len(out)], *(as_expr(o) for o in out)), x.dtype)


def _col2im(op: str, ts: Types, attrs: Attrs) -> TensorType:
    cols = ts[0]
    try:
        spec = sample.col2im_spec(attrs)
        c = sample.col2im_channels(cols.shape, spec)
    except TilecraftError as e:
        raise GraphError(f"{op}: {e}") from e
    size = (as_expr(spec.output_size[0]), as_expr(spec.output_size[1]))
    return TensorType((cols.shape[0], c, *size), cols.dtype)


def _grid_sample(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x, grid = ts
    try:
        sample.grid_spec(attrs)
    except TilecraftError as e:
        raise GraphError(f"{op}: {e}") from e
    if x.ndim != 4 or grid.ndim != 4 or not x.dtype.is_float or grid.dtype != x.dtype:
        raise GraphError(f"{op}: needs float NCHW data and an (N, Ho, Wo, 2) grid of its dtype")
    return TensorType((x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]), x.dtype)


def _lower_pool(op: str):  # type: ignore[no-untyped-def]
    def lower(args: Args, attrs: Attrs, out: TensorType) -> te.Tensor:
        win = window(op, attrs)
        if op == "max_pool":
            return pool.max_pool(args[0], win)
        if op == "max_pool_index":
            return pool.max_pool_index(args[0], win)
        override = attrs.get("divisor_override")
        include = bool(attrs.get("count_include_pad", True))
        if override is not None and not isinstance(override, int):
            raise GraphError(f"{op}: divisor_override must be an int, got {override!r}")
        return pool.avg_pool(args[0], win, include, override)

    return lower


def _register() -> None:
    table = {
        "max_pool": ((1, 1), _pool, _lower_pool("max_pool")),
        "max_pool_index": ((1, 1), _pool, _lower_pool("max_pool_index")),
        "avg_pool": ((1, 1), _pool, _lower_pool("avg_pool")),
        "adaptive_avg_pool": (
            (1, 1),
            _adaptive,
            lambda a, at, o: pool.adaptive_avg_pool(
                a[0], attr_axes("adaptive_avg_pool", at, "output_size") or ()
            ),
        ),
        "col2im": ((1, 1), _col2im, lambda a, at, o: sample.col2im(a[0], sample.col2im_spec(at))),
        "grid_sample": (
            (2, 2),
            _grid_sample,
            lambda a, at, o: sample.grid_sample(a[0], a[1], sample.grid_spec(at)),
        ),
    }
    for name, (arity, infer, lower) in table.items():
        register_op(name, arity, infer)
        OPS[name].legalize = lower


_register()

"""Tensors and the operations that produce them: placeholders and computes.

A :class:`Tensor` owns the :class:`~tilecraft.ir.Buffer` it will become in a PrimFunc, so
``A[i, j]`` is simply a :class:`~tilecraft.ir.BufferLoad` of that buffer. A compute stage
records which tensors its body indexed while ``fcompute`` ran; that is how
:func:`~tilecraft.te.create_prim_func` finds the dataflow graph without a global registry.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from ..errors import TilecraftError
from ..ir import Attrs, Buffer, BufferLoad, DataType, Expr, ExprLike, IntImm, Range, Var, as_expr
from ..ir import dtype as to_dtype
from ..ir.dtype import DTypeLike
from .reduce import Reduce, ReduceAxis

ShapeLike = Union[Sequence[Union[ExprLike, str]], ExprLike, str]  # noqa: UP007

_SHAPE_VARS: dict[tuple[str, DataType], Var] = {}
_RECORDING = threading.local()


def size_var(name: str, dt: DTypeLike = "int32") -> Var:
    """The symbolic extent named ``name``: the same name (and dtype) gives the same Var.

    ``placeholder(("n", 4))`` uses ``size_var("n")``, so two placeholders spelling the same
    name share the extent.
    """
    key = (name, to_dtype(dt))
    var = _SHAPE_VARS.get(key)
    if var is None:
        var = _SHAPE_VARS[key] = Var(name, key[1])
    return var


def as_shape(shape: ShapeLike) -> tuple[Expr, ...]:
    """Normalize a shape: ints become int32 constants, strings become :func:`size_var`."""
    items = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    out: list[Expr] = []
    for s in items:
        e = size_var(s) if isinstance(s, str) else as_expr(s)  # type: ignore[arg-type]
        if not e.dtype.is_integer:
            raise TilecraftError(f"shape entries must be integers, got {e!r} of dtype {e.dtype}")
        if isinstance(e, IntImm) and e.value < 0:
            raise TilecraftError(f"shape entries must be non-negative, got {e.value}")
        out.append(e)
    return tuple(out)


class Operation:
    """Base of the operations that produce tensors."""

    name: str

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        """Tensors this operation reads."""
        return ()


@dataclass(frozen=True, eq=False)
class PlaceholderOp(Operation):
    """An input: a tensor whose values come from the caller."""

    name: str
    buffer: Buffer


@dataclass(frozen=True, eq=False)
class ComputeOp(Operation):
    """A stage ``out[axes] = body`` (one value per output; a reduction when body is Reduce)."""

    name: str
    axes: tuple[Var, ...]
    body: tuple[Expr | Reduce, ...]
    buffers: tuple[Buffer, ...]
    inputs: tuple[Tensor, ...]
    attrs: Attrs = field(default_factory=Attrs)

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        """Tensors this stage reads, in order of first access."""
        return self.inputs

    @property
    def reduce_axes(self) -> tuple[ReduceAxis, ...]:
        """The reduction axes (empty for an elementwise stage)."""
        first = self.body[0]
        return first.axes if isinstance(first, Reduce) else ()

    @property
    def is_reduction(self) -> bool:
        """True when the stage reduces over some axes."""
        return isinstance(self.body[0], Reduce)


@dataclass(frozen=True, eq=False)
class Tensor:
    """The output ``value_index`` of ``op``; ``T[i, j]`` reads one element in a compute body."""

    op: PlaceholderOp | ComputeOp
    value_index: int
    buffer: Buffer

    @property
    def shape(self) -> tuple[Expr, ...]:
        """Extents, ints as IntImm, symbolic ones as expressions."""
        return self.buffer.shape

    @property
    def dtype(self) -> DataType:
        """Element type."""
        return self.buffer.dtype

    @property
    def name(self) -> str:
        """The buffer name (the stage name for single-output computes)."""
        return self.buffer.name

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.buffer.shape)

    def __getitem__(self, indices: ExprLike | Sequence[ExprLike]) -> BufferLoad:
        idx = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if len(idx) != self.ndim:
            raise TilecraftError(
                f"tensor {self.name!r} of rank {self.ndim} indexed with {len(idx)} indices"
            )
        stack = getattr(_RECORDING, "stack", None)
        if stack:
            seen = stack[-1]
            if all(t is not self for t in seen):
                seen.append(self)
        return BufferLoad(self.buffer, tuple(as_expr(i) for i in idx))

    def __repr__(self) -> str:
        dims = ", ".join(str(s.value) if isinstance(s, IntImm) else getattr(s, "name", "?")
                         for s in self.shape)  # fmt: skip
        return f"Tensor({self.name!r}, ({dims}), {self.dtype})"

    __hash__ = object.__hash__


def placeholder(shape: ShapeLike, dtype: DTypeLike = "float32", name: str = "A") -> Tensor:
    """An input tensor.

    Parameters
    ----------
    shape
        Extents: ints, :class:`~tilecraft.ir.Var` or other integer expressions, or strings
        naming a symbolic int32 extent (see :func:`size_var`).
    dtype
        Element type, e.g. ``"float32"``.
    name
        Buffer name in the generated PrimFunc.

    Returns
    -------
    Tensor
        The placeholder's single output.
    """
    buf = Buffer(name, as_shape(shape), to_dtype(dtype))
    return Tensor(PlaceholderOp(name, buf), 0, buf)


def _axis_names(fcompute: Callable[..., Any], ndim: int) -> list[str]:
    """Loop names from the lambda's parameter names, else ``i0, i1, ...``."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == ndim and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                   for p in params):  # fmt: skip
        return [p.name for p in params]
    return [f"i{d}" for d in range(ndim)]


def compute(
    shape: ShapeLike,
    fcompute: Callable[..., object],
    name: str = "compute",
    attrs: Mapping[str, Any] | None = None,
) -> Any:
    """A stage computing ``out[i, j, ...] = fcompute(i, j, ...)`` for every index.

    Parameters
    ----------
    shape
        Output extents (as for :func:`placeholder`).
    fcompute
        Called once with one int32 Var per output axis; returns an expression, a reduction
        (``te.sum(..., axis=k)``) or a tuple of reductions sharing one reducer (argmax).
    name
        Stage name: the block name, and the output buffer name (``name, name_v1, ...`` for a
        tuple-valued stage).
    attrs
        Annotations put on the stage's block.

    Returns
    -------
    Tensor or list of Tensor
        One tensor, or one per value when ``fcompute`` returns a tuple.
    """
    shp = as_shape(shape)
    axes = tuple(Var(n, s.dtype) for n, s in zip(_axis_names(fcompute, len(shp)), shp, strict=True))
    stack = getattr(_RECORDING, "stack", None)
    if stack is None:
        stack = _RECORDING.stack = []
    stack.append([])
    try:
        result = fcompute(*axes)
    finally:
        inputs = stack.pop()
    multi = isinstance(result, (tuple, list))
    values: list[Any] = list(result) if isinstance(result, (tuple, list)) else [result]
    body = _check_body(name, values)
    buffers = tuple(Buffer(f"{name}_v{n}" if n else name, shp, v.dtype) for n, v in enumerate(body))
    op = ComputeOp(name, axes, body, buffers, tuple(inputs), Attrs(attrs or {}))
    tensors = [Tensor(op, n, b) for n, b in enumerate(buffers)]
    return tensors if multi else tensors[0]


def _check_body(name: str, values: list[Any]) -> tuple[Expr | Reduce, ...]:
    if not values:
        raise TilecraftError(f"compute {name!r}: fcompute returned no value")
    body = [v if isinstance(v, Reduce) else as_expr(v) for v in values]
    reduces = [v for v in body if isinstance(v, Reduce)]
    if reduces and len(reduces) != len(body):
        raise TilecraftError(
            f"compute {name!r}: a reduction must be the whole body; write "
            "`te.sum(...)` as the lambda's result and post-process in a separate compute"
        )
    if len(body) > 1 and not reduces:
        raise TilecraftError(f"compute {name!r}: tuple results must come from one tuple reducer")
    if reduces:
        first = reduces[0]
        if any(r.combiner is not first.combiner or r.source is not first.source for r in reduces):
            raise TilecraftError(f"compute {name!r}: tuple results must come from one reducer call")
        if len(reduces) != len(first.source):
            raise TilecraftError(
                f"compute {name!r}: return all {len(first.source)} values of the tuple reducer"
            )
    return tuple(body)


def reduce_axis(dom: tuple[ExprLike, ExprLike] | ExprLike | Range, name: str = "k") -> ReduceAxis:
    """A reduction axis over ``[lo, hi)`` (a pair) or ``[0, extent)``.

    The result is an int32 variable usable in index expressions (``A[i, k]``) and as
    ``axis=`` of the reducers.
    """
    if isinstance(dom, Range):
        rng = dom
    elif isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise TilecraftError(f"reduce_axis {name!r}: expected (lo, hi), got {dom!r}")
        lo, hi = (size_var(d) if isinstance(d, str) else as_expr(d) for d in dom)
        if isinstance(lo, IntImm) and lo.value == 0:
            rng = Range(as_expr(0, hi.dtype), hi)
        elif isinstance(lo, IntImm) and isinstance(hi, IntImm):
            rng = Range(lo, as_expr(hi.value - lo.value, hi.dtype))
        else:
            rng = Range(lo, hi - lo)
    else:
        ext = size_var(dom) if isinstance(dom, str) else as_expr(dom)
        rng = Range(as_expr(0, ext.dtype), ext)
    return ReduceAxis(name, rng.extent.dtype, rng)

"""The state of one import: ONNX value names mapped to graph tensors or import-time values.

An ONNX value is either a graph tensor (:class:`~tilecraft.graph.TensorVar`, computed when
the model runs) or a value known at import, held as a numpy array. Known integer values may
hold symbolic extents (a ``Shape`` of a tensor with a ``dim_param`` dimension, and the
arithmetic on it): those arrays have dtype ``object`` and hold Python ints and
:class:`~tilecraft.ir.Expr` extents, so shape subgraphs fold at import even when some
dimensions are symbolic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import TilecraftError
from ...graph import Binding, Constant, GraphBuilder, GraphError, TensorType, TensorVar
from ...graph._shape_text import extent_text
from ...graph.ir import collect_vars_of_shape
from ...ir import Expr, IntImm, Var, as_expr
from ...ir import dtype as to_dtype

Value = TensorVar | np.ndarray
Dim = int | Expr


class ONNXImportError(TilecraftError):
    """A model :func:`~tilecraft.frontend.onnx.from_onnx` cannot import: malformed, or using
    something the importer does not support (named with the node it comes from)."""


@dataclass
class Node:
    """One ONNX node: op type, name, input and output value names ('' = absent), attributes."""

    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""

    def where(self) -> str:
        """``Slice node "x/Slice_3"`` for messages."""
        return f'{self.op} node "{self.name}"'

    def attr_int(self, key: str, default: int) -> int:
        """An integer attribute."""
        v = self.attrs.get(key, default)
        if not isinstance(v, int):
            raise ONNXImportError(f"{self.where()}: attribute {key!r} must be an int, got {v!r}")
        return v

    def attr_float(self, key: str, default: float) -> float:
        """A float attribute."""
        v = self.attrs.get(key, default)
        if not isinstance(v, (int, float)):
            raise ONNXImportError(f"{self.where()}: attribute {key!r} must be a float, got {v!r}")
        return float(v)

    def attr_ints(self, key: str) -> list[int] | None:
        """A list-of-ints attribute (None when absent)."""
        v = self.attrs.get(key)
        if v is None:
            return None
        if not isinstance(v, (list, tuple)) or not all(isinstance(i, int) for i in v):
            raise ONNXImportError(f"{self.where()}: attribute {key!r} must be ints, got {v!r}")
        return [int(i) for i in v]


def _is_symbolic(arr: np.ndarray) -> bool:
    return arr.dtype == object


def as_dim(v: object) -> Dim:
    """A Python int, or an extent expression (an IntImm becomes its int)."""
    if isinstance(v, IntImm):
        return v.value
    if isinstance(v, Expr):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    raise ONNXImportError(f"expected an integer or an extent, got {v!r}")


def dims_of(var: TensorVar) -> list[Dim]:
    """The extents of a graph tensor as ints and expressions."""
    return [as_dim(e) for e in var.type.shape]


class Context:
    """Value table and graph builder of one import."""

    def __init__(self, builder: GraphBuilder, initializers: Mapping[str, np.ndarray]) -> None:
        self.bb = builder
        self.values: dict[str, Value] = {}
        self.initializers = dict(initializers)
        self.weights: dict[str, TensorVar] = {}
        self.params: dict[str, np.ndarray] = {}
        self.node: Node | None = None

    # -- reading values -----------------------------------------------------------------
    def where(self) -> str:
        """The current node, for messages."""
        return self.node.where() if self.node is not None else "from_onnx"

    def error(self, msg: str) -> ONNXImportError:
        """An import error naming the current node."""
        return ONNXImportError(f"{self.where()}: {msg}")

    def value(self, name: str) -> Value:
        """The value of ``name`` (an initializer is a known array until used as a tensor)."""
        if name in self.values:
            return self.values[name]
        if name in self.initializers:
            return self.initializers[name]
        raise self.error(f"input {name!r} is not produced by any node, input or initializer")

    def is_static(self, name: str) -> bool:
        """Whether ``name`` is known at import."""
        return isinstance(self.value(name), np.ndarray)

    def static(self, name: str, what: str) -> np.ndarray:
        """The import-time value of ``name``; ONNXImportError when it is computed at run time."""
        v = self.value(name)
        if not isinstance(v, np.ndarray):
            raise self.error(
                f"{what} ({name!r}) must be known at import, but it is computed from the "
                "model's inputs"
            )
        return v

    def ints(self, name: str, what: str) -> list[int]:
        """A known integer vector (no symbolic entries)."""
        arr = self.static(name, what)
        out = [as_dim(v) for v in arr.reshape(-1).tolist()]
        if not all(isinstance(v, int) for v in out):
            raise self.error(f"{what} ({name!r}) depends on a symbolic dimension: {out}")
        return [v for v in out if isinstance(v, int)]

    def dims(self, name: str, what: str) -> list[Dim]:
        """A known integer vector whose entries may be symbolic extents."""
        return [as_dim(v) for v in self.static(name, what).reshape(-1).tolist()]

    def tensor(self, name: str) -> TensorVar:
        """``name`` as a graph tensor: initializers become parameters (or constants when
        they hold a single element), other known values become constants."""
        v = self.value(name)
        if isinstance(v, TensorVar):
            return v
        if name in self.initializers and name not in self.values and v.size > 1:
            var = self._weight(name, v)
        else:
            var = self.const(v, name)
        self.values[name] = var
        return var

    def _weight(self, name: str, arr: np.ndarray) -> TensorVar:
        var = self.bb.param(name, arr.shape, str(arr.dtype))
        key = name if name.replace(".", "_") == var.name else var.name
        self.weights[key] = var
        self.params[key] = arr
        return var

    # -- building -----------------------------------------------------------------------
    def const(self, value: np.ndarray | float | int, like: str | TensorVar = "const") -> TensorVar:
        """A constant binding of ``value`` (a scalar takes ``like``'s dtype when a tensor)."""
        if isinstance(like, TensorVar) and not isinstance(value, np.ndarray):
            arr = np.asarray(value, dtype=np.dtype(like.type.dtype.numpy_name()))
        else:
            arr = np.asarray(value)
        if _is_symbolic(arr):
            raise self.error(
                f"a value depending on symbolic dimensions ({arr.tolist()}) is used as a "
                "tensor; give static shapes with from_onnx(..., shapes=...)"
            )
        t = TensorType(arr.shape, to_dtype(str(arr.dtype)))
        var = TensorVar(self.bb.fresh(like if isinstance(like, str) else "const"), t)
        self.bb.bindings.append(Binding(var, Constant(t, np.array(arr, order="C"))))
        return var

    def emit(
        self, op: str, args: Sequence[TensorVar], attrs: Mapping[str, Any] | None = None
    ) -> TensorVar:
        """Bind ``op(args, attrs)``; a type error names the ONNX node."""
        base = self.node.outputs[0] if self.node is not None and self.node.outputs else op
        try:
            return self.bb.emit(op, args, attrs, name=base or op)
        except GraphError as e:
            raise self.error(str(e)) from e

    def emit_shaped(
        self,
        op: str,
        args: Sequence[TensorVar],
        attrs: Mapping[str, Any],
        shape: Sequence[Dim],
        uses: Sequence[Dim] = (),
    ) -> TensorVar:
        """Bind an operator whose result ``shape`` is given (``broadcast_to``,
        ``strided_slice``, ``arange``...), adding graph inputs that bring the shape variables
        it names (and those of the other extents its attributes ``uses``) into scope."""
        exprs = [as_expr(d) if isinstance(d, int) else d for d in shape]
        have = {v.name for a in args for v in collect_vars_of_shape(a.type.shape)}
        extra: list[TensorVar] = []
        used = [as_expr(d) if isinstance(d, int) else d for d in uses]
        for want in collect_vars_of_shape([*exprs, *used]):
            if want.name in have:
                continue
            carrier = next((p for p in self.bb.params if any(v is want for v in _vars(p))), None)
            if carrier is None:
                raise self.error(f"no input has the symbolic extent {want.name}")
            extra.append(carrier)
            have |= {v.name for v in _vars(carrier)}
        try:
            spec = {**attrs, "shape": tuple(extent_text(e) for e in exprs)}
        except GraphError as e:
            raise self.error(str(e)) from e
        return self.emit(op, [*args, *extra], spec)


def _vars(t: TensorVar) -> list[Var]:
    return collect_vars_of_shape(t.type.shape)

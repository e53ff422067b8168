"""The conversion state of one exported program: values, symbolic extents, helpers.

A :class:`Context` maps each FX node to its graph value (a :class:`TensorVar`, a tuple of
them, or a Python / symbolic scalar) and emits graph operators through a
:class:`~tilecraft.graph.GraphBuilder`. Shapes are read from each node's ``meta["val"]``
(torch's fake tensors), so symbolic extents (``s77``) become graph shape variables and
expressions over them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...graph import Binding, Constant, GraphBuilder, TensorType, TensorVar
from ...graph._shape_text import extent_text
from ...graph.ir import collect_vars_of_shape
from ...ir import Expr, PrimFunc, Var, as_expr, collect_vars
from ...ir import dtype as to_dtype
from ._errors import TorchFrontendError
from ._views import lift, merged, same_shape, unmerged


class UnsupportedNodeError(TorchFrontendError):
    """A node the converters cannot express (reported with every other one)."""


def torch_dtype_name(dt: Any) -> str:
    """``torch.float32`` -> ``"float32"``."""
    name = str(dt).removeprefix("torch.")
    if name not in _DTYPES:
        raise UnsupportedNodeError(f"dtype {name} has no tilecraft equivalent")
    return name


_DTYPES = {
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
    "uint8", "bool",
}  # fmt: skip


_SYMBOLIC_NUMBERS = ("SymInt", "SymFloat", "SymBool")


def sym_to_expr(e: Any, syms: Mapping[str, Var]) -> Expr:
    """A sympy expression over torch's shape symbols as a tilecraft integer expression."""
    if e.is_Integer:
        return as_expr(int(e))
    if e.is_Symbol:
        if e.name not in syms:
            raise UnsupportedNodeError(f"data-dependent extent {e.name}")
        return syms[e.name]
    kind = type(e).__name__
    parts = [sym_to_expr(a, syms) for a in e.args]
    if kind == "Add":
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out
    if kind == "Mul":
        out = parts[0]
        for p in parts[1:]:
            out = out * p
        return out
    if kind == "FloorDiv":
        return parts[0] // parts[1]
    if kind in ("Mod", "PythonMod"):
        return parts[0] % parts[1]
    if kind == "Pow" and e.args[1].is_Integer and int(e.args[1]) > 0:
        out = parts[0]
        for _ in range(int(e.args[1]) - 1):
            out = out * parts[0]
        return out
    raise UnsupportedNodeError(f"symbolic extent {e} ({kind})")


class Context:
    """Conversion state (module docstring)."""

    def __init__(self, syms: Mapping[str, Var]) -> None:
        self.bb = GraphBuilder()
        self.syms = dict(syms)
        self.env: dict[Any, Any] = {}
        self.carriers: dict[str, TensorVar] = {}
        self.view_of: dict[int, TensorVar] = {}
        self.prims: dict[str, PrimFunc] = {}  # kernels written by hand (nonzero's)
        self.numbers: dict[str, TensorVar] = {}  # symbol -> 0-d tensor of its value
        self.pending: dict[str, Callable[[], None]] = {}  # symbol -> its bind, on first use

    # values ------------------------------------------------------------------------------
    def value(self, a: Any) -> Any:
        """The converted value of an FX argument (nodes looked up, lists converted)."""
        if hasattr(a, "op") and hasattr(a, "target"):  # an fx.Node
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.value(x) for x in a)
        if hasattr(a, "node") and hasattr(a.node, "expr"):  # a SymInt
            return self.expr(a)
        return a

    def arg(self, node: Any, i: int, name: str, default: Any = None) -> Any:
        """Argument ``i`` (or keyword ``name``) of ``node``, converted."""
        if i < len(node.args):
            return self.value(node.args[i])
        return self.value(node.kwargs[name]) if name in node.kwargs else default

    def tensor(self, node: Any, i: int, name: str = "self") -> TensorVar:
        """A tensor argument; UnsupportedNodeError when it is not a tensor."""
        v = self.arg(node, i, name)
        if not isinstance(v, TensorVar):
            raise UnsupportedNodeError(f"argument {name} is {type(v).__name__}, expected a tensor")
        return v

    def expr(self, v: Any) -> Expr:
        """An int or SymInt as an extent expression."""
        if isinstance(v, Expr):
            return v
        if isinstance(v, int):
            return as_expr(v)
        if hasattr(v, "node") and hasattr(v.node, "expr"):
            for s in getattr(v.node.expr, "free_symbols", ()):  # an .item() now an extent
                bind = self.pending.pop(str(s), None)
                if bind is not None:
                    bind()
            return sym_to_expr(v.node.expr, self.syms)
        raise UnsupportedNodeError(f"expected an integer, got {type(v).__name__}")

    # types -------------------------------------------------------------------------------
    def meta(self, node: Any) -> Any:
        """The fake value torch recorded for ``node``."""
        v = node.meta.get("val")
        if isinstance(v, (list, tuple)):
            return v[0]
        return v

    def out_shape(self, node: Any, val: Any = None) -> tuple[Expr, ...]:
        """The result shape of ``node`` (or of fake tensor ``val``) as extents."""
        t = self.meta(node) if val is None else val
        return tuple(self.expr(s) for s in t.shape)

    def out_dtype(self, node: Any, val: Any = None) -> str:
        """The result dtype of ``node`` as a tilecraft dtype name."""
        t = self.meta(node) if val is None else val
        return torch_dtype_name(t.dtype)

    def shape_attr(self, shape: Sequence[Expr]) -> tuple[int | str, ...]:
        """Extents as attribute values (ints, or text over shape variable names)."""
        return tuple(extent_text(s) for s in shape)

    # emitting ----------------------------------------------------------------------------
    def emit(
        self, op: str, args: Sequence[TensorVar], attrs: Mapping[str, Any] | None = None
    ) -> TensorVar:
        """Bind ``op(args, attrs)``, on the un-merged bases of merged views where it can."""
        for k, v in (attrs or {}).items():
            if type(v).__name__ in _SYMBOLIC_NUMBERS:
                raise UnsupportedNodeError(f"{op}: a symbolic number {v} as its attribute {k}")
        lifted = lift(self, op, list(args), dict(attrs or {}))
        if lifted is not None:
            return lifted
        return self.bb.emit(op, list(args), dict(attrs or {}))

    def emit_shaped(
        self,
        op: str,
        args: Sequence[TensorVar],
        attrs: Mapping[str, Any],
        shape: Sequence[Expr],
        uses: Sequence[Expr] = (),
    ) -> TensorVar:
        """Bind an operator whose ``shape`` attribute is given, adding the tensors that bring
        its shape variables (and those of the other extents it ``uses``) into scope."""
        have = {v.name for a in args for v in collect_vars_of_shape(a.type.shape)}
        extra: list[TensorVar] = []
        for s in (*shape, *uses):
            for v in collect_vars(s):
                if v.name not in have:
                    extra.append(self.carriers[v.name])
                    have |= {w.name for w in collect_vars_of_shape(extra[-1].type.shape)}
        return self.emit(op, [*args, *extra], {**attrs, "shape": self.shape_attr(shape)})

    def const(self, data: np.ndarray, name: str = "const") -> TensorVar:
        """Bind a constant tensor."""
        t = TensorType(data.shape, to_dtype(str(data.dtype)))
        var = TensorVar(self.bb.fresh(name), t)
        self.bb.bindings.append(Binding(var, Constant(t, data)))
        return var

    def scalar(self, value: Any, dtype: str) -> TensorVar:
        """A 0-d constant of ``dtype``."""
        if isinstance(value, Expr):
            raise UnsupportedNodeError("a symbolic scalar used as a tensor value")
        if type(value).__name__ in _SYMBOLIC_NUMBERS:
            return self.operand(value, dtype)
        return self.const(np.array(value, dtype=np.dtype(_np_name(dtype))), "scalar")

    def cast(self, x: TensorVar, dtype: str) -> TensorVar:
        """``x`` as ``dtype`` (itself when it already is)."""
        if str(x.type.dtype) == dtype:
            return x
        return self.emit("astype", [x], {"dtype": dtype})

    def operand(self, v: Any, dtype: str) -> TensorVar:
        """A tensor or Python scalar as a tensor of ``dtype``."""
        if isinstance(v, TensorVar):
            return self.cast(v, dtype)
        if isinstance(v, (bool, int, float)):
            return self.scalar(v, dtype)
        from ._numbers import is_symbolic_number, number  # (it builds on this class)

        if is_symbolic_number(v):
            return number(self, v, dtype)
        raise UnsupportedNodeError(f"operand of type {type(v).__name__}")

    def reshape(self, x: TensorVar, shape: Sequence[Expr]) -> TensorVar:
        """``x`` reshaped (itself when the shape is the same); see :mod:`._views`."""
        x = self.view_of.get(id(x), x)
        if same_shape(shape, x.type.shape):
            return x
        if any(merged(s) for s in shape):
            base = unmerged(x.type.shape, shape)
            if base is not None and not same_shape(base, x.type.shape):
                x = self.bb.emit("reshape", [x], {"shape": self.shape_attr(base)})
        out = self.bb.emit("reshape", [x], {"shape": self.shape_attr(shape)})
        if any(merged(s) for s in shape):
            self.view_of[id(out)] = x
        return out


def _np_name(dtype: str) -> str:
    return "float32" if dtype == "bfloat16" else dtype

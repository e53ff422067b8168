"""GraphBuilder: build a graph function binding by binding, with type inference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..ir import Attrs, DataType, Expr, Var
from ..ir.dtype import dtype as to_dtype
from .ir import Binding, CallTIR, Function, OpCall, TensorType, TensorVar, as_graph_shape
from .ir_bind import BindSymbol, carrier_type
from .op import GraphError, infer_type


class GraphBuilder:
    """Accumulates parameters and bindings of one graph function.

    Symbolic extents named by strings (``("n", 768)``) are shared across the function.
    """

    def __init__(self) -> None:
        self.params: list[TensorVar] = []
        self.bindings: list[Binding] = []
        self.shape_vars: dict[str, Var] = {}
        self._names: set[str] = set()

    def fresh(self, base: str) -> str:
        """A variable name not used yet in this function (``add``, ``add1``, ...)."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "v" + base
        name, n = base, 1
        while name in self._names:
            name = f"{base}{n}"
            n += 1
        self._names.add(name)
        return name

    def shape(self, dims: Sequence[int | str | Expr]) -> tuple[Expr, ...]:
        """Graph extents: strings become this function's int32 shape variables."""
        out: list[int | Expr] = []
        for d in dims:
            if isinstance(d, str):
                out.append(self.shape_vars.setdefault(d, Var(d, to_dtype("int32"))))
            else:
                out.append(d)
        return as_graph_shape(out)

    def param(self, name: str, shape: Sequence[int | str | Expr], dt: str | DataType) -> TensorVar:
        """Add a function parameter."""
        var = TensorVar(self.fresh(name), TensorType(self.shape(shape), to_dtype(dt)))
        self.params.append(var)
        return var

    def emit(
        self,
        op: str,
        args: Sequence[TensorVar],
        attrs: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> TensorVar:
        """Bind ``op(args, attrs)`` to a new variable typed by inference."""
        a = Attrs(attrs or {})
        for x in args:
            if not isinstance(x, TensorVar):
                raise GraphError(f"{op}: arguments must be graph tensors, got {type(x).__name__}")
        out_type = infer_type(op, [x.type for x in args], a)
        var = TensorVar(self.fresh(name or op), out_type)
        self.bindings.append(Binding(var, OpCall(op, tuple(args), a)))
        return var

    def emit_call_tir(
        self, func: str, args: Sequence[TensorVar], out_type: TensorType, name: str = "lv"
    ) -> TensorVar:
        """Bind ``call_tir(func, args)`` to a new variable of ``out_type``."""
        var = TensorVar(self.fresh(name), out_type)
        self.bindings.append(Binding(var, CallTIR(func, tuple(args), out_type)))
        return var

    def emit_bind_symbol(
        self,
        source: TensorVar,
        symbol: str | Var,
        lower: int | Expr = 0,
        upper: int | Expr = -1,
    ) -> TensorVar:
        """Bind ``symbol`` to the integer in ``source`` at run time; returns its carrier.

        ``symbol`` (a name becomes this function's shape variable) is then an extent like
        an input's: a binding whose type names it takes the carrier as an argument (see
        :mod:`tilecraft.graph.ir_bind`).
        """
        sym = self.shape((symbol,))[0] if isinstance(symbol, str) else symbol
        if not isinstance(sym, Var):
            raise GraphError(f"bind_symbol: expected a shape variable, got {symbol!r}")
        value = BindSymbol((source,), sym, lower, upper)
        var = TensorVar(self.fresh(f"{sym.name}_c"), carrier_type(sym, source.type))
        self.bindings.append(Binding(var, value))
        return var

    def finish(
        self,
        ret: TensorVar | Sequence[TensorVar],
        name: str = "main",
        attrs: Mapping[str, Any] | None = None,
        ret_name: str | None = "gv",
    ) -> Function:
        """The function returning ``ret``; its binding is renamed ``ret_name`` (TVM's ``gv``).

        A sequence of tensors makes a function returning a tuple (its results keep their
        names).
        """
        bindings = list(self.bindings)
        if not isinstance(ret, TensorVar):
            rets = tuple(ret)
            return Function(tuple(self.params), tuple(bindings), rets, Attrs(attrs or {}), name)
        if ret_name and any(b.var is ret for b in bindings) and ret_name not in self._names:
            new = TensorVar(ret_name, ret.type)
            bindings = [_replace(b, ret, new) for b in bindings]
            ret = new
        return Function(tuple(self.params), tuple(bindings), ret, Attrs(attrs or {}), name)


def _replace(b: Binding, old: TensorVar, new: TensorVar) -> Binding:
    args = tuple(new if a is old else a for a in b.value.args)
    return Binding(new if b.var is old else b.var, b.value.update(args=args))

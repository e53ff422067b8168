"""Converters of operators whose result shape depends on tensor values.

``torch.export`` names such an extent with an unbacked symbol (``u0``) and guards it with
runtime asserts. Each becomes a ``bind_symbol`` of the graph (:mod:`tilecraft.graph.ir_bind`):
the extent is read from a tensor once the kernels computing it ran, checked against its
bounds, and is then a shape variable like an input's.

- ``nonzero(x)``: a count kernel, the bind, a fill kernel (:mod:`tilecraft.graph.dynamic`);
- ``x[mask]`` (``index.Tensor`` with a boolean mask) and ``masked_select(x, mask)``: the
  flat indices of the mask's ``nonzero``, then ``take``;
- ``n.item()`` (``_local_scalar_dense``): the bind alone, made when a shape first needs the
  value (a value used only as a number is a 0-d tensor, :mod:`._numbers`, and binds nothing).

The bounds are torch's range for the symbol, the element count for a mask, and the extents
the program asserts (``torch._check(k <= x.shape[0])``: an upper bound of ``x``'s extent, so
``x[:k]`` never reads past ``x``; ``Eq(u1, u0)``, two selections torch needs equal: ``u1`` is
checked equal to ``u0`` and the second result's rows are ``u0``).
"""

from __future__ import annotations

from typing import Any

from ...graph import TensorVar
from ...graph.dynamic import emit_nonzero
from ...graph.ir_bind import INT32_MAX
from ...graph.op import broadcast_shapes
from ...ir import Expr, IntImm, Var, as_expr
from ...ir import dtype as to_dtype
from ._context import Context, UnsupportedNodeError, sym_to_expr
from ._numbers import SYMBOLIC_NUMBERS, register_source
from ._registry import handles

DATA_DEPENDENT = frozenset({"aten::_local_scalar_dense"})
"""Operators whose value is a symbol the importer must bind (not read from torch's meta)."""


def _symbol(ctx: Context, e: Any, what: str) -> Var:
    """The shape variable of torch's unbacked symbol ``e`` (a plain ``u0``)."""
    expr = getattr(getattr(e, "node", None), "expr", e)
    if not getattr(expr, "is_Symbol", False):
        raise UnsupportedNodeError(f"{what}: a data-dependent extent {expr} that is not a symbol")
    name = str(expr)
    var = ctx.syms.setdefault(name, Var(name, to_dtype("int32")))
    if name in ctx.carriers:
        raise UnsupportedNodeError(f"{what}: the extent {name} is bound twice")
    return var


def _range_upper(e: Any) -> int:
    """torch's upper bound of the symbol of SymInt ``e`` (-1: none)."""
    shape_env = getattr(getattr(e, "node", None), "shape_env", None)
    expr = getattr(getattr(e, "node", None), "expr", e)
    vr = getattr(shape_env, "var_to_range", {}).get(expr) if shape_env is not None else None
    hi = getattr(vr, "upper", None)
    if hi is None or not getattr(hi, "is_Integer", False) or int(hi) > INT32_MAX:
        return -1
    return max(int(hi), 0)


def _numel_bound(x: TensorVar) -> int:
    """The static element count of ``x`` (-1: symbolic)."""
    shape = x.type.static_shape()
    numel = 1
    for s in shape or ():
        numel *= s
    return -1 if shape is None else numel


_FLIP = {"LessThan": "GreaterThan", "StrictLessThan": "StrictGreaterThan",
         "GreaterThan": "LessThan", "StrictGreaterThan": "StrictLessThan",
         "Equality": "Equality"}  # fmt: skip


def _asserted(ctx: Context, node: Any, name: str) -> list[tuple[str, Expr]]:
    """``(relation, extent)`` for each assert of the program relating ``name`` to an extent
    already bound (``u0 <= s77``: ``("LessThan", s77)``; ``Eq(u1, u0)``: ``("Equality", u0)``).
    """
    known = {k: v for k, v in ctx.syms.items() if k in ctx.carriers}  # bound already
    out: list[tuple[str, Expr]] = []
    for user in node.graph.nodes:
        if user.op != "call_function" or "_assert_scalar" not in str(user.target):
            continue
        cond = getattr(getattr(user.args[0], "meta", {}).get("val"), "node", None)
        rel: Any = getattr(cond, "expr", None)
        kind = type(rel).__name__
        if kind not in _FLIP or len(rel.args) != 2:
            continue
        a, b = rel.args
        if str(b) == name:
            a, b, kind = b, a, _FLIP[kind]
        if str(a) != name or any(str(v) == name for v in b.free_symbols):
            continue
        try:
            out.append((kind, sym_to_expr(b, known)))
        except UnsupportedNodeError:
            continue
    return out


def _bounds(ctx: Context, node: Any, name: str, upper: int) -> tuple[Expr | int, Expr | int]:
    """The bounds of symbol ``name``: ``upper`` (an int, -1: none) and the program's asserts.

    An asserted extent wins over an int: it is what keeps a slice ``x[:k]`` inside ``x``.
    """
    lo: Expr | int = 0
    hi: Expr | int = upper
    for kind, e in _asserted(ctx, node, name):
        if kind in ("LessThan", "StrictLessThan", "Equality"):
            e_hi = _shifted(e, -1 if kind == "StrictLessThan" else 0)
            if not isinstance(e_hi, int):
                hi = e_hi
            elif isinstance(hi, int) and (hi == -1 or e_hi < hi):
                hi = max(e_hi, 0)
        if kind in ("GreaterThan", "StrictGreaterThan", "Equality"):
            e_lo = _shifted(e, 1 if kind == "StrictGreaterThan" else 0)
            if not isinstance(e_lo, int):
                lo = e_lo
            elif isinstance(lo, int):
                lo = max(lo, e_lo)
    return lo, hi


def _shifted(e: Expr, by: int) -> Expr | int:
    """``e + by``: an int when ``e`` is a constant (``u0 < 5``: at most 4)."""
    if isinstance(e, IntImm):
        return e.value + by
    return e + by if by > 0 else e - (-by) if by < 0 else e  # "s - 1" reads back as written


def _min_bound(a: int, b: int) -> int:
    """The smaller of two int upper bounds (-1: none)."""
    return b if a == -1 else a if b == -1 else min(a, b)


def _nonzero(ctx: Context, node: Any, x: TensorVar, rows: Any, what: str) -> TensorVar:
    """``nonzero(x)`` (a 0-d ``x`` as one element) whose row count is torch's ``rows``.

    A count the program asserts equal to an earlier one (``Eq(u1, u0)``: ``nonzero(m1) +
    nonzero(m2)``), or that torch names by the earlier one's symbol (``x[m] - y[m]``: the
    same mask), is checked equal to it, and the result's rows are the earlier count.
    """
    name = str(getattr(getattr(rows, "node", None), "expr", rows))
    same: Var | None
    lo: int | Expr
    hi: int | Expr
    if name in ctx.carriers and name in ctx.syms:  # the same count again, under a symbol of
        same = ctx.syms[name]  # its own that is checked equal
        sym, lo, hi = Var(ctx.bb.fresh(f"{name}_"), to_dtype("int32")), same, same
    else:
        sym = _symbol(ctx, rows, what)
        upper = _min_bound(_numel_bound(x), _range_upper(rows))
        lo, hi = _bounds(ctx, node, sym.name, upper)
        same = lo if lo is hi and isinstance(lo, Var) else None
    if x.type.ndim == 0:
        x = ctx.reshape(x, (as_expr(1),))
    idx, carrier = emit_nonzero(ctx.bb, x, sym, hi, ctx.prims, lower=lo, rows=same)
    ctx.carriers.setdefault(sym.name, carrier)
    if same is not None:  # later shapes name the earlier count
        ctx.syms[sym.name], ctx.carriers[sym.name] = same, ctx.carriers[same.name]
    return idx


@handles("aten::nonzero")
def _nonzero_op(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    rows = ctx.meta(node).shape[0]
    idx = _nonzero(ctx, node, x, rows, "nonzero")
    if x.type.ndim == 0:  # (u0, 0) indices: the count's carrier is that tensor
        return ctx.carriers[str(getattr(rows.node, "expr", rows))]
    return idx


def _flat_selected(ctx: Context, node: Any, mask: TensorVar, rows: Any, what: str) -> TensorVar:
    """The flat indices (``(u0,)`` int64) of the true elements of ``mask``."""
    idx = _nonzero(ctx, node, ctx.reshape(mask, (_numel(mask.type.shape),)), rows, what)
    return ctx.reshape(idx, (idx.type.shape[0],))


def _numel(shape: tuple[Expr, ...]) -> Expr:
    out: Expr = as_expr(1)
    for s in shape:
        out = s if isinstance(out, IntImm) and out.value == 1 else out * s
    return out


def boolean_index(ctx: Context, node: Any, x: TensorVar, axis: int, mask: TensorVar) -> TensorVar:
    """``x[..., mask, ...]``: the elements of ``x`` where ``mask`` (over the axes from
    ``axis`` on) is true, those axes flattened into one of the selected count."""
    k = mask.type.ndim
    if k == 0 or axis + k > x.type.ndim:
        raise UnsupportedNodeError("index with a 0-d boolean mask")
    idx = _flat_selected(ctx, node, mask, ctx.meta(node).shape[axis], "index with a boolean mask")
    shape = x.type.shape
    merged = (*shape[:axis], _numel(shape[axis : axis + k]), *shape[axis + k :])
    return ctx.emit("take", [ctx.reshape(x, merged), idx], {"axis": axis})


@handles("aten::masked_select")
def _masked_select(ctx: Context, node: Any) -> TensorVar:
    x, mask = ctx.tensor(node, 0), ctx.tensor(node, 1, "mask")
    shape = broadcast_shapes("masked_select", x.type.shape, mask.type.shape)
    x, mask = (_broadcast(ctx, t, shape) for t in (x, mask))
    idx = _flat_selected(ctx, node, mask, ctx.meta(node).shape[0], "masked_select")
    return ctx.emit("take", [ctx.reshape(x, (_numel(shape),)), idx], {"axis": 0})


def _broadcast(ctx: Context, t: TensorVar, shape: tuple[Expr, ...]) -> TensorVar:
    same = t.type.ndim == len(shape) and all(
        a is b or (isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value)
        for a, b in zip(t.type.shape, shape, strict=True)
    )
    return t if same else ctx.emit_shaped("broadcast_to", [t], {}, shape)


@handles("aten::_local_scalar_dense")
def _item(ctx: Context, node: Any) -> Any:
    """``n.item()``: a number (:mod:`._numbers`) and, once a shape needs it, a bound extent."""
    val = node.meta.get("val")
    src = ctx.tensor(node, 0)
    kind = type(val).__name__
    expr = getattr(getattr(val, "node", None), "expr", None)
    if kind == "SymBool" and type(expr).__name__ == "Equality":  # a bool's u0 as Eq(u0, 1)
        expr, kind = _bool_symbol(expr), "SymInt"
    if kind not in SYMBOLIC_NUMBERS or not getattr(expr, "is_Symbol", False):
        raise UnsupportedNodeError(f"a tensor's value as a host scalar {val} ({kind})")
    register_source(ctx, str(expr), src, kind)
    if type(val).__name__ == "SymInt" and (src.type.dtype.is_integer or src.type.dtype.is_bool):
        ctx.pending[str(expr)] = lambda: _bind_item(ctx, node, val, src)
    return val


def _bool_symbol(eq: Any) -> Any:
    """``u0`` of ``Eq(u0, 1)``, torch's value of a bool tensor's ``.item()`` (else ``eq``)."""
    syms = [a for a in eq.args if a.is_Symbol]
    ones = [a for a in eq.args if a.is_Integer and int(a) == 1]
    return syms[0] if len(syms) == 1 and len(ones) == 1 else eq


def _bind_item(ctx: Context, node: Any, val: Any, src: TensorVar) -> None:
    """Bind the extent ``val`` of ``n.item()`` (``src``), first used as a size here."""
    sym = _symbol(ctx, val, ".item()")
    lo, hi = _bounds(ctx, node, sym.name, _range_upper(val))
    flat = ctx.reshape(src, (as_expr(1),)) if src.type.ndim != 1 else src
    ctx.carriers[sym.name] = ctx.bb.emit_bind_symbol(flat, sym, lo, hi)

"""Converters of operators whose result shape depends on tensor values.

``torch.export`` names such an extent with an unbacked symbol (``u0``) and guards it with
runtime asserts. Each becomes a ``bind_symbol`` of the graph (:mod:`tilecraft.graph.ir_bind`):
the extent is read from a tensor once the kernels computing it ran, checked against its
bounds, and is then a shape variable like an input's.

- ``nonzero(x)``: a count kernel, the bind, a fill kernel (:mod:`tilecraft.graph.dynamic`);
- ``x[mask]`` (``index.Tensor`` with a boolean mask) and ``masked_select(x, mask)``: the
  flat indices of the mask's ``nonzero``, then ``take``;
- ``n.item()`` (``_local_scalar_dense``): the bind alone. Its bounds are torch's range for
  the symbol and, as the upper bound, an extent the program asserts it does not exceed
  (``torch._check(k <= x.shape[0])``), so ``x[:k]`` never reads past ``x``.
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


def _range_upper(node: Any, e: Any) -> int:
    """torch's upper bound of the symbol of SymInt ``e`` (-1: none)."""
    shape_env = getattr(getattr(e, "node", None), "shape_env", None)
    expr = getattr(getattr(e, "node", None), "expr", e)
    vr = getattr(shape_env, "var_to_range", {}).get(expr) if shape_env is not None else None
    hi = getattr(vr, "upper", None)
    if hi is None or not getattr(hi, "is_Integer", False) or int(hi) > INT32_MAX:
        return -1
    return max(int(hi), 0)


def _count_upper(x: TensorVar, node: Any, e: Any) -> int:
    """An upper bound of how many elements of ``x`` a mask selects (-1: none known)."""
    hi = _range_upper(node, e)
    shape = x.type.static_shape()
    if shape is None:
        return hi
    numel = 1
    for s in shape:
        numel *= s
    return numel if hi == -1 else min(hi, numel)


def _nonzero(ctx: Context, x: TensorVar, sym: Var, upper: int) -> tuple[TensorVar, TensorVar]:
    """``nonzero(x)`` (a 0-d ``x`` as one element) and the carrier of its row count."""
    if x.type.ndim == 0:
        x = ctx.reshape(x, (as_expr(1),))
    idx, carrier = emit_nonzero(ctx.bb, x, sym, upper, ctx.prims)
    ctx.carriers[sym.name] = carrier
    return idx, carrier


@handles("aten::nonzero")
def _nonzero_op(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    rows = ctx.meta(node).shape[0]
    sym = _symbol(ctx, rows, "nonzero")
    idx, carrier = _nonzero(ctx, x, sym, _count_upper(x, node, rows))
    return carrier if x.type.ndim == 0 else idx  # a 0-d input: (u0, 0) indices


def _flat_selected(ctx: Context, mask: TensorVar, rows: Any, what: str) -> tuple[TensorVar, Var]:
    """The flat indices (``(u0,)`` int64) of the true elements of ``mask``."""
    sym = _symbol(ctx, rows, what)
    flat = ctx.reshape(mask, (_numel(mask.type.shape),))
    idx, _ = _nonzero(ctx, flat, sym, _count_upper(flat, None, rows))
    return ctx.reshape(idx, (sym,)), sym


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
    idx, _ = _flat_selected(ctx, mask, ctx.meta(node).shape[axis], "index with a boolean mask")
    shape = x.type.shape
    merged = (*shape[:axis], _numel(shape[axis : axis + k]), *shape[axis + k :])
    return ctx.emit("take", [ctx.reshape(x, merged), idx], {"axis": axis})


@handles("aten::masked_select")
def _masked_select(ctx: Context, node: Any) -> TensorVar:
    x, mask = ctx.tensor(node, 0), ctx.tensor(node, 1, "mask")
    shape = broadcast_shapes("masked_select", x.type.shape, mask.type.shape)
    x, mask = (_broadcast(ctx, t, shape) for t in (x, mask))
    idx, _ = _flat_selected(ctx, mask, ctx.meta(node).shape[0], "masked_select")
    return ctx.emit("take", [ctx.reshape(x, (_numel(shape),)), idx], {"axis": 0})


def _broadcast(ctx: Context, t: TensorVar, shape: tuple[Expr, ...]) -> TensorVar:
    same = t.type.ndim == len(shape) and all(
        a is b or (isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value)
        for a, b in zip(t.type.shape, shape, strict=True)
    )
    return t if same else ctx.emit_shaped("broadcast_to", [t], {}, shape)


@handles("aten::_local_scalar_dense")
def _item(ctx: Context, node: Any) -> Any:
    val = node.meta.get("val")
    src = ctx.tensor(node, 0)
    if type(val).__name__ != "SymInt" or not (src.type.dtype.is_integer or src.type.dtype.is_bool):
        raise UnsupportedNodeError("a tensor's value as a host scalar other than an integer")
    sym = _symbol(ctx, val, ".item()")
    upper: int | Expr = _range_upper(node, val)
    asserted = _asserted_upper(ctx, node, sym.name)
    if asserted is not None and (upper == -1 or not isinstance(asserted, IntImm)):
        upper = asserted
    flat = ctx.reshape(src, (as_expr(1),)) if src.type.ndim != 1 else src
    ctx.carriers[sym.name] = ctx.bb.emit_bind_symbol(flat, sym, 0, upper)
    return val


def _asserted_upper(ctx: Context, node: Any, name: str) -> Expr | None:
    """An extent the program asserts symbol ``name`` does not exceed (``u0 <= s77``)."""
    for user in node.graph.nodes:
        if user.op != "call_function" or "_assert_scalar" not in str(user.target):
            continue
        cond = getattr(getattr(user.args[0], "meta", {}).get("val"), "node", None)
        rel: Any = getattr(cond, "expr", None)
        kind = type(rel).__name__
        if kind not in ("LessThan", "StrictLessThan", "GreaterThan", "StrictGreaterThan"):
            continue
        small, big = rel.args if kind in ("LessThan", "StrictLessThan") else rel.args[::-1]
        if str(small) != name or big.free_symbols & {small}:
            continue
        try:
            known = {k: v for k, v in ctx.syms.items() if k in ctx.carriers}  # bound already
            bound = sym_to_expr(big, known)
        except UnsupportedNodeError:
            continue
        strict = kind.startswith("Strict")
        return bound - 1 if strict else bound
    return None

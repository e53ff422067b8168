"""Access regions of a block body: which part of each buffer it reads (package-private)."""

from __future__ import annotations

from ..ir import (
    Add,
    Buffer,
    BufferLoad,
    BufferRegion,
    Expr,
    FloatImm,
    IntImm,
    Node,
    Range,
    Sub,
    Var,
    as_expr,
    post_order_visit,
)
from ..ir.visitor import node_fields


def same_expr(a: object, b: object) -> bool:
    """Syntactic equality of two IR trees (variables and buffers by identity)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (Var, Buffer)):
        return False
    if isinstance(a, (IntImm, FloatImm)):
        return bool(a.dtype == b.dtype and a.value == b.value)  # type: ignore[attr-defined]
    if isinstance(a, Node):
        return all(same_expr(getattr(a, f), getattr(b, f)) for f in node_fields(type(a)))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _split_offset(e: Expr) -> tuple[Expr | None, int]:
    """``e`` as ``base + c`` with a constant ``c`` (base None when ``e`` is a constant)."""
    if isinstance(e, IntImm):
        return None, e.value
    if isinstance(e, Add) and isinstance(e.b, IntImm):
        return e.a, e.b.value
    if isinstance(e, Sub) and isinstance(e.b, IntImm):
        return e.a, -e.b.value
    return e, 0


def _has_load(e: Expr) -> bool:
    found = False

    def fn(n: Node) -> None:
        nonlocal found
        if isinstance(n, BufferLoad):
            found = True

    post_order_visit(e, fn)
    return found


def _dim_range(indices: list[Expr], extent: Expr) -> Range:
    """Hull of the indices one dimension is accessed with (whole extent when unknown)."""
    parts = [_split_offset(i) for i in indices]
    base = parts[0][0]
    if all(same_expr(b, base) for b, _ in parts) and (base is None or not _has_load(base)):
        lo = min(c for _, c in parts)
        hi = max(c for _, c in parts)
        dt = indices[0].dtype
        if base is None:
            start: Expr = as_expr(lo, dt)
        elif lo == 0:
            start = base
        else:
            start = base + lo if lo > 0 else base - (-lo)
        return Range(start, as_expr(hi - lo + 1, dt))
    return Range(as_expr(0, extent.dtype), extent)


def access_regions(exprs: list[Expr], exclude: tuple[Buffer, ...] = ()) -> list[BufferRegion]:
    """Regions read by ``exprs``: one per buffer, in order of first load."""
    loads: dict[int, tuple[Buffer, list[tuple[Expr, ...]]]] = {}

    def fn(n: Node) -> None:
        if isinstance(n, BufferLoad) and all(n.buffer is not b for b in exclude):
            entry = loads.setdefault(id(n.buffer), (n.buffer, []))
            entry[1].append(n.indices)

    for e in exprs:
        post_order_visit(e, fn)
    regions = []
    for buf, accesses in loads.values():
        rng = [_dim_range([acc[d] for acc in accesses], buf.shape[d]) for d in range(buf.ndim)]
        regions.append(BufferRegion(buf, tuple(rng)))
    return regions

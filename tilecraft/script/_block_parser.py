"""Parse ``with T.block("name"):`` statements: iterators, regions, init, allocations, body.

Iterators are declared one per line (``vi = T.axis.spatial(dom, value)``) or several at once
with ``vi, vj, vk = T.axis.remap("SSR", [i, j, k])``: each binds a variable of an enclosing
loop, with that loop's range as its domain (``S`` spatial, ``R`` reduce). ``T.reads`` or
``T.writes`` left out is inferred from the body (:mod:`tilecraft.script._regions`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    Expr,
    IterKind,
    IterVar,
    Range,
    Stmt,
    Var,
    as_expr,
    dtype,
)
from ._regions import infer_regions

if TYPE_CHECKING:
    from ._stmt_parser import StmtParser as _Parser

AXES = {
    "axis.spatial": IterKind.SPATIAL,
    "axis.reduce": IterKind.REDUCE,
    "axis.opaque": IterKind.OPAQUE,
}
_SINGLE = ("reads", "writes", "where", "block_attr")


class _Header:
    """The statements before a block's body, classified."""

    def __init__(self) -> None:
        self.axes: list[tuple[ast.Assign, str, IterKind, Range, Expr | None]] = []
        self.calls: dict[str, ast.Call] = {}
        self.allocs: list[tuple[ast.Assign, str, ast.Call]] = []
        self.init: ast.With | None = None


def parse_block(p: _Parser, s: ast.With, ctx: ast.Call) -> Stmt:
    """Translate ``with T.block(name[, realize=False]):`` to a BlockRealize (or a bare Block)."""
    p.check_args(ctx, "block", 1, 1, ("realize",))
    name = p.string(ctx.args[0], "a block name")
    realize = True
    realize_node = p.keyword(ctx, "realize")
    if realize_node is not None:
        if not isinstance(realize_node, ast.Constant) or not isinstance(realize_node.value, bool):
            p.fail(realize_node, "realize= must be True or False")
        realize = realize_node.value
    if s.items[0].optional_vars is not None:
        p.fail(s, "T.block(...) takes no 'as' target")
    if name in p.block_names:
        p.fail(ctx.args[0], f"duplicate block name {name!r}; block names are unique in a function")
    p.block_names.add(name)
    head = _Header()
    k = 0
    while k < len(s.body) and _header_stmt(p, s.body[k], head, realize):
        k += 1
    rest = s.body[k:]
    if not rest:
        p.fail(s, f"block {name!r} has no body statements after its header")
    where = None
    if "where" in head.calls:
        call = head.calls["where"]
        p.check_args(call, "where", 1, 1)
        where = p.expr(call.args[0], dtype("bool"))  # loop variables: the enclosing scope
    p.push()
    iter_vars = []
    for st, vname, kind, dom, _ in head.axes:
        var = Var(vname, dom.extent.dtype)
        p.define(st, vname, var)
        iter_vars.append(IterVar(var, dom, kind))
    allocs: list[Buffer] = []
    for st, bname, call in head.allocs:
        buf = p.buffer_decl(call, "alloc_buffer", bname)
        p.define(st, bname, buf)
        allocs.append(buf)
    reads = _regions(p, head.calls.get("reads"))
    writes = _regions(p, head.calls.get("writes"))
    attr_call = head.calls.get("block_attr")
    ann = p.attrs_arg(attr_call, "block_attr") if attr_call is not None else None
    init = p.nested_body(head.init.body, head.init) if head.init is not None else None
    body = p.body(rest, s)
    p.pop()
    block = Block(name, tuple(iter_vars), reads, writes, body, init, tuple(allocs), ann or {})  # type: ignore[arg-type]
    block = _complete_regions(block, head)
    if not realize:
        return block
    values = tuple(v for *_, v in head.axes if v is not None)
    return BlockRealize(values, where if where is not None else as_expr(True), block)


def _complete_regions(block: Block, head: _Header) -> Block:
    """``block`` with an omitted ``T.reads``/``T.writes`` inferred from its body."""
    if "reads" in head.calls and "writes" in head.calls:
        return block
    reads, writes = infer_regions(block)
    return block.update(
        reads=block.reads if "reads" in head.calls else reads,
        writes=block.writes if "writes" in head.calls else writes,
    )


def _header_stmt(p: _Parser, st: ast.stmt, head: _Header, realize: bool) -> bool:
    """Record ``st`` if it belongs to the block header; False at the first body statement."""
    if (
        isinstance(st, ast.With)
        and len(st.items) == 1
        and p.call_name(st.items[0].context_expr) == "init"
    ):
        ctx = st.items[0].context_expr
        assert isinstance(ctx, ast.Call)
        p.check_args(ctx, "init", 0, 0)
        if head.init is not None:
            p.fail(st, "a block has at most one T.init()")
        head.init = st
        return True
    if isinstance(st, ast.Expr) and p.call_name(st.value) in _SINGLE:
        name = p.call_name(st.value)
        assert name is not None
        assert isinstance(st.value, ast.Call)
        if name in head.calls:
            p.fail(st, f"T.{name} appears twice in one block")
        if name == "where" and not realize:
            p.fail(st, "T.where needs a realized block (drop realize=False)")
        head.calls[name] = st.value
        return True
    if not isinstance(st, ast.Assign) or not isinstance(st.value, ast.Call):
        return False
    name = p.call_name(st.value)
    if name == "axis.remap":
        _remap(p, st, st.value, head, realize)
        return True
    if name in AXES:
        assert name is not None
        target = p.target_name(st)
        call = st.value
        want = 2 if realize else 1
        p.check_args(call, name, want, want)
        dom = p.extent_range(call.args[0])  # domains and bindings: the enclosing scope
        value = p.expr(call.args[1], dom.extent.dtype) if realize else None
        head.axes.append((st, target, AXES[name], dom, value))
        return True
    if name == "alloc_buffer":
        head.allocs.append((st, p.target_name(st), st.value))
        return True
    return False


_REMAP_KINDS = {"S": IterKind.SPATIAL, "R": IterKind.REDUCE}


def _remap(p: _Parser, st: ast.Assign, call: ast.Call, head: _Header, realize: bool) -> None:
    """``vi, vj = T.axis.remap("SR", [i, j])``: iterators bound to enclosing loop variables."""
    p.check_args(call, "axis.remap", 2, 2)
    if not realize:
        p.fail(st, "T.axis.remap binds loop variables; it needs a realized block")
    kinds = p.string(call.args[0], "T.axis.remap's iterator kinds")
    loops = call.args[1]
    if not isinstance(loops, (ast.List, ast.Tuple)):
        p.fail(loops, "T.axis.remap expects a list of loop variables, such as [i, j]")
    if len(st.targets) != 1:
        p.fail(st, "expected the iterator names on the left of '='")
    target = st.targets[0]
    names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
    if not len(kinds) == len(loops.elts) == len(names):
        p.fail(
            call,
            f"T.axis.remap: {len(kinds)} kinds, {len(loops.elts)} loop variables and "
            f"{len(names)} names must agree",
        )
    for kind, loop, name in zip(kinds, loops.elts, names, strict=True):
        if kind not in _REMAP_KINDS:
            p.fail(
                call.args[0], f"T.axis.remap: kind {kind!r} is not 'S' (spatial) or 'R' (reduce)"
            )
        if not isinstance(name, ast.Name):
            p.fail(name, "expected an iterator name")
        var = p.lookup(loop.id) if isinstance(loop, ast.Name) else None
        dom = p.loop_doms.get(id(var)) if isinstance(var, Var) else None
        if not isinstance(var, Var) or dom is None:
            p.fail(
                loop,
                f"T.axis.remap: {ast.unparse(loop)!r} is not the variable of an enclosing loop",
            )
        head.axes.append((st, name.id, _REMAP_KINDS[kind], dom, var))


def _regions(p: _Parser, call: ast.Call | None) -> tuple[BufferRegion, ...]:
    if call is None:
        return ()
    if call.keywords:
        p.fail(call, "T.reads/T.writes take buffer regions only")
    return tuple(_region(p, arg) for arg in call.args)


def _region(p: _Parser, node: ast.expr) -> BufferRegion:
    if isinstance(node, ast.Name):
        return BufferRegion.full(p.buffer(node))
    if not isinstance(node, ast.Subscript):
        p.fail(node, f"expected a buffer region such as A[vi, 0:128], got {ast.unparse(node)!r}")
    buf = p.buffer(node.value)
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    ranges = []
    for d, item in enumerate(items):
        if not isinstance(item, ast.Slice):
            idx = p.expr(item)
            ranges.append(Range(idx, as_expr(1, idx.dtype)))
            continue
        if item.step is not None:
            p.fail(item, "region slices take no step")
        if item.upper is None:
            if item.lower is not None or d >= len(buf.shape):
                p.fail(
                    item, "a region slice needs an upper bound (lo:hi), or ':' for the whole axis"
                )
            ext = buf.shape[d]
            ranges.append(Range(as_expr(0, ext.dtype), ext))
        elif item.lower is None:
            ext = p.expr(item.upper)
            ranges.append(Range(as_expr(0, ext.dtype), ext))
        else:
            ranges.append(p.range_from(item.lower, item.upper))
    return BufferRegion(buf, tuple(ranges))

"""Pure helpers over a PrimFunc's statement tree, shared by every schedule primitive.

Blocks are found by **name** (unique in a PrimFunc) and loops by the **identity** of their
``For.loop_var``. Nothing here mutates IR: rewriting helpers return a new PrimFunc that shares
every untouched subtree (and therefore every untouched loop variable) with the input.

A *path* is the tuple of statements from ``func.body`` down to (excluding) the node, outermost
first. The *scope* of a block is its nearest enclosing block (``root`` for top-level blocks).
Lookups use an index built once per PrimFunc object and kept in an :class:`IndexCache`: the
running schedule's own (see :func:`using_cache`) or, outside a schedule, the thread's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from ..errors import ScheduleError
from ..ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    Expr,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    block_realize,
    substitute,
)
from ._index import IndexCache as IndexCache
from ._index import Path as Path
from ._index import TreeIndex as TreeIndex
from ._index import build_index as build_index
from ._index import index as index
from ._index import stmt_children as stmt_children
from ._index import using_cache as using_cache
from ._index import walk as walk


# ------------------------------------------------------------------------------------------
# lookups
def has_block(func: PrimFunc, name: str) -> bool:
    """True if ``func`` contains a block called ``name``."""
    return name in index(func).blocks


def has_loop(func: PrimFunc, var: Var) -> bool:
    """True if ``func`` contains a loop whose ``loop_var`` is ``var`` (identity)."""
    hit = index(func).loops.get(id(var))
    return hit is not None and hit[0].loop_var is var


def find_block(func: PrimFunc, name: str) -> tuple[BlockRealize, Path]:
    """The BlockRealize of block ``name`` and its path; KeyError when there is none."""
    hit = index(func).blocks.get(name)
    if hit is None:
        raise KeyError(f"no block named {name!r}; blocks are {block_names(func)}")
    return hit


def find_loop(func: PrimFunc, var: Var) -> For:
    """The loop whose ``loop_var`` is ``var`` (identity); KeyError when there is none."""
    return find_loop_path(func, var)[0]


def find_loop_path(func: PrimFunc, var: Var) -> tuple[For, Path]:
    """The loop whose ``loop_var`` is ``var`` and its path; KeyError when there is none."""
    hit = index(func).loops.get(id(var))
    if hit is None or hit[0].loop_var is not var:
        raise KeyError(f"no loop with variable {var.name!r}")
    return hit


def block_names(func: PrimFunc) -> list[str]:
    """Names of all blocks in ``func`` in pre-order."""
    return list(index(func).blocks)


def parent_of(func: PrimFunc, stmt: Stmt) -> Stmt | None:
    """The statement directly containing ``stmt`` (identity) in ``func``; None for the body."""
    return index(func).parents.get(id(stmt))


def loops_above(func: PrimFunc, name: str) -> list[For]:
    """Loops between block ``name`` and its scope block, outermost first."""
    _, path = find_block(func, name)
    return loops_in_path(path)


def loops_in_path(path: Path) -> list[For]:
    """The For nodes of ``path`` below its last Block, outermost first."""
    out: list[For] = []
    for node in reversed(path):
        if isinstance(node, Block):
            break
        if isinstance(node, For):
            out.append(node)
    out.reverse()
    return out


def scope_of(path: Path) -> BlockRealize | None:
    """The BlockRealize of the nearest enclosing block on ``path`` (None at top level)."""
    for node in reversed(path):
        if isinstance(node, BlockRealize):
            return node
    return None


def scope_block_name(func: PrimFunc, name: str) -> str | None:
    """Name of the scope (parent) block of block ``name``; None for a top-level block."""
    _, path = find_block(func, name)
    scope = scope_of(path)
    return None if scope is None else scope.block.name


def root_block(func: PrimFunc) -> BlockRealize | None:
    """The root BlockRealize (``func.body`` when it realizes a block without iterators)."""
    body = func.body
    if isinstance(body, BlockRealize) and not body.block.iter_vars:
        return body
    return None


def child_blocks(stmt: Stmt) -> list[BlockRealize]:
    """BlockRealizes directly under ``stmt`` (not inside other blocks), in program order.

    When ``stmt`` is itself a Block or BlockRealize, its own sub-blocks are returned.
    """
    out: list[BlockRealize] = []
    start = stmt.block if isinstance(stmt, BlockRealize) else stmt

    def go(s: Stmt) -> None:
        if isinstance(s, BlockRealize):
            out.append(s)
            return
        for c in stmt_children(s):
            go(c)

    for c in stmt_children(start):
        go(c)
    return out


def blocks_under(stmt: Stmt) -> list[BlockRealize]:
    """Every BlockRealize under ``stmt`` at any depth, in pre-order."""
    return [n for n, _ in walk(stmt) if isinstance(n, BlockRealize)]


def buffers_read(block: Block) -> list[Buffer]:
    """Distinct buffers in ``block.reads``, in order."""
    return _distinct(r.buffer for r in block.reads)


def buffers_written(block: Block) -> list[Buffer]:
    """Distinct buffers in ``block.writes``, in order."""
    return _distinct(r.buffer for r in block.writes)


def _distinct(bufs: Iterator[Buffer]) -> list[Buffer]:
    out: list[Buffer] = []
    for b in bufs:
        if all(b is not x for x in out):
            out.append(b)
    return out


def sibling_blocks(func: PrimFunc, name: str) -> list[BlockRealize]:
    """Blocks in the same scope as block ``name`` (itself included), in program order."""
    _, path = find_block(func, name)
    scope = scope_of(path)
    if scope is None:
        return child_blocks_of_body(func.body)
    return child_blocks(scope)


def child_blocks_of_body(body: Stmt) -> list[BlockRealize]:
    """Top-level blocks of a function body (the body itself when it is a BlockRealize)."""
    if isinstance(body, BlockRealize):
        return [body]
    out: list[BlockRealize] = []

    def go(s: Stmt) -> None:
        if isinstance(s, BlockRealize):
            out.append(s)
            return
        for c in stmt_children(s):
            go(c)

    go(body)
    return out


def producers(func: PrimFunc, name: str) -> list[str]:
    """Blocks in the same scope that write a buffer block ``name`` reads (program order)."""
    return _linked_siblings(func, name, buffers_read, buffers_written)


def consumers(func: PrimFunc, name: str) -> list[str]:
    """Blocks in the same scope that read a buffer block ``name`` writes (program order)."""
    return _linked_siblings(func, name, buffers_written, buffers_read)


def _linked_siblings(
    func: PrimFunc,
    name: str,
    mine: Callable[[Block], list[Buffer]],
    theirs: Callable[[Block], list[Buffer]],
) -> list[str]:
    """Sibling blocks of ``name`` whose ``theirs`` buffers meet block ``name``'s ``mine``."""
    target = find_block(func, name)[0].block
    bufs = mine(target)
    return [
        r.block.name
        for r in sibling_blocks(func, name)
        if r.block is not target and any(b is w for b in bufs for w in theirs(r.block))
    ]


def fresh_name(func: PrimFunc, base: str) -> str:
    """``base`` if no block has that name, else ``base_1``, ``base_2``, ... (first unused)."""
    names = index(func).blocks
    if base not in names:
        return base
    k = 1
    while f"{base}_{k}" in names:
        k += 1
    return f"{base}_{k}"


# ------------------------------------------------------------------------------------------
# rewriting
def replace_stmts(func: PrimFunc, mapping: Mapping[int, Stmt | None]) -> PrimFunc:
    """Replace statements by identity (``id(old) -> new``); ``None`` removes the statement.

    Removing a statement also removes enclosing loops/lets that become empty. A replacement
    that is a SeqStmt placed inside a SeqStmt is flattened. Untouched subtrees are shared.
    """
    if not mapping:
        return func
    idx = index(func)
    live: set[int] = set()
    for key in mapping:
        node = idx.parents.get(key)
        while node is not None and id(node) not in live:
            live.add(id(node))
            node = idx.parents.get(id(node))
    new_body = _rebuild(func.body, mapping, live if len(live) or id(func.body) in mapping else None)
    if new_body is None:
        raise ScheduleError("replace", "the rewrite would leave the function body empty")
    return func.update(body=new_body)


def replace_stmt(func: PrimFunc, old: Stmt, new: Stmt | None) -> PrimFunc:
    """Replace the statement ``old`` (identity) by ``new`` (``None``: remove it)."""
    return replace_stmts(func, {id(old): new})


def _rebuild(
    s: Stmt, mapping: Mapping[int, Stmt | None], live: set[int] | None = None
) -> Stmt | None:
    key = id(s)
    if key in mapping:
        return mapping[key]
    if live is not None and key not in live:
        return s
    if isinstance(s, For | LetStmt | Allocate):
        body = _rebuild(s.body, mapping, live)
        if body is None:
            return None
        return s.update(body=body)
    if isinstance(s, SeqStmt):
        items = [_rebuild(c, mapping, live) for c in s.stmts]
        if all(a is b for a, b in zip(items, s.stmts, strict=True)):
            return s
        flat: list[Stmt] = []
        for it in items:
            if isinstance(it, SeqStmt):
                flat.extend(it.stmts)
            elif it is not None:
                flat.append(it)
        if not flat:
            return None
        return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))
    if isinstance(s, BlockRealize):
        blk = _rebuild(s.block, mapping, live)
        if blk is None:
            return None
        assert isinstance(blk, Block)
        return s.update(block=blk)
    if isinstance(s, Block):
        body = _rebuild(s.body, mapping, live)
        init = _rebuild(s.init, mapping, live) if s.init is not None else None
        if body is None:
            return None
        return s.update(body=body, init=init)
    if isinstance(s, IfThenElse):
        then = _rebuild(s.then_case, mapping, live)
        other = _rebuild(s.else_case, mapping, live) if s.else_case is not None else None
        if then is None:
            return None
        return s.update(then_case=then, else_case=other)
    return s


def substitute_outside_blocks(stmt: Stmt, vmap: Mapping[Var, Expr]) -> Stmt:
    """Substitute loop variables under ``stmt`` without entering block bodies.

    Rewrites loop ranges, block bindings and predicates, and any non-block statement; a
    block's own body and regions refer to its iterators, not to enclosing loop variables.
    """
    keys = {id(k) for k in vmap}

    def expr(e: Expr) -> Expr:
        if isinstance(e, IntImm):
            return e
        if isinstance(e, Var):
            return vmap.get(e, e) if id(e) in keys else e
        out: Expr = substitute(e, vmap)
        return out

    def go(s: Stmt) -> Stmt:
        if isinstance(s, For):
            return s.update(min=expr(s.min), extent=expr(s.extent), body=go(s.body))
        if isinstance(s, SeqStmt):
            items = tuple(go(c) for c in s.stmts)
            return s if all(a is b for a, b in zip(items, s.stmts, strict=True)) else SeqStmt(items)
        if isinstance(s, BlockRealize):
            vals = tuple(expr(v) for v in s.iter_values)
            if all(a is b for a, b in zip(vals, s.iter_values, strict=True)):
                vals = s.iter_values
            return s.update(iter_values=vals, predicate=expr(s.predicate))
        out: Stmt = substitute(s, vmap)
        return out

    return go(stmt)


def ensure_root(func: PrimFunc) -> PrimFunc:
    """``func`` with its body wrapped in a ``root`` block when it has none; else ``func``."""
    if root_block(func) is not None:
        return func
    name = "root" if not has_block(func, "root") else fresh_name(func, "root")
    root = Block(name, (), (), (), func.body)
    return func.update(body=block_realize(root))


# ------------------------------------------------------------------------------------------
# error fragments
def loop_line(loop: For) -> str:
    """One line describing ``loop`` as script (``for i in range(128):``)."""
    from ..ir import ForKind, IntImm

    ext = _short(loop.extent)
    lo = loop.min
    rng = ext if isinstance(lo, IntImm) and lo.value == 0 else f"{_short(lo)}, {_short(lo)} + {ext}"
    if loop.kind is ForKind.SERIAL:
        return f"for {loop.loop_var.name} in range({rng}):"
    if loop.kind is ForKind.THREAD_BINDING:
        return f'for {loop.loop_var.name} in thread_binding({rng}, "{loop.thread}"):'
    return f"for {loop.loop_var.name} in {loop.kind.value}({rng}):"


def _short(e: object) -> str:
    from ..ir import IntImm, Var

    if isinstance(e, IntImm):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    return "..."


def outline(
    stmt: Stmt,
    marks: Mapping[int, str] | None = None,
    *,
    max_depth: int = 6,
    max_lines: int = 14,
) -> str:
    """A compact script-like outline of ``stmt`` (loops and blocks only) for error messages.

    ``marks`` maps ``id(node)`` of loops/blocks/realizes to a comment shown on their line
    (``# <- target loop``).
    """
    marks = marks or {}
    lines: list[str] = []

    def mark(*nodes: object) -> str:
        for n in nodes:
            text = marks.get(id(n))
            if text:
                return f"  # {text}"
        return ""

    def go(s: Stmt, depth: int) -> None:
        if len(lines) >= max_lines:
            return
        pad = "    " * depth
        if isinstance(s, For):
            lines.append(pad + loop_line(s) + mark(s, s.loop_var))
            if depth < max_depth:
                go(s.body, depth + 1)
        elif isinstance(s, BlockRealize):
            inner = child_blocks(s)
            tail = ":" if inner else ": ..."
            lines.append(f'{pad}with block("{s.block.name}"){tail}' + mark(s, s.block))
            if depth < max_depth:
                for c in stmt_children(s.block):
                    go(c, depth + 1)
        elif isinstance(s, SeqStmt):
            for c in s.stmts:
                go(c, depth)
        elif isinstance(s, Block):
            go(s.body, depth)
        elif isinstance(s, IfThenElse | LetStmt | Allocate):
            lines.append(f"{pad}{type(s).__name__}: ...")
            for c in stmt_children(s):
                go(c, depth + 1)

    go(stmt, 0)
    if len(lines) >= max_lines:
        lines.append("...")
    return "\n".join(lines)


def names_of(items: Sequence[str]) -> str:
    """``"A", "B"`` style list for messages."""
    return ", ".join(f'"{n}"' for n in items)

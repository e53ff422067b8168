"""The lookup index of a PrimFunc's statement tree, and the caches that keep it.

Package-private (re-exported by :mod:`._tree`). A :class:`TreeIndex` maps block names, loop
variables (by identity) and statements (by identity) to their nodes, paths and parents. It is
built once per PrimFunc object and kept in an :class:`IndexCache`: the running schedule's own
(made active with :func:`using_cache`) or, outside a schedule, the current thread's. No cache
is shared between threads, and an entry is only returned for the very function it was built
from.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

from ..ir import Allocate, Block, BlockRealize, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt

Path = tuple[Stmt, ...]


# ------------------------------------------------------------------------------------------
# children and traversal
def stmt_children(stmt: Stmt) -> tuple[Stmt, ...]:
    """Direct child statements of ``stmt`` in execution order (a Block's init comes first)."""
    if isinstance(stmt, For | LetStmt | Allocate):
        return (stmt.body,)
    if isinstance(stmt, SeqStmt):
        return stmt.stmts
    if isinstance(stmt, BlockRealize):
        return (stmt.block,)
    if isinstance(stmt, Block):
        return (stmt.init, stmt.body) if stmt.init is not None else (stmt.body,)
    if isinstance(stmt, IfThenElse):
        if stmt.else_case is not None:
            return (stmt.then_case, stmt.else_case)
        return (stmt.then_case,)
    return ()


def walk(stmt: Stmt, path: Path = ()) -> Iterator[tuple[Stmt, Path]]:
    """Yield ``(node, path)`` for every statement under ``stmt`` (pre-order, ``stmt`` first).

    An explicit stack, not nested generators: each node is yielded once instead of through
    every generator above it (rule scheduling walks every function after each primitive)."""
    stack: list[tuple[Stmt, Path]] = [(stmt, path)]
    while stack:
        node, at = stack.pop()
        yield node, at
        children = stmt_children(node)
        if children:
            sub = (*at, node)
            stack.extend((child, sub) for child in reversed(children))


@dataclass(frozen=True, slots=True)
class TreeIndex:
    """Lookup tables of one PrimFunc: blocks by name, loops by variable, parents by identity."""

    func: PrimFunc
    blocks: Mapping[str, tuple[BlockRealize, Path]]
    loops: Mapping[int, tuple[For, Path]]
    parents: Mapping[int, Stmt]


def build_index(func: PrimFunc) -> TreeIndex:
    """A fresh :class:`TreeIndex` of ``func`` (one walk of its body, the :func:`walk` loop
    written out: it runs after every primitive that changes the function)."""
    blocks: dict[str, tuple[BlockRealize, Path]] = {}
    loops: dict[int, tuple[For, Path]] = {}
    parents: dict[int, Stmt] = {}
    stack: list[tuple[Stmt, Path]] = [(func.body, ())]
    pop, push = stack.pop, stack.extend
    while stack:
        node, path = pop()
        kind = type(node)
        if path:
            parents[id(node)] = path[-1]
        if kind is BlockRealize:
            realize = cast(BlockRealize, node)
            blocks[realize.block.name] = (realize, path)
            push(((realize.block, (*path, node)),))
            continue
        if kind is For:
            loop = cast(For, node)
            loops[id(loop.loop_var)] = (loop, path)
            push(((loop.body, (*path, node)),))
            continue
        children = stmt_children(node)
        if children:
            sub = (*path, node)
            push((child, sub) for child in reversed(children))
    return TreeIndex(func, blocks, loops, parents)


class IndexCache:
    """A few :class:`TreeIndex` es, by function identity, and the schedule's name memo.

    An entry holds its function, so while it is cached no other object can take its ``id``,
    and a hit is also checked by identity. Every operation is one dict operation (atomic
    under the GIL), so a cache touched by several threads never raises. Each
    :class:`~tilecraft.schedule.ScheduleState` owns one; each thread has a default one for
    pure builders called outside a schedule.

    Parameters
    ----------
    size
        Entries kept; when full the cache is emptied (a schedule's working set is its
        current function and the one before).

    Attributes
    ----------
    names
        The memo of :mod:`.primitives._names` while this cache is active: the names under
        each node of the schedule's functions, dropped with the schedule (a memo outliving
        its schedule kept every version of every function alive, and the garbage collector
        scanned them).
    """

    __slots__ = ("_entries", "_size", "names")

    def __init__(self, size: int = 8) -> None:
        self._entries: dict[int, TreeIndex] = {}
        self._size = size
        self.names: dict[int, Any] = {}

    def get(self, func: PrimFunc) -> TreeIndex:
        """The index of ``func`` (built on a miss)."""
        hit = self._entries.get(id(func))
        if hit is not None and hit.func is func:
            return hit
        idx = build_index(func)
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[id(func)] = idx
        return idx

    def __len__(self) -> int:
        return len(self._entries)


_ACTIVE: ContextVar[IndexCache | None] = ContextVar("tilecraft_schedule_index", default=None)
_THREAD = threading.local()


def _thread_cache() -> IndexCache:
    cache: IndexCache | None = getattr(_THREAD, "cache", None)
    if cache is None:
        cache = IndexCache(16)
        _THREAD.cache = cache
    return cache


@contextmanager
def using_cache(cache: IndexCache) -> Iterator[None]:
    """Make :func:`index` use ``cache`` inside the ``with`` (in this thread or task only)."""
    token = _ACTIVE.set(cache)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_cache() -> IndexCache | None:
    """The cache :func:`using_cache` made active (a running schedule's), or None."""
    return _ACTIVE.get()


def index(func: PrimFunc) -> TreeIndex:
    """The cached :class:`TreeIndex` of ``func``: from the cache made active by
    :func:`using_cache` (a schedule's own), else from this thread's."""
    cache = _ACTIVE.get()
    return (cache if cache is not None else _thread_cache()).get(func)

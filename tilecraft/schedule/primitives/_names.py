"""The variable and buffer names a statement tree uses, remembered per node.

Package-private. Primitives pick fresh loop, iterator and buffer names by avoiding every name
the function already uses; walking the whole function for each pick was the largest cost of
rule scheduling. A schedule rebuilds only the statements on the path to what it changed, so
the names under each statement (and under each expression, region or buffer a statement
holds directly) are remembered by identity, the node held by its entry so that no other
object can take its ``id``: a later function reuses the entries of the nodes it shares with
the one before. Inside a primitive the memo is the running schedule's (it goes with the
schedule); elsewhere each thread has its own.
"""

from __future__ import annotations

import threading

from ...ir import Buffer, Node, Stmt, Var
from ...ir.visitor import iter_children, walk
from .._index import active_cache

Names = tuple[frozenset[str], frozenset[str]]  # (variable names, buffer names)
_LIMIT = 100_000  # entries kept; when full the memo is emptied
_THREAD = threading.local()


def _memo() -> dict[int, tuple[Node, Names]]:
    cache = active_cache()
    if cache is not None:
        if len(cache.names) >= _LIMIT:
            cache.names.clear()
        return cache.names
    memo: dict[int, tuple[Node, Names]] | None = getattr(_THREAD, "memo", None)
    if memo is None or len(memo) >= _LIMIT:
        memo = {}
        _THREAD.memo = memo
    return memo


def used_var_names(stmt: Stmt) -> frozenset[str]:
    """Names of the variables used anywhere under ``stmt`` (the names ``collect_vars`` gives)."""
    return _names(stmt)[0]


def used_buffer_names(stmt: Stmt) -> frozenset[str]:
    """Names of the buffers anywhere under ``stmt``."""
    return _names(stmt)[1]


def _leaf_names(node: Node, memo: dict[int, tuple[Node, Names]]) -> Names:
    """The names under a node a statement holds directly (an expression, region, buffer)."""
    hit = memo.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    vs: set[str] = set()
    bs: set[str] = set()
    # a buffer is shared by every region and access of it: its names are remembered once
    for n in walk(node, prune=lambda n: isinstance(n, Buffer) and n is not node):
        if isinstance(n, Var):
            vs.add(n.name)
        elif isinstance(n, Buffer):
            if n is node:
                bs.add(n.name)
            else:
                sub = _leaf_names(n, memo)
                vs |= sub[0]
                bs |= sub[1]
    out = (frozenset(vs), frozenset(bs))
    memo[id(node)] = (node, out)
    return out


def _names(stmt: Stmt) -> Names:
    """Statements are visited children first with an explicit stack (any depth works)."""
    memo = _memo()
    stack: list[tuple[Node, bool]] = [(stmt, False)]
    while stack:
        node, expanded = stack.pop()
        hit = memo.get(id(node))
        if hit is not None and hit[0] is node:
            continue
        kids = list(iter_children(node))
        if not expanded:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if isinstance(k, Stmt))
            continue
        vs: set[str] = set()
        bs: set[str] = set()
        for k in kids:
            sub = memo[id(k)][1] if isinstance(k, Stmt) else _leaf_names(k, memo)
            vs |= sub[0]
            bs |= sub[1]
        memo[id(node)] = (node, (frozenset(vs), frozenset(bs)))
    return memo[id(stmt)][1]

"""``tilecraft.ir.walk``: pre-order, each buffer once, prunable, lazy, any depth."""

from __future__ import annotations

import sys

import tilecraft as tc
from tilecraft.ir import (
    Add,
    Buffer,
    Evaluate,
    For,
    ForKind,
    Node,
    PrimFunc,
    Stmt,
    Var,
    const,
    walk,
)
from tilecraft.ir.visitor import iter_children


def _func() -> PrimFunc:
    a = tc.te.placeholder((8, 4), "float32", name="A")
    r = tc.te.reduce_axis((0, 4), name="k")
    b = tc.te.compute((8,), lambda i: tc.te.sum(a[i, r] * 2.0, axis=r), name="B")
    c = tc.te.compute((8,), lambda i: b[i] + 1.0, name="C")
    return tc.te.create_prim_func([a, c])


def _recursive_preorder(node: Node, seen: set[int], out: list[Node]) -> None:
    if isinstance(node, Buffer):
        if id(node) in seen:
            return
        seen.add(id(node))
    out.append(node)
    for child in iter_children(node):
        _recursive_preorder(child, seen, out)


def test_walk_is_the_recursive_preorder() -> None:
    func = _func()
    expected: list[Node] = []
    _recursive_preorder(func, set(), expected)
    got = list(walk(func))
    assert [id(n) for n in got] == [id(n) for n in expected]
    assert got[0] is func
    buffers = [n for n in got if isinstance(n, Buffer)]
    assert len({id(b) for b in buffers}) == len(buffers)  # each buffer once


def test_walk_finds_every_block_in_order() -> None:
    names = [n.name for n in walk(_func().body) if isinstance(n, tc.ir.Block)]
    assert names == ["root", "B", "C"]


def test_prune_stops_the_descent_but_yields_the_node() -> None:
    func = _func()
    stmts_only = list(walk(func.body, prune=lambda n: not isinstance(n, Stmt)))
    everything = list(walk(func.body))
    assert len(stmts_only) < len(everything)
    statements = [n for n in everything if isinstance(n, Stmt)]
    assert [id(n) for n in stmts_only if isinstance(n, Stmt)] == [id(n) for n in statements]
    # a pruned node's children are not walked: no expression below a statement's own fields
    assert not any(isinstance(n, tc.ir.BufferLoad) for n in stmts_only)


def test_walk_is_lazy() -> None:
    seen: list[Node] = []

    def prune(n: Node) -> bool:
        seen.append(n)
        return False

    first_for = next(n for n in walk(_func().body, prune=prune) if isinstance(n, For))
    assert isinstance(first_for, For)
    assert len(seen) < len(list(walk(_func().body)))


def test_walk_has_no_recursion_limit() -> None:
    depth = sys.getrecursionlimit() * 5
    body: Stmt = Evaluate(const(0, "int32"))
    loop_vars = []
    for n in range(depth):
        v = Var(f"i{n}", "int32")
        loop_vars.append(v)
        body = For(v, 0, 1, ForKind.SERIAL, body)
    loops = [n for n in walk(body) if isinstance(n, For)]
    assert len(loops) == depth
    assert loops[0].loop_var is loop_vars[-1]
    assert loops[-1].loop_var is loop_vars[0]
    expr = Var("x", "int32")
    for _ in range(depth):
        expr = Add(expr, const(1, "int32"))
    assert sum(isinstance(n, Add) for n in walk(expr)) == depth

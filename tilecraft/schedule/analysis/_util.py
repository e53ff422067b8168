"""Package-private helpers over expressions and blocks shared by the analysis modules."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ...errors import ScheduleError
from ...ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    Cast,
    Expr,
    For,
    IfThenElse,
    LetStmt,
    Node,
    SeqStmt,
    Stmt,
    Var,
    structural_equal,
)
from ...ir.visitor import iter_children


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (pre-order), without descending into buffers' shapes.

    Iterative, so deep expressions (thousands of nested terms) cannot overflow the stack.
    """
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, Buffer):
            stack.extend(reversed(list(iter_children(n))))


def blocks_under(stmt: Stmt) -> list[Block]:
    """Every Block under ``stmt`` at any depth (statements only; iterative), in pre-order."""
    out: list[Block] = []
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, Block):
            out.append(s)
            kids: tuple[Stmt, ...] = (s.body,) if s.init is None else (s.init, s.body)
        elif isinstance(s, BlockRealize):
            kids = (s.block,)
        elif isinstance(s, For | LetStmt | Allocate):
            kids = (s.body,)
        elif isinstance(s, SeqStmt):
            kids = s.stmts
        elif isinstance(s, IfThenElse):
            kids = (s.then_case,) if s.else_case is None else (s.then_case, s.else_case)
        else:
            kids = ()
        stack.extend(reversed(kids))
    return out


def loads_in(expr: Expr) -> list[BufferLoad]:
    """Every BufferLoad under ``expr``, in pre-order."""
    return [n for n in walk(expr) if isinstance(n, BufferLoad)]


def strip_casts(expr: Expr) -> Expr:
    """``expr`` without the Casts wrapped around it."""
    while isinstance(expr, Cast):
        expr = expr.value
    return expr


def vars_of(expr: Expr, among: Sequence[Var]) -> list[Var]:
    """The variables of ``among`` that ``expr`` uses, in the order of ``among``."""
    used = {id(n) for n in walk(expr) if isinstance(n, Var)}
    return [v for v in among if id(v) in used]


def same_exprs(a: Sequence[Expr], b: Sequence[Expr]) -> bool:
    """True when two index tuples are the same expressions (variables by identity)."""
    if len(a) != len(b):
        return False
    return all(x is y or structural_equal(x, y) for x, y in zip(a, b, strict=True))


def expect(
    where: str, value: object, kinds: type | tuple[type, ...], arg: str, expected: str
) -> None:
    """Raise ScheduleError unless ``value`` is an instance of ``kinds`` (misuse of the API)."""
    if not isinstance(value, kinds):
        raise ScheduleError(
            where, f"argument {arg!r}: expected {expected}, got {type(value).__name__}"
        )

"""Package-private helpers over expressions and blocks shared by the analysis modules."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ...errors import ScheduleError
from ...ir import Buffer, BufferLoad, Cast, Expr, Node, Var, structural_equal
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

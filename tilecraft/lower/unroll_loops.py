"""Honour the unroll pragmas a schedule sets on loops.

Before: blocks lowered to loops. A loop may carry the annotations
``pragma_auto_unroll_max_step`` (an int ``N``) and ``pragma_unroll_explicit`` (0/1, default 0),
set with ``Schedule.annotate`` (usually on an outer loop, bound or not).
After:  under such a loop (the loop included), every serial loop with a constant range whose
*steps* are at most ``N`` is unrolled, and the annotations are gone. The steps of a loop are the
number of statements one thread executes in it: its extent times the steps of its body, where
a sequence adds its parts' steps and a thread-bound loop counts its body once (its iterations
run on other threads). With ``pragma_unroll_explicit`` set, an unrolled loop is expanded in the
IR (one copy of the body per iteration, the loop variable replaced by its value) when its body
declares nothing (no allocation, ``let`` or thread-bound loop, whose copies would clash in one
C scope); otherwise it becomes an :data:`~tilecraft.ir.ForKind.UNROLLED` loop, which the C
backend emits with ``#pragma GCC unroll`` and CUDA with ``#pragma unroll``. Meaning is
unchanged.
"""

from __future__ import annotations

import math

from ..ir import (
    Allocate,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    LetStmt,
    Mutator,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    post_order_visit,
    seq,
    substitute,
)
from ..ir.transform import FunctionPass

AUTO_UNROLL = "pragma_auto_unroll_max_step"
"""Loop annotation: unroll the loops under it with at most this many steps."""
UNROLL_EXPLICIT = "pragma_unroll_explicit"
"""Loop annotation: expand unrolled loops in the IR instead of asking the compiler."""


def steps(s: Stmt) -> float:
    """Statements one thread executes in ``s`` (``inf`` when a loop extent is not constant)."""
    if isinstance(s, For):
        inner = steps(s.body)
        if s.kind is ForKind.THREAD_BINDING:
            return inner
        return s.extent.value * inner if isinstance(s.extent, IntImm) else math.inf
    if isinstance(s, SeqStmt):
        return sum(steps(c) for c in s.stmts)
    if isinstance(s, IfThenElse):
        return steps(s.then_case) + (steps(s.else_case) if s.else_case is not None else 0)
    if isinstance(s, (Allocate, LetStmt)):
        return steps(s.body)
    return 1


def _declares(s: Stmt) -> bool:
    found = False

    def fn(n: Node) -> None:
        nonlocal found
        found = (
            found
            or isinstance(n, (Allocate, LetStmt))
            or (isinstance(n, For) and n.kind is ForKind.THREAD_BINDING)
        )

    post_order_visit(s, fn)
    return found


class _Unroller(Mutator):
    def __init__(self, roll: bool = False) -> None:
        super().__init__()
        self.roll = roll
        self.scopes: list[tuple[int, bool]] = []  # (max steps, explicit) of enclosing pragmas

    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        ann = loop.annotations
        scope: tuple[int, bool] | None = None
        if AUTO_UNROLL in ann:
            value = ann[AUTO_UNROLL]
            max_step = value if isinstance(value, int) and not isinstance(value, bool) else 0
            scope = (max_step, bool(ann.get(UNROLL_EXPLICIT, 0)))
            loop = loop.update(annotations=ann.without(AUTO_UNROLL).without(UNROLL_EXPLICIT))
            self.scopes.append(scope)
        new: For = self.generic_visit(loop)
        if scope is not None:
            self.scopes.pop()
        if self.roll:
            return new.update(kind=ForKind.SERIAL) if new.kind is ForKind.UNROLLED else new
        active = scope or (self.scopes[-1] if self.scopes else None)
        return new if active is None else self._unroll(new, *active)

    def _unroll(self, loop: For, max_step: int, explicit: bool) -> Stmt:
        if (
            loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED)
            or not isinstance(loop.min, IntImm)
            or not isinstance(loop.extent, IntImm)
            or steps(loop) > max_step
        ):
            return loop
        if explicit and not _declares(loop.body):
            lo = loop.min.value
            return seq(
                *(
                    substitute(loop.body, {loop.loop_var: IntImm(loop.loop_var.dtype, lo + k)})
                    for k in range(loop.extent.value)
                )
            )
        return loop.update(kind=ForKind.UNROLLED)


class UnrollLoops(FunctionPass):
    """Unroll the loops under ``pragma_auto_unroll_max_step`` (see the module docstring).

    Parameters
    ----------
    roll
        Consume the pragmas but keep every loop rolled, ``unroll`` ones included (GPU
        emulation on the CPU, where the C compiler's time on fully unrolled register tiles
        matters and the loops' speed does not; the meaning is the same).
    """

    def __init__(self, roll: bool = False) -> None:
        self.roll = roll

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with the pragmas applied and removed."""
        return func.update(body=_Unroller(self.roll).visit(func.body))

"""Run a parallel loop on threads only when it has the work to pay for them.

Before: a flat CPU function (after :class:`~tilecraft.lower.FlattenBuffer`) whose schedule
marked loops ``parallel``. After: a parallel loop with fewer than two iterations, or whose
work is a constant below ``min_work``, is serial; one whose work depends on a symbolic
extent carries :data:`PARALLEL_MIN_WORK_ATTR` ``= min_work``, and the C emitter opens its
parallel region only when :func:`parallel_condition` holds at run time (``#pragma omp
parallel for if(...)``: two iterations or more, and the work). Meaning is unchanged: the
iterations of a parallel loop are independent, so running them on one thread computes the
same values.

The work of a loop is the number of statements one thread would execute in it: each store,
call or statement counts 1, a loop multiplies by its extent, a branch counts both sides. A
rule schedules for a shape, not for a machine's threads, and marks the outer loop parallel
whatever the size (a 4 x 64 layer norm, a 5-token prefill's projections): there, opening a
parallel region costs more than the loop itself (a few microseconds on a quiet machine), and
on a machine whose other cores are busy each region waits for a preempted thread for a
scheduler time slice: measured on 2 cores with the other one busy, the small TinyLlama-style
prefill layer (20 kernels of 1-5 us) ran 25-120 ms a call instead of 75 us. ``min_work``
defaults to :data:`MIN_PARALLEL_WORK` (32768 statements: about 10-30 us of scalar work, well
above the cost of a parallel region).
"""

from __future__ import annotations

from ..arith import Analyzer
from ..errors import LowerError
from ..ir import (
    Allocate,
    And,
    Expr,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    LetStmt,
    Mutator,
    PrimFunc,
    SeqStmt,
    Stmt,
    as_expr,
    cast,
    dtype,
)
from ..ir.transform import FunctionPass

MIN_PARALLEL_WORK = 32768
"""Statements a parallel loop must execute for its iterations to go to threads."""

PARALLEL_MIN_WORK_ATTR = "tc.parallel_min_work"
"""Annotation of a parallel loop whose work is symbolic: the work it needs to run on threads
(the C emitter's ``if`` clause compares :func:`parallel_work` with it)."""


def _work(s: Stmt) -> int | Expr:
    """Statements one thread executes in ``s`` (an int when every extent is constant)."""
    if isinstance(s, For):
        return _mul(s.extent, _work(s.body))
    if isinstance(s, SeqStmt):
        total: int | Expr = 0
        for c in s.stmts:
            total = _add(total, _work(c))
        return total
    if isinstance(s, IfThenElse):
        other = _work(s.else_case) if s.else_case is not None else 0
        return _add(_work(s.then_case), other)
    if isinstance(s, (Allocate, LetStmt)):
        return _work(s.body)
    return 1


def _int64(e: int | Expr) -> Expr:
    x = as_expr(e) if isinstance(e, int) else e
    return x if str(x.dtype) == "int64" else cast(x, "int64")


def _mul(extent: Expr, body: int | Expr) -> int | Expr:
    if isinstance(extent, IntImm) and isinstance(body, int):
        return extent.value * body
    return _int64(extent) * _int64(body)


def _add(a: int | Expr, b: int | Expr) -> int | Expr:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return _int64(a) + _int64(b)


def parallel_work(loop: For) -> Expr:
    """The statements the parallel ``loop`` executes, as an ``int64`` expression of the
    function's symbolic extents (see the module docstring)."""
    work = _work(loop)
    return IntImm(dtype("int64"), work) if isinstance(work, int) else Analyzer().simplify(work)


def parallel_condition(loop: For, min_work: int) -> Expr:
    """When the parallel ``loop`` should run on threads: at least two iterations to share
    and ``min_work`` statements (:func:`parallel_work`)."""
    ana = Analyzer()
    enough = parallel_work(loop) >= IntImm(dtype("int64"), min_work)
    return ana.simplify(And(_int64(loop.extent) >= IntImm(dtype("int64"), 2), enough))


class _Grain(Mutator):
    def __init__(self, min_work: int) -> None:
        super().__init__()
        self.min_work = min_work

    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        if loop.kind is not ForKind.PARALLEL:
            out: Stmt = self.generic_visit(loop)
            return out
        work = _work(loop)  # the loop's body is left alone: an inner parallel loop is its own
        one = isinstance(loop.extent, IntImm) and loop.extent.value < 2
        if one or (isinstance(work, int) and work < self.min_work):
            return loop.update(kind=ForKind.SERIAL)  # no work to share, or too little
        if isinstance(work, int):
            return loop
        return loop.update(
            annotations=loop.annotations.with_item(PARALLEL_MIN_WORK_ATTR, self.min_work)
        )


class ParallelGrain(FunctionPass):
    """Keep threads for parallel loops with the work to pay for them (module docstring).

    Parameters
    ----------
    min_work
        Statements a parallel loop must execute to run on threads (default
        :data:`MIN_PARALLEL_WORK`; 0 keeps every parallel loop parallel).
    """

    def __init__(self, min_work: int = MIN_PARALLEL_WORK) -> None:
        if isinstance(min_work, bool) or not isinstance(min_work, int) or min_work < 0:
            raise LowerError(f"ParallelGrain: min_work must be an int >= 0, got {min_work!r}")
        self.min_work = min_work

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """``func`` with its small parallel loops serial and its symbolic ones annotated."""
        if self.min_work == 0:
            return func
        body = _Grain(self.min_work).visit(func.body)
        return func if body is func.body else func.update(body=body)

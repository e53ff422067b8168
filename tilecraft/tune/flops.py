"""Floating-point operations of a function, for the tuner's speed column (GFLOP/s).

Every float arithmetic operation (``+ - * /``, ``min``, ``max``, a math intrinsic) in a
store's value counts once per execution of the store, that is times the product of the
constant extents of the loops around it. A reduction's init statement counts nothing (it
stores a constant); a loop with a symbolic extent counts once (its extent is not known here).
"""

from __future__ import annotations

from ..ir import BinaryOp, Block, BufferStore, Call, Expr, For, IntImm, PrimFunc
from ..ir.visitor import Visitor


class _Count(Visitor):
    """Sums float operations weighted by trip counts."""

    def __init__(self) -> None:
        super().__init__()
        self.trips = 1
        self.total = 0

    def visit_For(self, node: For) -> None:  # noqa: N802
        """Scale everything inside by the loop's constant extent."""
        self.visit(node.min)
        self.visit(node.extent)
        extent = node.extent.value if isinstance(node.extent, IntImm) else 1
        outer, self.trips = self.trips, self.trips * max(int(extent), 0)
        self.visit(node.body)
        self.trips = outer

    def visit_Block(self, node: Block) -> None:  # noqa: N802
        """The body only: a reduction's init stores a constant."""
        self.visit(node.body)

    def visit_BufferStore(self, node: BufferStore) -> None:  # noqa: N802
        """Count the value's float operations once per execution."""
        self.total += self.trips * _ops(node.value)


class _Ops(Visitor):
    """Counts float operations in one expression."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def visit_BinaryOp(self, node: BinaryOp) -> None:  # noqa: N802
        """One operation when it computes a float."""
        self.count += int(node.dtype.is_float)
        self.generic_visit(node)

    def visit_Call(self, node: Call) -> None:  # noqa: N802
        """A float intrinsic counts one."""
        self.count += int(node.dtype.is_float)
        self.generic_visit(node)


def _ops(value: Expr) -> int:
    counter = _Ops()
    counter.visit(value)
    return counter.count


def flop_count(func: PrimFunc) -> int:
    """Float operations of one call of ``func`` (see the module docstring for what counts).

    Parameters
    ----------
    func
        A PrimFunc, scheduled or not.

    Returns
    -------
    int
        The count; 0 for a function computing no float arithmetic.
    """
    counter = _Count()
    counter.visit(func.body)
    return counter.total

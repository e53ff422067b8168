"""Postprocessors that only check: no dynamic loops, no reduction recomputed under a loop it
does not depend on, GPU code within the device's limits."""

from __future__ import annotations

from ...errors import BuildError, CodegenError, LowerError
from ...ir import (
    BlockRealize,
    For,
    IntImm,
    IterKind,
    Node,
    PrimFunc,
    Var,
    Visitor,
    collect_vars,
    post_order_visit,
)
from ...runtime.backend import backend_of
from ...schedule import Schedule
from ...target import Target, as_target
from .base import Postproc


def has_dynamic_loop(func: PrimFunc) -> bool:
    """True when a loop of ``func`` has an extent that is not a constant."""
    found = False

    def visit(node: Node) -> None:
        nonlocal found
        if isinstance(node, For) and not isinstance(node.extent, IntImm):
            found = True

    post_order_visit(func.body, visit)
    return found


class DisallowDynamicLoop(Postproc):
    """Drop candidates with a loop of symbolic extent (the search cannot size them)."""

    name = "disallow_dynamic_loop"

    def apply(self, sch: Schedule) -> bool:
        """False when a loop extent is symbolic."""
        return not has_dynamic_loop(sch.func)


class _Recomputed(Visitor):
    """Finds a reduction block under a loop (of more than one iteration) that none of its
    iterator bindings uses: every iteration of that loop computes the same reduction again."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[Var] = []
        self.found: str | None = None

    def visit_For(self, node: For) -> None:  # noqa: N802
        """Track the enclosing loops."""
        counted = not (isinstance(node.extent, IntImm) and node.extent.value <= 1)
        if counted:
            self.loops.append(node.loop_var)
        self.visit(node.body)
        if counted:
            self.loops.pop()

    def visit_BlockRealize(self, node: BlockRealize) -> None:  # noqa: N802
        """Check a reduction block against the loops around it; go on inside."""
        block = node.block
        if self.loops and any(iv.kind is IterKind.REDUCE for iv in block.iter_vars):
            used = {id(v) for value in node.iter_values for v in collect_vars(value)}
            if any(id(lp) not in used for lp in self.loops):
                self.found = self.found or block.name
        self.generic_visit(node)


def recomputed_reduction(func: PrimFunc) -> str | None:
    """The name of a reduction block that runs again for every iteration of a loop it does not
    depend on (a row's max computed at each element of the row), or None."""
    finder = _Recomputed()
    finder.visit(func.body)
    return finder.found


class DisallowRecomputedReduction(Postproc):
    """Drop candidates that recompute a reduction under a loop it does not depend on (a
    sampled compute location inside the consumer's row: quadratic work, often past the
    runner's timeout, that the search would pay a measurement to learn)."""

    name = "disallow_recomputed_reduction"

    def apply(self, sch: Schedule) -> bool:
        """False when a reduction block is recomputed."""
        return recomputed_reduction(sch.func) is None


class VerifyGPUCode(Postproc):
    """Drop GPU candidates the GPU lowering or code generator refuses (threads, shared memory
    and registers beyond the target's limits, thread-binding rules), before they reach a
    builder. Passes everything on a CPU target.

    Parameters
    ----------
    target
        The target the candidates are for.
    """

    name = "verify_gpu_code"

    def __init__(self, target: Target | str | None = None) -> None:
        self.target = as_target(target)
        self.backend = backend_of(self.target)

    def apply(self, sch: Schedule) -> bool:
        """False when the backend's lowering (with its resource check) or its code
        generator refuses ``sch``."""
        if not self.backend.needs_gpu_schedule:
            return True
        try:
            self.backend.emit(self.backend.lower(sch.func, self.target), self.target)
        except (LowerError, CodegenError, BuildError):
            return False
        return True

"""Postprocessors that only check: no dynamic loops, GPU code within the device's limits."""

from __future__ import annotations

from ...errors import BuildError, LowerError
from ...ir import For, IntImm, Node, PrimFunc, post_order_visit
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


class VerifyGPUCode(Postproc):
    """Drop GPU candidates the GPU lowering refuses (threads, shared memory, registers,
    thread-binding rules), before they reach a builder. Passes everything on a CPU target.

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
        """False when the backend's lowering (with its resource check) refuses ``sch``."""
        if not self.backend.needs_gpu_schedule:
            return True
        try:
            self.backend.lower(sch.func, self.target)
        except (LowerError, BuildError):
            return False
        return True

"""AutoBind: give every GPU block that no other rule bound a sampled number of threads."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import BlockRealize, For, ForKind, IntImm, Stmt, Visitor
from ...schedule import Schedule
from ...schedule.handles import BlockRV
from ...target import Target
from ..postproc.rewrite_unbound_block import unbound_spatial_loops
from .rule import SearchRule, is_root

THREAD_CHOICES = (32, 64, 128, 256, 512, 1024)
"""Threads per block a sample may draw (those above the target's limit are left out)."""


class _UnboundLeaves(Visitor):
    """Collects the leaf blocks that no thread-bound loop encloses."""

    def __init__(self) -> None:
        super().__init__()
        self.bound = 0
        self.found: list[str] = []
        self.children = [0]

    def visit_For(self, node: For) -> None:  # noqa: N802
        """Count the thread-bound loops around what is inside."""
        bound = node.kind is ForKind.THREAD_BINDING
        self.bound += bound
        self.visit(node.body)
        self.bound -= bound

    def visit_BlockRealize(self, node: BlockRealize) -> None:  # noqa: N802
        """Record a leaf block outside every thread-bound loop; go on inside."""
        self.children[-1] += 1
        self.children.append(0)
        self.visit(node.block.body)
        if self.children.pop() == 0 and not self.bound:
            self.found.append(node.block.name)


def unbound_leaves(stmt: Stmt) -> list[str]:
    """Names of the leaf blocks under ``stmt`` that no thread-bound loop encloses, read from
    the IR (not by traced queries, whose answers on other blocks vary with the decisions)."""
    finder = _UnboundLeaves()
    finder.visit(stmt)
    return finder.found


class AutoBind(SearchRule):
    """On the root block (visited last, once the other rules placed their blocks): every leaf
    block with no thread-bound loop around it (an elementwise kernel, an epilogue, a
    reduction no other rule took) gets its outer run of spatial loops fused and split by a
    sampled number of threads (``sample_categorical``; :class:`MutateThreadBinding` changes
    it), the outer part bound to ``blockIdx.x``, the inner to ``threadIdx.x``. Extents
    smaller than the sample use that many threads.

    Parameters
    ----------
    thread_choices
        Threads per block a sample may draw.
    """

    name = "auto_bind"

    def __init__(self, thread_choices: Sequence[int] = THREAD_CHOICES) -> None:
        self.thread_choices = list(thread_choices)

    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """``[sch]`` with the unbound blocks bound (blocks other than the root: unchanged)."""
        if not is_root(sch, block):
            return [sch]
        limit = target.gpu.max_threads_per_block if target.gpu is not None else 1024
        choices = [t for t in self.thread_choices if t <= limit] or [limit]
        for name in unbound_leaves(sch.func.body):
            sch.try_(self._bind, sch, sch.get_block(name), choices)
        return [sch]

    @staticmethod
    def _bind(sch: Schedule, block: BlockRV, choices: list[int]) -> None:
        run = unbound_spatial_loops(sch, block)
        if not run:
            return
        fused = run[0] if len(run) == 1 else sch.fuse(*run)
        node = sch.get(fused)
        extent = (
            node.extent.value if isinstance(node, For) and isinstance(node.extent, IntImm) else 1
        )
        fits = [t for t in choices if t < extent] + [min(extent, max(choices))]
        fits = sorted(set(fits))
        threads = sch.sample_categorical(fits, [1 / len(fits)] * len(fits))
        outer, inner = sch.split(fused, [None, threads])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")

"""RewriteUnboundBlock: give a GPU block that no thread-bound loop encloses a binding.

Before: a leaf block whose loops (up to the root) include none bound to a thread axis; on a
GPU its work would run nowhere (the GPU lowering refuses it).
After: its outer run of serial loops binding only spatial iterators is fused and split by
``min(threads, extent)``; the outer part is bound to ``blockIdx.x``, the inner to
``threadIdx.x``. A block with no such loop is left alone (the GPU check then drops the
candidate). Meaning is unchanged.
"""

from __future__ import annotations

from ...ir import For, ForKind, IntImm
from ...schedule import BlockRV, LoopRV, Schedule
from ...target import Target, as_target
from .base import Postproc
from .rewrite_parallel_vectorize_unroll import leaves, reduce_vars

DEFAULT_THREADS = 256
"""Threads per block given to an unbound block (capped by the target's limit)."""


def unbound_spatial_loops(sch: Schedule, block: BlockRV) -> list[LoopRV] | None:
    """The outer serial spatial loops of ``block`` when no loop above it is bound."""
    loops = sch.get_loops(block)
    nodes = [sch.get(lp) for lp in loops]
    if any(isinstance(n, For) and n.kind is ForKind.THREAD_BINDING for n in nodes):
        return None
    reduce = reduce_vars(sch, block)
    run: list[LoopRV] = []
    for lp, node in zip(loops, nodes, strict=True):
        if not isinstance(node, For) or node.kind is not ForKind.SERIAL:
            break
        if id(node.loop_var) in reduce or not isinstance(node.extent, IntImm):
            break
        run.append(lp)
    return run


class RewriteUnboundBlock(Postproc):
    """Bind the outer spatial loops of unbound GPU blocks (see the module docstring).

    Parameters
    ----------
    target
        The target; nothing is rewritten for a CPU target.
    threads
        Threads per block (default 256, at most the target's ``max_threads_per_block``).
    """

    name = "rewrite_unbound_block"

    def __init__(self, target: Target | str | None = None, threads: int = DEFAULT_THREADS) -> None:
        self.target = as_target(target)
        limit = self.target.gpu.max_threads_per_block if self.target.gpu is not None else threads
        self.threads = max(1, min(threads, limit))

    def apply(self, sch: Schedule) -> bool:
        """Bind every unbound leaf block's outer spatial loops; always True."""
        if self.target.gpu is None:
            return True
        for leaf in leaves(sch, sch.get_block("root")) if _has_root(sch) else []:
            run = unbound_spatial_loops(sch, leaf)
            if not run:
                continue
            fused = run[0] if len(run) == 1 else sch.fuse(*run)
            node = sch.get(fused)
            extent = (
                node.extent.value
                if isinstance(node, For) and isinstance(node.extent, IntImm)
                else 1
            )
            outer, inner = sch.split(fused, [None, max(1, min(self.threads, extent))])
            sch.bind(outer, "blockIdx.x")
            sch.bind(inner, "threadIdx.x")
        return True


def _has_root(sch: Schedule) -> bool:
    body = sch.func.body
    return getattr(getattr(body, "block", None), "name", None) == "root"

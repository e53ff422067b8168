"""CrossThreadReduction: reduce each row of a GPU reduction with all threads of a block."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ScheduleError
from ...ir import For, IntImm, IterKind
from ...schedule import BlockRV, LoopRV, Schedule
from ...target import Target
from .rule import SearchRule, block_of, is_reduction, is_root, is_spatial, simple_loops

THREAD_CHOICES = (32, 64, 128, 256, 512)
"""Threads per row a sample may draw (those above the target's limit are left out)."""


def _bound_loop(sch: Schedule, block: BlockRV, thread: str) -> LoopRV | None:
    """The loop around ``block`` bound to ``thread``, or None."""
    for lp in sch.get_loops(block):
        node = sch.get(lp)
        if isinstance(node, For) and node.thread == thread:
            return lp
    return None


def thread_factor(sch: Schedule, loop: LoopRV) -> object:
    """The split factor that made the thread-bound ``loop``, as the trace holds it: the sampled
    value (an ExprRV, so a replay with a new decision keeps every loop of the kernel on the
    same thread count), else the loop's extent."""
    node = sch.get(loop)
    made = None
    for inst in reversed(list(sch.trace)):
        if made is None and inst.kind == "bind" and _same(sch, inst.inputs[0], node):
            made = inst.inputs[0]
        elif made is not None and inst.kind == "split":
            at = [n for n, out in enumerate(inst.outputs) if out is made]
            if at:
                factor = inst.inputs[1][at[0]]
                return factor if factor is not None else _extent(sch, loop)
    return _extent(sch, loop)


def _same(sch: Schedule, rv: object, node: object) -> bool:
    """True when handle ``rv`` still refers to ``node``."""
    if not isinstance(rv, LoopRV):
        return False
    try:
        return sch.get(rv) is node
    except ScheduleError:
        return False  # a handle a later primitive removed


def _extent(sch: Schedule, loop: LoopRV) -> int:
    node = sch.get(loop)
    assert isinstance(node, For)
    assert isinstance(node.extent, IntImm)
    return node.extent.value


class CrossThreadReduction(SearchRule):
    """Fork the space for a reduction block without data reuse whose reduction is long (a row
    max or sum of a softmax or a norm, a row reduction): besides the unchanged block, a sketch
    runs each row on one GPU block, its reduction loops fused and split over
    ``threadIdx.x`` (the lowering combines the threads' partials with warp shuffles and
    shared memory).

    Where the row goes: a block whose consumers already run row by row under a loop bound to
    ``blockIdx.x`` (a softmax's max, once its sum was placed) is computed under that loop
    with the consumers' thread count; a block with one unbound spatial consumer (a softmax's
    sum and its normalisation) binds that consumer's leading loops to ``blockIdx.x`` and the
    rest to a sampled number of threads (``sample_categorical``), and is computed under the
    ``blockIdx.x`` loop with the same threads; an output block is bound alone.

    Parameters
    ----------
    thread_choices
        Threads per row a sample may draw.
    min_reduce
        The shortest reduction (elements per row) the rule applies to.
    """

    name = "cross_thread_reduction"

    def __init__(self, thread_choices: Sequence[int] = THREAD_CHOICES, min_reduce: int = 32):
        self.thread_choices = list(thread_choices)
        self.min_reduce = min_reduce

    def applies(self, sch: Schedule, block: BlockRV) -> bool:
        """A reduction with its reduction loops innermost, at least ``min_reduce`` long and no
        fewer iterations than its spatial loops (a GEMM is left to multi-level tiling)."""
        if is_root(sch, block) or not is_reduction(block_of(sch, block)):
            return False
        loops = simple_loops(sch, block)
        if loops is None:
            return False
        kinds = [iv.kind for iv in block_of(sch, block).iter_vars]
        if kinds != sorted(kinds, key=lambda k: k is IterKind.REDUCE):
            return False
        reduce = spatial = 1
        for lp, kind in zip(loops, kinds, strict=True):
            if kind is IterKind.REDUCE:
                reduce *= _extent(sch, lp)
            else:
                spatial *= _extent(sch, lp)
        return reduce >= self.min_reduce and spatial <= reduce

    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """``[sch]`` and, when the rule applies, the cross-thread sketch."""
        if not self.applies(sch, block):
            return [sch]
        fork = sch.copy()
        if fork.try_(self._schedule, fork, fork.get_block(block.name), target):
            return [sch, fork]
        return [sch]

    def _threads(self, sch: Schedule, target: Target) -> object:
        limit = target.gpu.max_threads_per_block if target.gpu is not None else 1024
        choices = [t for t in self.thread_choices if t <= limit] or [min(limit, 32)]
        return sch.sample_categorical(choices, [1 / len(choices)] * len(choices))

    def _schedule(self, sch: Schedule, block: BlockRV, target: Target) -> None:
        consumers = sch.get_consumers(block)
        rows = [_bound_loop(sch, c, "blockIdx.x") for c in consumers]
        if consumers and all(r is not None for r in rows):
            row = rows[0]
            assert row is not None
            tx = _bound_loop(sch, consumers[0], "threadIdx.x")
            threads = thread_factor(sch, tx) if tx is not None else self._threads(sch, target)
            sch.set_scope(block, 0, "shared")  # one row per GPU block: block-private
            sch.compute_at(block, row)
        elif len(consumers) == 1 and is_spatial(block_of(sch, consumers[0])):
            threads = self._threads(sch, target)
            row = self._bind_consumer(sch, consumers[0], block, threads)
            sch.set_scope(block, 0, "shared")
            sch.compute_at(block, row)
        elif not consumers:
            threads = self._threads(sch, target)
            self._bind_rows(sch, block)
        else:
            raise_unfit(block)
        self._bind_reduce(sch, block, threads)

    @staticmethod
    def _bind_rows(sch: Schedule, block: BlockRV) -> None:
        """An output reduction's spatial loops fused onto ``blockIdx.x``."""
        kinds = [iv.kind for iv in block_of(sch, block).iter_vars]
        loops = sch.get_loops(block)[: kinds.count(IterKind.SPATIAL)]
        if loops:
            sch.bind(sch.fuse(*loops) if len(loops) > 1 else loops[0], "blockIdx.x")

    @staticmethod
    def _bind_consumer(sch: Schedule, consumer: BlockRV, block: BlockRV, threads: object) -> LoopRV:
        """The consumer's loops over the reduction's rows on ``blockIdx.x``, the rest split over
        ``threads``; the ``blockIdx.x`` loop."""
        rows = sum(1 for iv in block_of(sch, block).iter_vars if iv.kind is IterKind.SPATIAL)
        loops = simple_loops(sch, consumer)
        if loops is None or not 0 < rows < len(loops):
            raise_unfit(consumer)
        assert loops is not None
        head, rest = loops[:rows], loops[rows:]
        row = sch.fuse(*head) if len(head) > 1 else head[0]
        inner = sch.fuse(*rest) if len(rest) > 1 else rest[0]
        _, tx = sch.split(inner, [None, threads])  # type: ignore[list-item]
        sch.bind(row, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        return row

    @staticmethod
    def _bind_reduce(sch: Schedule, block: BlockRV, threads: object) -> None:
        """The block's reduction loops fused and split over ``threads`` threads."""
        reduce = [
            lp
            for lp in sch.get_loops(block)
            if isinstance(node := sch.get(lp), For) and node.thread is None
        ]
        kinds = [iv.kind for iv in block_of(sch, block).iter_vars]
        reduce = reduce[len(reduce) - kinds.count(IterKind.REDUCE) :]
        fused = sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]
        _, tx = sch.split(fused, [None, threads])  # type: ignore[list-item]
        sch.bind(tx, "threadIdx.x")


def raise_unfit(block: BlockRV) -> None:
    """Refuse (a ScheduleError, so ``try_`` keeps the unchanged sketch)."""
    raise ScheduleError("cross_thread_reduction", f'block "{block.name}": no row placement')

"""``RMSNorm``: root-mean-square normalisation, recognised by its math, in any block layout.

Taken when, after inlining the elementwise stages, exactly one reduction is left, it sums
squares (``x * x``, through casts: ``sum(cast(x) * cast(x))``), and a later block scales by
the reciprocal root of that sum (``rsqrt(s / n + eps)``, or ``1 / sqrt(...)``) — whatever
the number of blocks around it: a fused residual add written out first, a weight, a cast
back to fp16. The schedule is the row schedule of :mod:`._rows` with the norm's own numbers
(:class:`RMSNorm.Config`): a thread block per row, up to 512 threads walking it (norm rows
are long: a hidden size of 2048–8192), the sum of squares combined across threads and kept
in registers for the scaling pass. It comes before ``Reduction`` in
:func:`~tilecraft.rules.gpu.default_rules`, which would otherwise take an RMS norm as a plain
reduction with its epilogue (with the generic numbers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...ir import Call, Cast, Div, Expr, Mul, Node, PrimFunc, structural_equal, walk
from ...schedule import Schedule
from ...schedule.analysis import BlockInfo, ReduceKind, detect_reduction
from ...target import Target
from ..base import Decline
from ..common import loads_of
from ._checks import open_rows
from ._rows import RowConfig, is_reduction_block, schedule_rows
from .config import GPUArchRule, require_arch


def _strip(e: Expr) -> Expr:
    while isinstance(e, Cast):
        e = e.value
    return e


def _is_square(e: Expr) -> bool:
    e = _strip(e)
    return isinstance(e, Mul) and structural_equal(_strip(e.a), _strip(e.b))


def _reciprocal_root(node: Node) -> bool:
    """Whether ``node`` holds ``rsqrt(...)`` or ``... / sqrt(...)``."""
    for n in walk(node):
        if isinstance(n, Call) and n.op == "rsqrt":
            return True
        if isinstance(n, Div):
            den = _strip(n.b)
            if isinstance(den, Call) and den.op == "sqrt":
                return True
    return False


def why_not_rms_norm(blocks: Sequence[BlockInfo]) -> str | None:
    """Why ``blocks`` (after inlining) are not an RMS norm; None when they are."""
    reductions = [b for b in blocks if is_reduction_block(b)]
    if len(reductions) != 1:
        return f"{len(reductions)} reductions; an RMS norm has one (the sum of squares)"
    info = detect_reduction(reductions[0])
    if info is None or info.reducer is not ReduceKind.SUM or not _is_square(info.value):
        return f'reduction "{reductions[0].name}" is not a sum of squares'
    after = blocks[blocks.index(reductions[0]) + 1 :]
    for b in after:
        body = b.block.body
        reads_sum = any(ld.buffer is info.buffer for ld in loads_of(body))
        if reads_sum and _reciprocal_root(body):
            return None
    return "no block scales by the reciprocal root of the sum of squares"


class RMSNorm(GPUArchRule):
    """RMS normalisation, a thread block per row (module docstring)."""

    @dataclass(frozen=True)
    class Config(RowConfig):
        """The numbers of :class:`RMSNorm`: up to 512 threads per row."""

        max_row_threads: int = 512

        @classmethod
        def for_target(cls, target: Target) -> RMSNorm.Config:
            """512 threads per row, within the architecture's block limit."""
            base = RowConfig.for_target(target)
            cap = require_arch(target).max_threads_per_block
            return cls(
                warp_size=base.warp_size,
                max_row_threads=min(512, cap),
                row_threads_choices=base.row_threads_choices,
                threads_per_block=base.threads_per_block,
            )

    def schedule(
        self, func: PrimFunc, target: Target, cfg: RMSNorm.Config, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` or decline (see the module docstring)."""
        # Step 1. After inlining: one sum of squares, scaled by its reciprocal root.
        got = open_rows(func)
        if isinstance(got, Decline):
            return got
        sch, blocks = got
        why = why_not_rms_norm(blocks)
        if why is not None:
            return Decline(why)
        # Step 2. The row schedule with the norm's numbers.
        sampled = cfg.sample_row_threads(sch) if tunable else None
        done = sch.try_(schedule_rows, sch, blocks, cfg, sampled)
        if not done:
            return Decline(f"the row schedule failed: {done.error.short if done.error else ''}")
        return sch

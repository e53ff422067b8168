"""ParallelVectorizeUnroll: sample how much of the function runs in parallel and unrolled."""

from __future__ import annotations

from collections.abc import Sequence

from ...schedule import BlockRV, Schedule
from ...target import Target
from ..postproc.keys import PARALLEL, UNROLL, VECTORIZE
from .rule import SearchRule, is_root

JOBS_PER_CORE = (4, 16, 64)
"""Parallel iterations per core a sample may give the outer fused loop."""
UNROLL_STEPS = (0, 16, 64, 512)
"""Unroll step budgets (``pragma_auto_unroll_max_step``) a sample may draw."""
MAX_VECTORIZE = 64
"""Largest fused inner spatial extent that is vectorized."""


class ParallelVectorizeUnroll(SearchRule):
    """On the root block: annotate :data:`~tilecraft.tune.postproc.keys.PARALLEL` (cores times
    a sampled jobs-per-core), :data:`~tilecraft.tune.postproc.keys.VECTORIZE` (a fixed limit)
    and :data:`~tilecraft.tune.postproc.keys.UNROLL` (a sampled step budget), which
    :class:`~tilecraft.tune.postproc.RewriteParallelVectorizeUnroll` applies to every leaf
    block once the loop nests are final; :class:`~tilecraft.tune.mutator.MutateParallel` and
    :class:`~tilecraft.tune.mutator.MutateUnroll` change the samples.

    Parameters
    ----------
    jobs_per_core, unroll_steps, max_vectorize
        The candidates of the two samples and the vectorize limit (0: no vectorizing).
    """

    name = "parallel_vectorize_unroll"

    def __init__(
        self,
        jobs_per_core: Sequence[int] = JOBS_PER_CORE,
        unroll_steps: Sequence[int] = UNROLL_STEPS,
        max_vectorize: int = MAX_VECTORIZE,
    ) -> None:
        self.jobs_per_core = list(jobs_per_core)
        self.unroll_steps = list(unroll_steps)
        self.max_vectorize = max_vectorize

    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """``[sch]`` with the root annotated (other blocks: unchanged)."""
        if not is_root(sch, block):
            return [sch]
        cores = max(target.num_cores, 1)
        if self.jobs_per_core:
            even = [1 / len(self.jobs_per_core)] * len(self.jobs_per_core)
            jobs = sch.sample_categorical([cores * j for j in self.jobs_per_core], even)
            sch.annotate(block, PARALLEL, jobs)
        if self.max_vectorize > 1:
            sch.annotate(block, VECTORIZE, self.max_vectorize)
        if self.unroll_steps:
            even = [1 / len(self.unroll_steps)] * len(self.unroll_steps)
            sch.annotate(block, UNROLL, sch.sample_categorical(self.unroll_steps, even))
        return [sch]

"""MultiLevelTilingGPU: the GPU form of multi-level tiling, ``"SSSRRSRS"`` with thread binding,
shared-memory read caches fetched cooperatively and a local write cache."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import TuneError
from ...ir import IterKind
from ...rules.common import localize_output
from ...schedule import BlockRV, LoopRV, Schedule
from ...target import Target
from ..postproc.keys import COOPERATIVE_FETCH
from .multi_level_tiling import MultiLevelTiling
from .rule import block_of, simple_loops

GPU_STRUCTURE = "SSSRRSRS"
GPU_BINDINGS = ("blockIdx.x", "vthread.x", "threadIdx.x")
"""What the loops of the first, second and third spatial levels are bound to."""
VECTOR_LENS = (1, 2, 4)
"""Widest vectors (elements) a shared-memory fetch may be sampled to load."""
MAX_INNERMOST_GPU = 64
"""Largest innermost reduction tile of a sample."""
MAX_PER_THREAD = 8
"""Largest part of one spatial axis a thread computes (its register tile's side)."""
MAX_THREADS_PER_AXIS = 32
"""Largest number of threads along one spatial axis."""


class MultiLevelTilingGPU(MultiLevelTiling):
    """Tile a reduction block with data reuse for a GPU (a GEMM, a GEMV, a batched matmul).

    Every spatial loop is split by ``sample_perfect_tile`` into as many tiles as ``structure``
    has ``S``, every reduction loop into as many as it has ``R``, and the tiles are ordered
    level by level (``"SSSRRSRS"``: ``S0 S1 S2 R0 R1 S3 R2 S4``). The loops of each of the
    first three spatial levels are fused and bound to ``blockIdx.x``, ``vthread.x`` and
    ``threadIdx.x``: a thread computes ``S3 x S4`` outputs per virtual thread. The block
    accumulates into a ``local`` buffer written back by each thread (an intermediate output
    becomes local itself with its epilogue moved under the thread loop). Each operand is read
    through a ``shared`` copy made per iteration of the first reduction level and annotated
    with a sampled vector length (:data:`~tilecraft.tune.postproc.keys.COOPERATIVE_FETCH`),
    which :class:`~tilecraft.tune.postproc.RewriteCooperativeFetch` turns into a copy by all
    threads of the block. Tile sizes the device cannot run (too many threads, too much shared
    memory) are dropped by :class:`~tilecraft.tune.postproc.VerifyGPUCode`.

    Parameters
    ----------
    structure
        The tile levels, outermost first (at least three ``S`` and one ``R``).
    max_innermost_factor
        Largest innermost tile of a sample.
    vector_lens
        The vector lengths a shared-memory fetch may be sampled to use.
    max_per_thread, max_threads_per_axis
        Largest thread's part and thread count along one spatial axis (see
        :data:`MAX_PER_THREAD`, :data:`MAX_THREADS_PER_AXIS`).
    """

    name = "multi_level_tiling_gpu"

    def __init__(
        self,
        structure: str = GPU_STRUCTURE,
        max_innermost_factor: int = MAX_INNERMOST_GPU,
        vector_lens: Sequence[int] = VECTOR_LENS,
        max_per_thread: int = MAX_PER_THREAD,
        max_threads_per_axis: int = MAX_THREADS_PER_AXIS,
    ) -> None:
        if structure.count("S") < len(GPU_BINDINGS) or "R" not in structure:
            raise TuneError(f"MultiLevelTilingGPU: structure {structure!r} needs 3 S and an R")
        super().__init__(structure, max_innermost_factor, max_innermost_factor)
        self.vector_lens = list(vector_lens)
        self.max_per_thread = max_per_thread
        self.max_threads_per_axis = max_threads_per_axis

    def _tile(self, sch: Schedule, block: BlockRV, target: Target) -> None:
        """Split, order and bind the levels; the write cache; the shared read caches."""
        del target
        levels = self._split_levels(sch, block)
        sch.reorder(*(lp for level in levels for lp in level))
        spatial = [levels[i] for i, c in enumerate(self.structure) if c == "S"]
        bound = [
            self._bind(sch, loops, thread)
            for loops, thread in zip(spatial[:3], GPU_BINDINGS, strict=True)
        ]
        threads = bound[-1]
        localize_output(sch, block, threads)
        first_reduce = levels[self.structure.index("R")]
        if first_reduce:
            self._read_caches(sch, block, first_reduce[-1])

    def _sample_choices(self, sch: Schedule, block: BlockRV) -> None:
        """Nothing more to sample: the fetch vector lengths are sampled with the caches."""

    def _split_levels(self, sch: Schedule, block: BlockRV) -> list[list[LoopRV]]:
        """Every loop of ``block`` split into its kind's levels (outermost first)."""
        levels: list[list[LoopRV]] = [[] for _ in self.structure]
        loops = simple_loops(sch, block)
        assert loops is not None
        ivs = block_of(sch, block).iter_vars
        kinds = ["S" if iv.kind is IterKind.SPATIAL else "R" for iv in ivs]
        for loop, kind in zip(loops, kinds, strict=True):
            where = [i for i, c in enumerate(self.structure) if c == kind]
            if kind == "S" and len(where) > len(GPU_BINDINGS):
                parts = self._split_spatial(sch, loop, len(where))
            else:
                parts = sch.split(
                    loop, sch.sample_perfect_tile(loop, len(where), self.max_innermost_factor)
                )
            for level, part in zip(where, parts, strict=True):
                levels[level].append(part)
        return levels

    def _split_spatial(self, sch: Schedule, loop: LoopRV, n: int) -> list[LoopRV]:
        """``loop`` in ``n`` tiles: a thread's part (the levels below ``threadIdx``) of at most
        ``max_per_thread`` first, then the bound levels, the threads at most
        ``max_threads_per_axis``: few samples exceed the registers or threads of a block."""
        bound = len(GPU_BINDINGS)
        outer, own = sch.split(loop, sch.sample_perfect_tile(loop, 2, self.max_per_thread))
        above = sch.split(outer, sch.sample_perfect_tile(outer, bound, self.max_threads_per_axis))
        below = sch.split(own, sch.sample_perfect_tile(own, n - bound, self.max_per_thread))
        return [*above, *below]

    @staticmethod
    def _bind(sch: Schedule, loops: list[LoopRV], thread: str) -> LoopRV:
        """The loops of one level fused and bound to ``thread``."""
        fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
        sch.bind(fused, thread)
        return fused

    def _read_caches(self, sch: Schedule, block: BlockRV, loop: LoopRV) -> None:
        """A shared copy of each operand under ``loop``, with a sampled fetch vector length."""
        node = block_of(sch, block)
        written = {id(w.buffer) for w in node.writes}
        names = [r.buffer.name for r in node.reads if id(r.buffer) not in written]
        even = [1 / len(self.vector_lens)] * len(self.vector_lens)
        for name in dict.fromkeys(names):
            reads = block_of(sch, block).reads
            index = next(i for i, r in enumerate(reads) if r.buffer.name == name)
            shared = sch.cache_read(block, index, "shared")
            sch.compute_at(shared, loop)
            sch.annotate(shared, COOPERATIVE_FETCH, sch.sample_categorical(self.vector_lens, even))

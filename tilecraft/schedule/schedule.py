"""The :class:`Schedule`: handles, queries and every primitive over one PrimFunc.

Each public method is a thin call of a traced state-level primitive (``primitives/*.py``);
its docstring repeats the primitive's Requires/Rewrite. A primitive either commits a new
PrimFunc or raises :class:`~tilecraft.errors.ScheduleError` and leaves the schedule unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..errors import ScheduleError
from ..ir import Block, For, IRModule, PrimFunc
from . import _tree
from .instruction import primitive
from .primitives import annotate as _annotate
from .primitives import bridge as _bridge
from .primitives import loop as _loop
from .primitives import sampling as _sampling
from .primitives.block_layout import as_block_map as _as_block_map
from .primitives.block_layout import get_output_blocks as _get_output_blocks
from .primitives.block_layout import transform_block_layout as _transform_block_layout
from .primitives.decompose_padding import decompose_padding as _decompose_padding
from .primitives.index_map import IndexMap
from .primitives.pad_einsum import pad_einsum as _pad_einsum
from .state import BlockRV, ExprRV, LoopRV, ScheduleState
from .trace import Trace

_T = TypeVar("_T")


# ------------------------------------------------------------------------------------------
# queries (traced, so replay can map the handles they return)
@primitive("get_block", outputs="one")
def get_block(state: ScheduleState, name: str) -> BlockRV:
    """The handle of block ``name``; requires the block to exist."""
    return state.block_rv(name)


@primitive("get_loops", inputs=("block",), outputs="many")
def get_loops(state: ScheduleState, block: BlockRV) -> list[LoopRV]:
    """Handles of the loops above ``block`` up to its scope block, outermost first."""
    name = state.block_name(block)
    return [LoopRV(f.loop_var) for f in _tree.loops_above(state.func, name)]


@primitive("get_child_blocks", inputs=("block_or_loop",), outputs="many")
def get_child_blocks(state: ScheduleState, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
    """Handles of the blocks directly under a block or loop, in program order."""
    node = (
        state.get_block(block_or_loop)
        if isinstance(block_or_loop, BlockRV)
        else state.get_loop(block_or_loop)
    )
    return [state.block_rv(br.block.name) for br in _tree.child_blocks(node)]


@primitive("get_producers", inputs=("block",), outputs="many")
def get_producers(state: ScheduleState, block: BlockRV) -> list[BlockRV]:
    """Blocks in the same scope writing a buffer ``block`` reads, in program order."""
    name = state.block_name(block)
    return [state.block_rv(n) for n in _tree.producers(state.func, name)]


@primitive("get_consumers", inputs=("block",), outputs="many")
def get_consumers(state: ScheduleState, block: BlockRV) -> list[BlockRV]:
    """Blocks in the same scope reading a buffer ``block`` writes, in program order."""
    name = state.block_name(block)
    return [state.block_rv(n) for n in _tree.consumers(state.func, name)]


class Schedule:
    """A schedule of one PrimFunc: handles, queries, primitives and the trace.

    Parameters
    ----------
    func
        The function to schedule, or an IRModule holding it.
    seed
        Seed of the random state used by sampling instructions (None: nondeterministic).
    func_name
        The function to schedule when ``func`` is a module.

    Examples
    --------
    >>> sch = Schedule(func, seed=0)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> io, ii = sch.split(i, factors=[None, 32])
    """

    def __init__(
        self, func: PrimFunc | IRModule, seed: int | None = None, func_name: str = "main"
    ) -> None:
        if isinstance(func, IRModule):
            if func_name not in func:
                raise ScheduleError(
                    "schedule",
                    f"the module has no function {func_name!r}",
                    hint=f"its functions are {sorted(func)}",
                )
            target = func[func_name]
            self._module: IRModule | None = func
        else:
            target = func
            self._module = None
        if not isinstance(target, PrimFunc):
            raise ScheduleError("schedule", f"expected a PrimFunc, got {type(target).__name__}")
        self.func_name = func_name
        self.state = ScheduleState(_tree.ensure_root(target), seed)

    # -- results ----------------------------------------------------------------------------
    @property
    def func(self) -> PrimFunc:
        """The scheduled PrimFunc."""
        return self.state.func

    @property
    def mod(self) -> IRModule:
        """The module with the scheduled function under ``func_name``."""
        if self._module is None:
            return IRModule({self.func_name: self.state.func})
        return self._module.with_function(self.func_name, self.state.func)

    @property
    def trace(self) -> Trace:
        """The instructions applied so far."""
        return self.state.trace

    def copy(self) -> Schedule:
        """An independent copy (same function, trace and random state); handles stay valid."""
        new = Schedule.__new__(Schedule)
        new._module = self._module
        new.func_name = self.func_name
        new.state = self.state.copy()
        return new

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's random state."""
        return self.state.rng.getrandbits(63)

    def seed(self, seed: int) -> None:
        """Re-seed the random state."""
        self.state.rng.seed(seed)

    def try_(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T | None:
        """Call ``fn`` and return its result; on ScheduleError undo it and return None.

        ``sch.last_error`` holds the error (None after a success). Only ScheduleError is caught.
        """
        st = self.state
        saved = (st.func, len(st.trace), dict(st.block_gen), st.rng.getstate())
        try:
            result = fn(*args, **kwargs)
        except ScheduleError as e:
            st.func, st.block_gen = saved[0], saved[2]
            st.trace.truncate(saved[1])
            st.rng.setstate(saved[3])
            self.last_error: ScheduleError | None = e
            return None
        self.last_error = None
        return result

    def show(self) -> None:
        """Print the scheduled function's script."""
        self.state.func.show()

    # -- queries ----------------------------------------------------------------------------
    def get(self, rv: BlockRV | LoopRV | int) -> Block | For | int:
        """The IR node a handle refers to (Block for a block, For for a loop, int for a value)."""
        self.state.primitive = "get"
        return self.state.get(rv)

    def get_block(self, name: str) -> BlockRV:
        """The handle of block ``name``."""
        return get_block(self.state, name)

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops above ``block`` (up to its scope block), outermost first."""
        return get_loops(self.state, block)

    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        """The blocks directly under a block or loop."""
        return get_child_blocks(self.state, block_or_loop)

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope writing what ``block`` reads."""
        return get_producers(self.state, block)

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope reading what ``block`` writes."""
        return get_consumers(self.state, block)

    # -- loops ------------------------------------------------------------------------------
    def split(
        self,
        loop: LoopRV,
        factors: Sequence[int | None],
        *,
        preserve_unit_iters: bool = True,
    ) -> list[LoopRV]:
        """Split ``loop`` into ``len(factors)`` nested loops.

        Requires: at least two positive-int factors, at most one None (inferred); their
        product covers the extent (a symbolic extent needs a None); the loop is serial; a
        non-divisible split has only loops and blocks under the loop (guard predicate).
        Rewrite: ``for i in range(128)`` -> ``for i_0 in range(4): for i_1 in range(32)``.
        """
        return _loop.split(self.state, loop, factors, preserve_unit_iters=preserve_unit_iters)

    def fuse(self, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse adjacent, perfectly nested serial loops (outermost first) into one.

        Requires: loops given once, each the exact body of the previous; serial; ranges
        independent; no opaque block iterator bound.
        Rewrite: ``for i in range(4): for j in range(8)`` -> ``for i_j_fused in range(32)``.
        """
        return _loop.fuse(self.state, *loops, preserve_unit_iters=preserve_unit_iters)

    def reorder(self, *loops: LoopRV) -> None:
        """Put the given loops, in this order, at the positions they occupy.

        Requires: loops in one chain, perfectly nested from the outermost to the innermost
        given loop (no block between); ranges independent; no opaque iterator bound; the
        new order nests no parallel loop in a parallel/vectorized one and no vectorized loop
        in a vectorized one; a loop binding both spatial and reduce iterators of a block with
        an init, or none of them, keeps its order relative to that block's reduction loops.
        Rewrite: ``for i: for j: for k`` -- reorder(k, i) --> ``for k: for j: for i``.
        """
        _loop.reorder(self.state, *loops)

    def add_unit_loop(self, block_or_loop: BlockRV | LoopRV) -> LoopRV:
        """Add a loop of extent 1 directly above a block or a loop; returns its handle.

        Requires: the target is not the root block.
        Rewrite: ``with block("C")`` -> ``for u in range(1): with block("C")``.
        """
        return _loop.add_unit_loop(self.state, block_or_loop)

    def parallel(self, loop: LoopRV) -> None:
        """Run a serial loop in parallel.

        Requires: the loop is serial; every block iterator it binds is spatial; no enclosing
        loop is parallel or vectorized (OpenMP allows no parallel region in a simd region;
        nested parallel teams are rejected too) and no loop inside it is parallel.
        Rewrite: ``for i in range(n)`` -> ``for i in T.parallel(n)``.
        """
        _annotate.parallel(self.state, loop)

    def vectorize(self, loop: LoopRV) -> None:
        """Vectorize a serial loop.

        Requires: the loop is serial; every block iterator it binds is spatial; no enclosing
        loop is vectorized and no loop inside it is parallel or vectorized.
        Rewrite: ``for i in range(n)`` -> ``for i in T.vectorized(n)``.
        """
        _annotate.vectorize(self.state, loop)

    def unroll(self, loop: LoopRV) -> None:
        """Unroll a serial loop.

        Requires: the loop is serial.
        Rewrite: ``for i in range(n)`` -> ``for i in T.unroll(n)``.
        """
        _annotate.unroll(self.state, loop)

    def bind(self, loop: LoopRV, thread: str) -> None:
        """Bind a serial loop to ``blockIdx.x/y/z``, ``threadIdx.x/y/z`` or ``vthread``.

        Requires: no nested loop on the same axis; blockIdx/vthread bind spatial iterators
        only, threadIdx may bind reduction iterators (cross-thread reduction).
        """
        _annotate.bind(self.state, loop, thread)

    def annotate(self, block_or_loop: BlockRV | LoopRV, key: str, value: Any) -> None:
        """Set annotation ``key`` = ``value`` on a block or loop.

        Requires: ``value`` is a bool, int, float, str or a (nested) list of them.
        Rewrite: the block's ``T.block_attr`` / the loop's annotations gain ``key``.
        """
        _annotate.annotate(self.state, block_or_loop, key, value)

    def unannotate(self, block_or_loop: BlockRV | LoopRV, key: str) -> None:
        """Remove annotation ``key`` from a block or loop.

        Requires: the annotation is present.
        Rewrite: the block's / loop's annotations lose ``key``.
        """
        _annotate.unannotate(self.state, block_or_loop, key)

    # -- compute location -------------------------------------------------------------------
    def compute_at(
        self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1
    ) -> None:
        """Move producer ``block`` under ``loop``, computing only the region its consumers
        there need.

        Requires: the block is not the root and writes no function output; ``loop`` is not
        above the block; every consumer lies under ``loop``; the needed region is bounded;
        the block has an init or reads no buffer it writes (it may run twice on an element).
        A root location handle (``sample_compute_location``) keeps the block where it is,
        an inline handle inlines it.
        Rewrite: ``for i: B[i] = ...; for i: for j: C[i, j] = B[i]`` -- compute_at(B, C's i)
        --> ``for i: (B[i] = ...; for j: C[i, j] = B[i])``.
        """
        _bridge.compute_at(self.state, block, loop, preserve_unit_loops, index)

    def reverse_compute_at(
        self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1
    ) -> None:
        """Move consumer ``block`` under ``loop``, consuming the region its producers there
        write.

        Requires: the block is not the root; ``loop`` is not above the block; every producer
        of the block lies under ``loop``; the region is bounded; the block has an init or
        reads no buffer it writes (an update without init would accumulate twice).
        Rewrite: ``for i: for j: B[i, j] = ...; for i: C[i] = B[i, 0]`` -- reverse_compute_at
        (C, B's i) --> ``for i: (for j: B[i, j] = ...; C[i] = B[i, 0])``.
        """
        _bridge.reverse_compute_at(self.state, block, loop, preserve_unit_loops, index)

    def compute_inline(self, block: BlockRV) -> None:
        """Inline producer ``block`` into its consumers.

        Requires: the block is a single store ``B[v...] = expr`` indexed by distinct iterators
        (no reduction, no init); it writes no function output.
        Rewrite: ``B[i] = A[i] + 1; C[i] = B[i] * 2`` -> ``C[i] = (A[i] + 1) * 2``.
        """
        _bridge.compute_inline(self.state, block)

    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Inline consumer ``block`` into its single producer.

        Requires: the block is a single store reading the producer's buffer once, at the
        block's own distinct iterators; the producer is not a reduction.
        Rewrite: ``B[i] = A[i] + 1; C[i] = B[i] * 2`` -> ``C[i] = (A[i] + 1) * 2``.
        """
        _bridge.reverse_compute_inline(self.state, block)

    # -- buffers ----------------------------------------------------------------------------
    def cache_read(
        self,
        block: BlockRV,
        read_buffer_index: int,
        storage_scope: str,
        consumer_blocks: Sequence[BlockRV] | None = None,
    ) -> BlockRV:
        """Stage read buffer ``read_buffer_index`` of ``block`` through a new buffer.

        Requires: the index selects a read; the scope is global, shared, shared.dyn or
        local; each consumer given reads the buffer; the buffer has at most one writer, and
        no reader shares the writer's outermost loop nest.
        Rewrite: a copy block ``A_local[v] = A[v]`` goes after the producer (first, for a
        parameter); the readers read ``A_local``. Returns the copy block.
        """
        return _bridge.cache_read(
            self.state, block, read_buffer_index, storage_scope, consumer_blocks
        )

    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str) -> BlockRV:
        """Compute ``block`` into a new ``storage_scope`` buffer and copy it out.

        Requires: the index selects a write; the scope is known; the block is the only writer
        of the buffer; no reader shares the block's outermost loop nest.
        Rewrite: ``C[v] = ...`` -> ``C_local[v] = ...`` then ``C[v] = C_local[v]`` (new block,
        returned) after the block's nest.
        """
        return _bridge.cache_write(self.state, block, write_buffer_index, storage_scope)

    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
        """Change the storage scope of a buffer ``block`` writes.

        Requires: the index selects a write; the scope is known; the buffer is allocated in
        the function (not a parameter).
        Rewrite: every use of ``B`` refers to ``B`` with the new scope.
        """
        _bridge.set_scope(self.state, block, buffer_index, storage_scope)

    def storage_align(
        self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int
    ) -> None:
        """Pad the stride of ``axis`` of a buffer ``block`` writes to ``factor * k + offset``.

        Requires: the index selects a write of an intermediate buffer; ``axis`` is a valid
        dimension; ``factor > 0`` and ``0 <= offset < factor``.
        Rewrite: the block gains the ``buffer_dim_align`` annotation (applied when lowering).
        A later primitive that relayouts the buffer or makes the block write another one
        (transform_layout, reindex, reverse_compute_inline) drops the stale request.
        """
        _bridge.storage_align(self.state, block, buffer_index, axis, factor, offset)

    def transform_layout(self, block: BlockRV, buffer: tuple[str, int], index_map: Any) -> None:
        """Re-layout buffer ``("read" | "write", index)`` of ``block`` with ``index_map``.

        ``index_map`` is an :class:`IndexMap` or a callable such as ``lambda i, j: (j, i)``.
        Requires: the buffer is an intermediate; the map takes one index per dimension and
        is a bijection of permutations, splits and fusions onto a 0-based box.
        Rewrite: ``B[i, j]`` -> ``B[j, i]`` everywhere (the shape is permuted likewise).
        """
        _bridge.transform_layout(self.state, block, buffer, _bridge.as_index_map(index_map))

    def reindex(self, block: BlockRV, buffer: tuple[str, int]) -> BlockRV:
        """Stage an access of ``block`` through a buffer indexed by its iterators.

        Requires: every access of the buffer in the block uses the same iterator-only
        indices; the block does not both read and write it; no other block accessing it
        shares the block's outermost loop nest.
        Rewrite: ``... A[vi + vk] ...`` -> ``A_reindex[v0, v1] = A[v0 + v1]`` (new block,
        returned) and ``... A_reindex[vi, vk] ...``.
        """
        return _bridge.reindex(self.state, block, buffer)

    # -- reductions -------------------------------------------------------------------------
    def rfactor(self, loop: LoopRV, factor_axis: int = 0) -> BlockRV:
        """Factor the reduction over ``loop`` into an rf block; returns the rf block.

        Requires: exactly one reduction block under ``loop``, with an init and a body
        ``C[s] = C[s] op rhs`` (op one of +, *, max, min); ``loop`` binds reduce iterators
        only; the block has no predicate; ``-(ndim + 1) <= factor_axis <= ndim``; no loop
        binds both spatial and reduce iterators; no other block inside the replaced nest
        accesses ``C``; loop ranges independent of the dropped reduction loops.
        Rewrite: ``C[i] += A[i, ko * 4 + ki]`` -> ``C_rf[ki, i] += A[i, ko * 4 + ki]`` and
        ``C[i] += C_rf[ki, i]`` (``ki`` inserted into ``C_rf`` at ``factor_axis``). The two
        nests replace the block's own loop nest in place (loops shared with other statements,
        e.g. after ``compute_at``, stay shared), the rf nest first.
        """
        return _bridge.rfactor(self.state, loop, factor_axis)

    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Move ``block``'s init into its own block before ``loop``; returns the init block.

        Requires: the block has an init; ``loop`` is above it; no loop above ``loop`` binds
        a reduce iterator; the predicate uses only loops kept for the init.
        Rewrite: ``for i, k: C[i] (init 0) += ...`` -> ``for i: (C_init: C[i] = 0;
        for k: C[i] += ...)``.
        """
        return _bridge.decompose_reduction(self.state, block, loop)

    # -- sampling ---------------------------------------------------------------------------
    def sample_perfect_tile(
        self,
        loop: LoopRV,
        n: int,
        max_innermost_factor: int = 16,
        decision: Sequence[int] | None = None,
    ) -> list[ExprRV]:
        """Sample ``n`` factors whose product is the loop's extent.

        Requires: a constant extent; ``n >= 1``; a given ``decision`` has ``n`` positive
        factors with that product and the innermost at most ``max_innermost_factor``.
        Rewrite: none (the trace records the decision); use the values with ``split``.
        """
        return _sampling.sample_perfect_tile(  # type: ignore[return-value]
            self.state, loop, n, max_innermost_factor, decision
        )

    def sample_categorical(
        self, candidates: Sequence[int], probs: Sequence[float], decision: int | None = None
    ) -> ExprRV:
        """Pick one of ``candidates`` (ints) with probabilities ``probs``.

        Requires: as many probabilities as candidates, non-negative, not all zero; a given
        ``decision`` is a valid candidate index.
        Rewrite: none (the trace records the decision).
        """
        return _sampling.sample_categorical(self.state, candidates, probs, decision)  # type: ignore[return-value]

    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV:
        """Sample a compute_at location of ``block``.

        Decisions: -1 keeps the block at the root, -2 inlines it, ``k`` picks the k-th loop
        of its consumers where compute_at succeeds.
        Requires: a given ``decision`` names one of these locations.
        Rewrite: none (pass the returned handle to ``compute_at``).
        """
        return _sampling.sample_compute_location(self.state, block, decision)  # type: ignore[return-value]

    # -- block shape and padding ------------------------------------------------------------
    def get_output_blocks(self, scope_block: BlockRV) -> list[BlockRV]:
        """The blocks directly under ``scope_block`` (root too) writing a function output."""
        return _get_output_blocks(self.state, scope_block)

    def transform_block_layout(
        self, block: BlockRV, index_map: IndexMap | Callable[..., Any]
    ) -> None:
        """Re-map ``block``'s iteration space (its iterators and their loops) with
        ``index_map``, an :class:`IndexMap` or a callable such as ``lambda i, j: (j, i)``.

        Requires: the block owns its loop nest (one serial loop per iterator, perfectly
        nested around the block alone, each binding its iterator directly, from 0; no
        predicate); no opaque iterator; the map takes one index per iterator and is a
        bijection (permutations, splits, fusions) onto a 0-based box; each output index uses
        iterators of one kind. The old loops are replaced (their handles go stale).
        Rewrite: ``for i, j: C[vi=i, vj=j]`` -- ``lambda i, j: (i * n + j,)`` -->
        ``for ax0 in range(m * n): C[v0=ax0]`` with ``vi = v0 // n``, ``vj = v0 % n`` inside.
        """
        _transform_block_layout(self.state, block, _as_block_map(index_map))

    def pad_einsum(self, block: BlockRV, padding: Sequence[int]) -> None:
        """Pad the iteration space of einsum-like ``block`` up to multiples of ``padding``.

        Requires: one positive int per iterator, changing at least one extent; the block
        owns its loop nest, directly under its scope; every index of every access is one
        iterator or a constant, the stored buffer read only at the stored element; padded
        spatial iterators index the output, reduction iterators do not; a padded reduction
        iterator needs an init and ``C = C + a * b ...`` with a factor loaded at it; every
        access pads a buffer dimension the same way.
        Rewrite: ``for i, j, k in T.grid(127, 127, 127): C[i, j] += A[i, k] * B[k, j]`` --
        ``padding=[16, 16, 16]`` --> blocks ``A_pad``/``B_pad`` (zero-filled padded copies),
        the block over ``T.grid(128, 128, 128)`` on ``A_pad``, ``B_pad``, ``C_pad``, then
        ``C_unpad`` copying ``C_pad`` back over 127x127.
        """
        _pad_einsum(self.state, block, padding)

    def decompose_padding(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Split padding block ``block`` into a fill block, placed right before ``loop``,
        and the in-range copy; returns the fill block.

        Requires: the block stores ``B[...] = T.Select(cond, value, pad)`` with a load-free
        ``cond`` and a ``pad`` using no buffer and no iterator; no init, spatial iterators;
        it writes only ``B`` and does not read it; ``loop`` encloses it in its scope and the
        loops from ``loop`` down hold only this block.
        Rewrite: ``for i in range(6): P[i] = T.Select(1 <= i < 5, X[i - 1], 0.0)`` -->
        ``for i_1 in range(6): P[i_1] = 0.0`` (block ``P_pad_const``) then
        ``for i in range(1, 5): P[i] = X[i - 1]`` (constant bounds shrink the loops; other
        conditions become the block's predicate).
        """
        return _decompose_padding(self.state, block, loop)

"""The :class:`Schedule`: handles, queries and every primitive over one PrimFunc.

Each public method is a thin call of a traced state-level primitive (``primitives/*.py``);
its docstring repeats the primitive's Requires/Rewrite. A primitive either commits a new
PrimFunc or raises :class:`~tilecraft.errors.ScheduleError` and leaves the schedule unchanged:

- every argument is checked first, against the primitive's annotations
  (:mod:`tilecraft.schedule.arguments`): ``split: argument 'factors': expected a sequence of
  positive int or None, got 5``;
- an internal ``IRError`` / ``EvaluationError`` (or another tilecraft error) while building
  the new IR, and a ``RecursionError`` on IR nested too deeply, become a ScheduleError naming
  the primitive, chained to the original;
- any other exception is a bug: it propagates unchanged, and the schedule is still restored
  (see :meth:`ScheduleState.run_primitive`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..config import verify_schedules
from ..errors import ScheduleError
from ..ir import Block, BlockRealize, For, IRModule, PrimFunc
from ..ir import verify as verify_ir
from . import _tree
from ._buffer_methods import BufferPrimitives
from ._tensor_methods import TensorPrimitives
from .arguments import show
from .primitives import annotate as _annotate
from .primitives import compute_location as _location
from .primitives import guard as _guard
from .primitives import loop as _loop
from .primitives import query as _query
from .primitives import sampling as _sampling
from .primitives.index_map import IndexMap
from .result import TryResult
from .state import BlockRV, ExprRV, LoopRV, ScheduleState
from .trace import Trace

_T = TypeVar("_T")


class Schedule(BufferPrimitives, TensorPrimitives):
    """A schedule of one PrimFunc: handles, queries, primitives and the trace.

    Parameters
    ----------
    func
        The function to schedule, or an IRModule holding it.
    seed
        Seed of the random state used by sampling instructions (None: nondeterministic).
    func_name
        The function to schedule when ``func`` is a module.
    verify
        Run :func:`tilecraft.ir.verify` on the function after every primitive that changes
        it; a primitive whose result fails fails itself (ScheduleError, schedule unchanged).
        A debug aid (each check costs about a millisecond). None: the ``TILECRAFT_VERIFY``
        switch (:func:`tilecraft.config.verify_schedules`).

    Examples
    --------
    >>> sch = Schedule(func, seed=0)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> io, ii = sch.split(i, factors=[None, 32])
    """

    def __init__(
        self,
        func: PrimFunc | IRModule,
        seed: int | None = None,
        func_name: str = "main",
        *,
        verify: bool | None = None,
    ) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ScheduleError(
                "schedule", f"argument 'seed': expected an int or None, got {show(seed)}"
            )
        if not isinstance(func_name, str):
            raise ScheduleError(
                "schedule", f"argument 'func_name': expected a str, got {show(func_name)}"
            )
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
        if verify is not None and not isinstance(verify, bool):
            raise ScheduleError(
                "schedule", f"argument 'verify': expected a bool or None, got {show(verify)}"
            )
        self.func_name = func_name
        self.state = ScheduleState(_tree.ensure_root(target), seed)
        if verify_schedules() if verify is None else verify:
            self.state.post_commit_check = verify_ir

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
        """Re-seed the random state (``seed`` is an int)."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ScheduleError("seed", f"argument 'seed': expected an int, got {show(seed)}")
        self.state.rng.seed(seed)

    def try_(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> TryResult[_T]:
        """Call ``fn(*args, **kwargs)``; on ScheduleError undo it and report the failure.

        Returns a :class:`~tilecraft.schedule.TryResult`: truthy on success with the return
        value in ``.value`` (None for a primitive returning nothing), falsy on failure with
        the ScheduleError in ``.error`` and the schedule as it was before the call. Only
        ScheduleError is caught; any other exception also undoes ``fn``'s changes, then
        propagates.

        Examples
        --------
        >>> if not (res := sch.try_(sch.compute_inline, block)):
        ...     print(res.error.short)
        """
        if not callable(fn):
            raise ScheduleError("try_", f"argument 'fn': expected a callable, got {show(fn)}")
        try:
            with self.state.transaction():
                result = fn(*args, **kwargs)
        except ScheduleError as e:
            return TryResult.failure(e)
        return TryResult.success(result)

    def show(self) -> None:
        """Print the scheduled function's script."""
        self.state.func.show()

    # -- queries ----------------------------------------------------------------------------
    def get(self, rv: BlockRV | LoopRV | int) -> Block | For | int:
        """The IR node a handle refers to (Block for a block, For for a loop, int for a value)."""
        st = self.state
        saved, st.primitive = st.primitive, "get"
        try:
            with st.using_index():
                return st.get(rv)
        finally:
            st.primitive = saved

    def get_realize(self, block: BlockRV) -> BlockRealize:
        """The BlockRealize node of ``block`` now: the block with its iterator bindings.

        ``sch.get(block)`` is the Block alone; its ``iter_values`` (which loop variables each
        block iterator is bound to) live on the BlockRealize. Not traced (a read, like
        :meth:`get`). Requires: ``block`` is a block handle that is not stale (else
        ScheduleError).
        """
        if not isinstance(block, BlockRV):
            raise ScheduleError(
                "get_realize", f"argument 'block': expected a BlockRV, got {show(block)}"
            )
        st = self.state
        saved, st.primitive = st.primitive, "get_realize"
        try:
            with st.using_index():
                return st.get_block(block)
        finally:
            st.primitive = saved

    def get_block(self, name: str) -> BlockRV:
        """The handle of block ``name``."""
        return _query.get_block(self.state, name)

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops above ``block`` (up to its scope block), outermost first."""
        return _query.get_loops(self.state, block)

    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        """The blocks directly under a block or loop."""
        return _query.get_child_blocks(self.state, block_or_loop)

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope writing what ``block`` reads."""
        return _query.get_producers(self.state, block)

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope reading what ``block`` writes."""
        return _query.get_consumers(self.state, block)

    # -- trace markers ----------------------------------------------------------------------
    def enter_postproc(self) -> None:
        """Record that the instructions from here on are postprocessing.

        Requires: nothing. Rewrite: none; the trace gains an ``enter_postproc`` marker that
        ``Trace.apply_to_schedule(..., remove_postproc=True)`` stops at and
        ``Trace.simplified(remove_postproc=True)`` cuts at.
        """
        _query.enter_postproc(self.state)

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

    def guard(
        self,
        block: BlockRV,
        loops: Sequence[LoopRV],
        bound: IndexMap | Callable[..., Any],
    ) -> None:
        """Run ``block`` only where ``lo <= hi``, ``(lo, hi) = bound(*loops)``.

        Requires: (1) the block is not the root and has no init (decompose the reduction
        first); (2) every loop encloses the block; (3) ``bound`` takes one index per loop and
        gives two. The caller asserts that the skipped instances are not needed: no consumer
        reads what they would write, a skipped reduction update would combine its identity
        (:mod:`tilecraft.schedule.primitives.guard`).
        Rewrite: the block's predicate ``p`` becomes ``p and lo <= hi``.
        """
        _guard.guard(self.state, block, loops, bound)

    def unroll(self, loop: LoopRV) -> None:
        """Unroll a serial loop.

        Requires: the loop is serial.
        Rewrite: ``for i in range(n)`` -> ``for i in T.unroll(n)``.
        """
        _annotate.unroll(self.state, loop)

    def bind(self, loop: LoopRV, thread: str) -> None:
        """Bind a serial loop to ``blockIdx.x/y/z``, ``threadIdx.x/y/z`` or ``vthread``.

        Requires: blockIdx/vthread bind spatial iterators only, threadIdx may bind reduction
        iterators (cross-thread reduction); a loop nested in (or around) a loop on the same
        axis iterates the same thread index, so nothing under the inner loop may use the
        outer loop's variable, the inner extent is at most the outer one, and the blocks under
        it can run again with the same result (the cooperative fetch of a shared tile).
        """
        _annotate.bind(self.state, loop, thread)

    def annotate(self, block_or_loop: BlockRV | LoopRV, key: str, value: Any) -> None:
        """Set annotation ``key`` = ``value`` on a block or loop.

        Requires: ``value`` is a bool, int, float, str or a (nested) list of them; the keys
        lowering acts on hold what it can use (``pragma_auto_unroll_max_step``: an int from 0
        to 1024; ``software_pipeline_stage`` / ``software_pipeline_order``, on loops: stages
        0 or ``S - 1 >= 1`` / a permutation).
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
        The region is relaxed over the enclosing thread loops that share the block's buffer
        (shared: threadIdx and vthread; global: all; local: none), so a shared cache under
        threadIdx loops covers the whole thread block's tile.
        A root location handle (``sample_compute_location``) keeps the block where it is,
        an inline handle inlines it.
        Rewrite: ``for i: B[i] = ...; for i: for j: C[i, j] = B[i]`` -- compute_at(B, C's i)
        --> ``for i: (B[i] = ...; for j: C[i, j] = B[i])``.
        """
        _location.compute_at(self.state, block, loop, preserve_unit_loops, index)

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
        _location.reverse_compute_at(self.state, block, loop, preserve_unit_loops, index)

    def compute_inline(self, block: BlockRV) -> None:
        """Inline producer ``block`` into its consumers.

        Requires: the block is a single store ``B[v...] = expr`` indexed by distinct iterators
        (no reduction, no init); it writes no function output.
        Rewrite: ``B[i] = A[i] + 1; C[i] = B[i] * 2`` -> ``C[i] = (A[i] + 1) * 2``.
        """
        _location.compute_inline(self.state, block)

    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Inline consumer ``block`` into its single producer.

        Requires: the block is a single store reading the producer's buffer once, at the
        block's own distinct iterators; the producer is not a reduction.
        Rewrite: ``B[i] = A[i] + 1; C[i] = B[i] * 2`` -> ``C[i] = (A[i] + 1) * 2``.
        """
        _location.reverse_compute_inline(self.state, block)

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

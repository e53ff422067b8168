"""Schedule state: the current PrimFunc, handle bookkeeping, the random state and the trace.

Every primitive runs through :meth:`ScheduleState.run_primitive`, the one place that makes a
primitive a safe boundary:

1. it takes a :class:`Snapshot` (function, handle generations, trace length, random state);
2. it runs the primitive with this state's own index cache active;
3. on a :class:`~tilecraft.errors.ScheduleError` it restores the snapshot and re-raises (under
   the running primitive's name when a nested primitive failed);
4. on another tilecraft error (an ``IRError`` from building IR, such as an int32 overflow
   of a fused symbolic extent; an ``EvaluationError``) or a ``RecursionError`` (IR nested
   deeper than a recursive helper can follow) it restores the snapshot and raises a
   ScheduleError naming the primitive, chained to the original (``raise ... from e``);
   any other exception (``AttributeError``, ``KeyError``, ...) is a bug: the snapshot is
   restored and the exception propagates unchanged;
5. after success it runs :attr:`ScheduleState.post_commit_check` (a debug hook, see there)
   and appends the instruction to the trace.

Handles live in :mod:`.handles` (re-exported here).
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import ScheduleError, TilecraftError
from ..ir import Block, BlockRealize, For, PrimFunc, Var
from . import _tree
from .handles import INLINE as INLINE
from .handles import ROOT as ROOT
from .handles import RV as RV
from .handles import BlockRV as BlockRV
from .handles import ExprRV as ExprRV
from .handles import LoopRV as LoopRV
from .instruction import InstructionKind
from .trace import Trace


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything :meth:`ScheduleState.restore` needs to undo later changes."""

    func: PrimFunc
    block_gen: dict[str, int]
    trace_len: int
    rng_state: tuple[Any, ...]


class _Random(random.Random):
    """``random.Random`` that knows whether it drew since its state was last read.

    Every primitive snapshots the random state so that a failing call can be undone; reading
    the state copies 625 words. Draws are rare in rule scheduling, so :meth:`state` reads it
    again only after a draw (``random`` and ``getrandbits`` are what every other method draws
    through), a seed or a restore.
    """

    def __init__(self, seed: int | None = None) -> None:
        self._saved: tuple[Any, ...] | None = None
        super().__init__(seed)

    def random(self) -> float:
        self._saved = None
        return super().random()

    def getrandbits(self, k: int, /) -> int:
        self._saved = None
        return super().getrandbits(k)

    def seed(self, a: Any = None, version: int = 2) -> None:
        self._saved = None
        super().seed(a, version)

    def setstate(self, state: tuple[Any, ...]) -> None:
        super().setstate(state)
        self._saved = state

    def state(self) -> tuple[Any, ...]:
        """``getstate()``, read again only when the generator moved since the last read."""
        if self._saved is None:
            self._saved = self.getstate()
        return self._saved


class ScheduleState:
    """Current function, handle bookkeeping, random state and trace of one schedule.

    A primitive reads ``state.func``, checks, builds a new PrimFunc and calls :meth:`commit`.
    It runs inside :meth:`run_primitive`, which undoes every commit of a failing call.

    A state (and its :class:`~tilecraft.schedule.Schedule`) is driven by one thread at a
    time; several threads may each drive their own.

    Parameters
    ----------
    func
        The function to schedule.
    seed
        Seed of the random state (None: nondeterministic).
    """

    def __init__(self, func: PrimFunc, seed: int | None = None) -> None:
        self.func = func
        # name -> generation; bumped when a block name disappears so stale handles are caught
        self.block_gen: dict[str, int] = {}
        self.rng: random.Random = _Random(
            seed if seed is not None else random.SystemRandom().getrandbits(63)
        )
        self.trace: Trace = Trace()
        self.primitive = "schedule"  # the primitive now running (for error messages)
        self.depth = 0  # nesting of traced primitives; only depth 0 records
        self.index_cache = _tree.IndexCache()
        self.post_commit_check: Callable[[PrimFunc], None] | None = None
        """Called with the new function after every successful outermost primitive that
        changed it, before the instruction is recorded. A debug switch sets it to the IR
        verifier; an ``IRError`` it raises fails the primitive (ScheduleError, schedule
        unchanged)."""

    # -- handles ----------------------------------------------------------------------------
    def block_rv(self, name: str) -> BlockRV:
        """A fresh handle of block ``name`` (which must exist)."""
        if not _tree.has_block(self.func, name):
            raise self.error(
                f'no block named "{name}"',
                requires="the block exists in the function",
                hint=f"blocks are {_tree.names_of(_tree.block_names(self.func))}",
            )
        return BlockRV(name, self.block_gen.get(name, 0))

    def loop_rv(self, var: Var) -> LoopRV:
        """A handle of the loop whose variable is ``var``."""
        return LoopRV(var)

    def block_name(self, rv: BlockRV) -> str:
        """The name of the block ``rv`` refers to; ScheduleError when stale."""
        if not isinstance(rv, BlockRV):
            raise self.error(f"expected a block handle, got {type(rv).__name__}")
        if rv._gen != self.block_gen.get(rv.name, 0) or not _tree.has_block(self.func, rv.name):
            raise self.error(
                f'block handle "{rv.name}" is stale',
                requires="the handle refers to a block that still exists",
                hint="take a fresh handle with get_block after primitives that remove blocks",
            )
        return rv.name

    def loop_var(self, rv: LoopRV) -> Var:
        """The loop variable ``rv`` refers to; ScheduleError when stale or special."""
        if not isinstance(rv, LoopRV):
            raise self.error(f"expected a loop handle, got {type(rv).__name__}")
        if rv.var is None:
            raise self.error(
                f"the {rv.special} location handle is not a loop",
                hint="only compute_at/reverse_compute_at accept it",
            )
        if not _tree.has_loop(self.func, rv.var):
            raise self.error(
                f'loop handle "{rv.var.name}" is stale',
                requires="the handle refers to a loop that still exists",
                hint="primitives such as split/fuse replace loops; use the handles they return",
            )
        return rv.var

    def get_block(self, rv: BlockRV) -> BlockRealize:
        """The BlockRealize ``rv`` refers to."""
        return _tree.find_block(self.func, self.block_name(rv))[0]

    def get_loop(self, rv: LoopRV) -> For:
        """The For ``rv`` refers to."""
        return _tree.find_loop(self.func, self.loop_var(rv))

    def get(self, rv: BlockRV | LoopRV | int) -> Block | For | int:
        """The IR node (Block / For) or integer value a handle refers to."""
        if isinstance(rv, BlockRV):
            return self.get_block(rv).block
        if isinstance(rv, LoopRV):
            return self.get_loop(rv)
        if isinstance(rv, int) and not isinstance(rv, bool):
            return int(rv)
        raise self.error(
            f"argument 'rv': expected a BlockRV, LoopRV or int, got {type(rv).__name__}"
        )

    # -- commit -----------------------------------------------------------------------------
    def commit(self, new_func: PrimFunc) -> None:
        """Make ``new_func`` current; block names that disappeared invalidate their handles."""
        if new_func is self.func:
            return
        old_names = _tree.index(self.func).blocks
        new_names = _tree.index(new_func).blocks
        for name in old_names:
            if name not in new_names:
                self.block_gen[name] = self.block_gen.get(name, 0) + 1
        self.func = new_func

    # -- transactions -----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """What :meth:`restore` needs to return to the present state."""
        return Snapshot(self.func, dict(self.block_gen), len(self.trace), self._rng_state())

    def _rng_state(self) -> tuple[Any, ...]:
        rng = self.rng
        return rng.state() if isinstance(rng, _Random) else rng.getstate()

    def restore(self, snap: Snapshot) -> None:
        """Return to ``snap``: its function, handle generations, trace prefix, random state."""
        self.func = snap.func
        self.block_gen = dict(snap.block_gen)
        self.trace.truncate(snap.trace_len)
        self.rng.setstate(snap.rng_state)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        snap = self.snapshot()
        try:
            yield
        except BaseException:
            self.restore(snap)
            raise

    def transaction(self) -> AbstractContextManager[None]:
        """A ``with`` block whose changes are all undone when it raises (the error propagates)."""
        return self._transaction()

    def using_index(self) -> AbstractContextManager[None]:
        """A ``with`` block in which tree lookups use this state's index cache."""
        return _tree.using_cache(self.index_cache)

    def run_primitive(
        self, kind: InstructionKind, fn: Callable[..., Any], bound: inspect.BoundArguments
    ) -> Any:
        """Run primitive ``fn`` as instruction ``kind``: all or nothing, then record it.

        See the module docstring for what is caught, converted and restored.
        """
        outer = self.depth == 0
        snap = self.snapshot() if outer else None
        saved = self.primitive
        self.primitive = kind.name
        self.depth += 1
        decision = None
        try:
            with self.using_index():
                result = fn(*bound.args, **bound.kwargs)
                if kind.sampling:
                    result, decision = result
                if snap is not None and self.func is not snap.func:
                    self._after_commit()
        except ScheduleError as e:
            if snap is not None:
                self.restore(snap)
            if e.primitive == kind.name:
                raise
            raise _renamed(kind.name, e) from e
        except (TilecraftError, RecursionError) as e:
            if snap is not None:
                self.restore(snap)
            raise _internal(kind.name, e) from e
        except BaseException:
            if snap is not None:
                self.restore(snap)
            raise
        finally:
            self.depth -= 1
            self.primitive = saved
        if outer:
            self.trace.append(kind.record(bound.arguments, result, decision))
        return result

    def _after_commit(self) -> None:
        """The post-commit check of the function the primitive just committed."""
        if self.post_commit_check is not None:
            self.post_commit_check(self.func)

    # -- errors -----------------------------------------------------------------------------
    def error(
        self,
        short: str,
        *,
        requires: str = "",
        fragment: str = "",
        hint: str = "",
        locations: Sequence[str] = (),
    ) -> ScheduleError:
        """A ScheduleError naming the running primitive."""
        return ScheduleError(
            self.primitive,
            short,
            requires=requires,
            fragment=fragment,
            hint=hint,
            locations=locations,
        )

    def copy(self) -> ScheduleState:
        """An independent copy: same function, handles, random state and trace."""
        new = ScheduleState.__new__(ScheduleState)
        new.func = self.func
        new.block_gen = dict(self.block_gen)
        new.rng = _Random()
        new.rng.setstate(self._rng_state())
        new.trace = self.trace.copy()
        new.primitive = "schedule"
        new.depth = 0
        new.index_cache = _tree.IndexCache()
        new.post_commit_check = self.post_commit_check
        return new


def _renamed(name: str, e: ScheduleError) -> ScheduleError:
    """``e`` (raised by a nested primitive or helper) re-raised under primitive ``name``."""
    return ScheduleError(
        name,
        f"{e.primitive}: {e.short}",
        requires=e.requires,
        fragment=e.fragment,
        hint=e.hint,
        locations=e.locations,
    )


def _internal(name: str, e: BaseException) -> ScheduleError:
    """The ScheduleError reporting an internal error ``e`` of primitive ``name``."""
    if isinstance(e, RecursionError):
        return ScheduleError(
            name,
            "the function is nested too deeply for this primitive (RecursionError)",
            requires="IR shallow enough for the schedule's recursive helpers",
            hint="the schedule is unchanged",
        )
    first = str(e).splitlines()[0] if str(e) else ""
    return ScheduleError(
        name,
        f"building the new IR failed: {type(e).__name__}: {first}",
        requires="the rewritten function is valid IR (for example, extents and indices fit "
        "their integer type)",
        hint="the schedule is unchanged; with symbolic shapes, a fused or cached extent can "
        "overflow int32",
    )

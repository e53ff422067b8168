"""The trace: the instructions a schedule applied, with their sampling decisions.

A trace prints as Python that reproduces it (:meth:`Trace.as_python`), round-trips exactly
through JSON (:meth:`Trace.as_json` / :meth:`Trace.from_json`; no pickle, no eval) and replays
onto a fresh schedule of the original function (:meth:`Trace.apply_to_schedule`).

Tools for searches and mutators:

- :meth:`Trace.with_decision` changes one sampling decision; ``apply_to_schedule(sch,
  decisions={index: decision})`` replays with decisions overridden, leaving the trace as is;
- :meth:`Trace.simplified` drops dead instructions (queries and samples whose outputs
  nothing uses) and, when asked, the postprocessing part;
- ``sch.enter_postproc()`` records a marker: the instructions after it are postprocessing
  (added by postprocessors after a search rule built the schedule); ``remove_postproc=True``
  replays or keeps only the part before it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..errors import ScheduleError
from ._trace_json import FORMAT as FORMAT
from ._trace_json import VERSION as VERSION
from ._trace_json import TraceFormatError as TraceFormatError
from ._trace_json import decode, encode, output_names
from .handles import BlockRV, ExprRV, LoopRV
from .instruction import (
    ENTER_POSTPROC,
    INSTRUCTION_KINDS,
    Instruction,
    InstructionKind,
    PrimitiveHost,
    freeze,
)
from .primitives.index_map import IndexMap


class ReplayState(PrimitiveHost, Protocol):
    """What replay needs from a schedule's state (a ``ScheduleState`` provides it)."""

    def transaction(self) -> AbstractContextManager[None]:
        """A ``with`` block undone entirely when it raises."""


class ReplayTarget(Protocol):
    """What :meth:`Trace.apply_to_schedule` replays onto (a ``Schedule``)."""

    @property
    def state(self) -> ReplayState:
        """The schedule's state."""


class Trace:
    """An ordered list of :class:`~tilecraft.schedule.instruction.Instruction`.

    Parameters
    ----------
    insts
        The instructions, oldest first.
    """

    __slots__ = ("_insts",)

    def __init__(self, insts: Sequence[Instruction] = ()) -> None:
        if not isinstance(insts, Sequence) or not all(isinstance(i, Instruction) for i in insts):
            raise TraceFormatError("Trace: expected a sequence of Instruction")
        self._insts: list[Instruction] = list(insts)

    # -- container --------------------------------------------------------------------------
    @property
    def insts(self) -> tuple[Instruction, ...]:
        """The instructions, oldest first."""
        return tuple(self._insts)

    def __len__(self) -> int:
        return len(self._insts)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self._insts)

    def __getitem__(self, i: int) -> Instruction:
        return self._insts[i]

    def append(self, inst: Instruction) -> None:
        """Add ``inst`` at the end (used by ``@primitive``)."""
        self._insts.append(inst)

    def copy(self) -> Trace:
        """A shallow copy (instructions are immutable)."""
        return Trace(self._insts)

    def truncate(self, n: int) -> None:
        """Drop every instruction after the first ``n`` (used to roll back a failed call)."""
        del self._insts[n:]

    # -- decisions --------------------------------------------------------------------------
    def sampling_indices(self) -> list[int]:
        """Indices of the instructions that carry a sampling decision."""
        return [i for i, inst in enumerate(self._insts) if _kind(inst, i).sampling]

    def _sampling_index(self, inst_index: object, what: str) -> int:
        """``inst_index`` as a non-negative index of a sampling instruction."""
        n = len(self._insts)
        if isinstance(inst_index, bool) or not isinstance(inst_index, int):
            raise TraceFormatError(f"{what}: index must be an int, got {inst_index!r:.60}")
        if not -n <= inst_index < n:
            raise TraceFormatError(f"{what}: index {inst_index} out of range for {n} instructions")
        k = inst_index % n
        inst = self._insts[k]
        if not _kind(inst, k).sampling:
            raise TraceFormatError(
                f"{what}: instruction {inst_index} ({inst.kind}) has no decision; "
                f"sampling instructions are at {self.sampling_indices()}"
            )
        return k

    def with_decision(self, inst_index: int, decision: Any) -> Trace:
        """A new trace whose instruction ``inst_index`` uses ``decision`` on replay.

        Raises
        ------
        TraceFormatError
            When the index is not an int, out of range, or the instruction does not sample.
        """
        k = self._sampling_index(inst_index, "with_decision")
        insts = list(self._insts)
        insts[k] = insts[k].with_decision(freeze(decision))
        return Trace(insts)

    # -- postprocessing and dead code -------------------------------------------------------
    def postproc_index(self) -> int | None:
        """Index of the first ``enter_postproc`` marker (None when there is none)."""
        return next((i for i, s in enumerate(self._insts) if s.kind == ENTER_POSTPROC), None)

    def simplified(self, remove_postproc: bool) -> Trace:
        """A trace that replays to the same function, without dead instructions.

        An instruction is dead when its kind is pure (a query or a sampling instruction) and
        no kept instruction uses any of its outputs. With ``remove_postproc`` the first
        ``enter_postproc`` marker and everything after it are dropped first.

        Raises
        ------
        TraceFormatError
            When ``remove_postproc`` is not a bool.
        """
        if not isinstance(remove_postproc, bool):
            raise TraceFormatError(
                f"simplified: remove_postproc must be a bool, got {remove_postproc!r:.60}"
            )
        insts = self._insts
        cut = self.postproc_index() if remove_postproc else None
        if cut is not None:
            insts = insts[:cut]
        used: set[int] = set()
        kept: list[Instruction] = []
        for i in range(len(insts) - 1, -1, -1):
            inst = insts[i]
            if _kind(inst, i).pure and not any(id(o) in used for o in inst.outputs):
                continue
            kept.append(inst)
            used.update(id(h) for h in _handles(inst.inputs))
        kept.reverse()
        return Trace(kept)

    # -- replay -----------------------------------------------------------------------------
    def apply_to_schedule(
        self,
        sch: ReplayTarget,
        *,
        decisions: Mapping[int, Any] | None = None,
        remove_postproc: bool = False,
    ) -> None:
        """Replay the instructions on ``sch`` (a fresh schedule of the original function).

        Parameters
        ----------
        sch
            The schedule to apply the instructions to; its trace records them again.
        decisions
            ``{instruction index: decision}`` overriding recorded sampling decisions for this
            replay (indices as in ``trace[i]``; negative ones count from the end). The trace
            itself is not changed; ``with_decision`` makes a changed copy instead.
        remove_postproc
            Stop at the first ``enter_postproc`` marker (not replayed).

        The replay is all or nothing: when it raises, ``sch`` is as before the call.

        Raises
        ------
        ScheduleError
            When an instruction no longer applies (for example a decision that does not fit).
        TraceFormatError
            When ``decisions`` names a non-sampling instruction or the trace itself is
            inconsistent (a handle used before an instruction defines it).
        """
        overrides = self._overrides(decisions)
        if not isinstance(remove_postproc, bool):
            raise TraceFormatError(
                f"replay: remove_postproc must be a bool, got {remove_postproc!r:.60}"
            )
        state = sch.state
        with state.transaction():
            rv_map: dict[int, Any] = {}
            for i, inst in enumerate(self._insts):
                if remove_postproc and inst.kind == ENTER_POSTPROC:
                    break
                _replay_one(state, _kind(inst, i), inst, rv_map, overrides.get(i, inst.decision))

    def _overrides(self, decisions: object) -> dict[int, Any]:
        if decisions is None:
            return {}
        if not isinstance(decisions, Mapping):
            raise TraceFormatError(f"replay: decisions must be a mapping, got {decisions!r:.60}")
        return {self._sampling_index(k, "replay"): freeze(v) for k, v in decisions.items()}

    # -- printing ---------------------------------------------------------------------------
    def as_python(self) -> str:
        """Python statements (``sch.<primitive>(...)``) that reproduce this trace."""
        names = output_names(self._insts)
        return "\n".join(
            _inst_py(_kind(inst, i), inst, names) for i, inst in enumerate(self._insts)
        )

    def __str__(self) -> str:
        return self.as_python()

    def __repr__(self) -> str:
        return f"Trace({len(self._insts)} instructions)"

    # -- JSON -------------------------------------------------------------------------------
    def as_json(self) -> str:
        """A JSON string holding every instruction; :meth:`from_json` restores it exactly."""
        return encode(self._insts)

    @staticmethod
    def from_json(text: str) -> Trace:
        """Rebuild a trace from :meth:`as_json` text.

        Raises
        ------
        TraceFormatError
            When ``text`` is not valid JSON or not a well-formed trace (see
            :mod:`tilecraft.schedule._trace_json` for everything that is checked).
        """
        return Trace(decode(text))


def _kind(inst: Instruction, i: int) -> InstructionKind:
    kind = INSTRUCTION_KINDS.get(inst.kind)
    if kind is None:
        raise TraceFormatError(f"trace: instruction {i}: unknown instruction kind {inst.kind!r}")
    return kind


def _handles(value: Any) -> Iterator[BlockRV | LoopRV | ExprRV]:
    """Every handle inside ``value`` (tuples and dicts searched)."""
    if isinstance(value, BlockRV | LoopRV | ExprRV):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _handles(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _handles(v)


def _outputs(result: Any) -> tuple[Any, ...]:
    if result is None:
        return ()
    if isinstance(result, list | tuple):
        return tuple(result)
    return (result,)


def _replay_one(
    state: ReplayState,
    kind: InstructionKind,
    inst: Instruction,
    rv_map: dict[int, Any],
    decision: Any,
) -> None:
    """Apply ``inst`` to ``state``, mapping its handles through ``rv_map`` (updated)."""
    args, kwargs = _call_arguments(kind, inst, rv_map, decision)
    outs = _outputs(kind.func(state, *args, **kwargs))
    if len(outs) != len(inst.outputs):
        raise ScheduleError(
            inst.kind,
            f"replay returned {len(outs)} handles, the trace expects {len(inst.outputs)}",
            hint="the trace was recorded on a different function",
        )
    for old, new in zip(inst.outputs, outs, strict=True):
        rv_map[id(old)] = new


def _call_arguments(
    kind: InstructionKind, inst: Instruction, rv_map: dict[int, Any], decision: Any
) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments replaying ``inst`` with handles mapped."""
    values = dict(zip(kind.inputs, (_map_rvs(v, rv_map) for v in inst.inputs), strict=True))
    values.update(inst.attrs)
    if kind.sampling:
        values["decision"] = decision
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for name, pkind, _ in kind.params:
        if name not in values:
            continue
        if pkind.name == "VAR_POSITIONAL":
            args.extend(values[name])
        elif pkind.name == "KEYWORD_ONLY":
            kwargs[name] = values[name]
        else:
            args.append(values[name])
    return args, kwargs


def _map_rvs(value: Any, rv_map: dict[int, Any]) -> Any:
    if isinstance(value, BlockRV | LoopRV | ExprRV):
        hit = rv_map.get(id(value))
        if hit is not None:
            return hit
        if isinstance(value, ExprRV):
            return int(value)
        raise TraceFormatError(f"trace: replay: handle {value!r} is not defined by the trace")
    if isinstance(value, tuple):
        return [_map_rvs(v, rv_map) for v in value]
    return value


# -- printing -------------------------------------------------------------------------------
def _inst_py(kind: InstructionKind, inst: Instruction, names: dict[int, str]) -> str:
    parts: list[str] = []
    first = True
    inputs = dict(zip(kind.inputs, inst.inputs, strict=True))
    attrs = dict(inst.attrs)
    for name, pkind, default in kind.params:
        if name == "decision":
            continue
        if name in inputs:
            if pkind.name == "VAR_POSITIONAL":
                parts.extend(_py(v, names) for v in inputs[name])
                first = False
                continue
            text = _py(inputs[name], names)
        else:
            value = attrs[name]
            if not first and _same(value, default):
                continue
            text = _py(value, names)
        parts.append(text if first and pkind.name == "POSITIONAL_OR_KEYWORD" else f"{name}={text}")
        first = False
    if kind.sampling:
        parts.append(f"decision={_py(inst.decision, names)}")
    call = f"sch.{inst.kind}({', '.join(parts)})"
    outs = [names[id(o)] for o in inst.outputs]
    if kind.outputs == "none" or (kind.outputs == "many" and not outs):
        return call
    if kind.outputs == "one":
        return f"{outs[0]} = {call}"
    if len(outs) == 1:
        return f"({outs[0]},) = {call}"
    return f"{', '.join(outs)} = {call}"


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _py(value: Any, names: dict[int, str]) -> str:
    if isinstance(value, IndexMap):
        params = ", ".join(v.name for v in value.initial_indices)
        outs = ", ".join(_expr_py(e) for e in value.final_indices)
        tail = "," if len(value.final_indices) == 1 else ""
        return f"lambda {params}: ({outs}{tail})"
    if isinstance(value, BlockRV | LoopRV | ExprRV) and id(value) in names:
        return names[id(value)]
    if isinstance(value, BlockRV | LoopRV):
        raise TraceFormatError(f"trace: handle {value!r} is not defined by an earlier instruction")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_py(v, names) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_py(v, names)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    raise TraceFormatError(f"trace: cannot print value {value!r}")


_EXPR_SYM = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%"}


def _expr_py(e: Any) -> str:
    from ..ir import IntImm, Var

    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        return str(e.value)
    name = type(e).__name__
    if name in _EXPR_SYM:
        return f"({_expr_py(e.a)} {_EXPR_SYM[name]} {_expr_py(e.b)})"
    if name in ("Min", "Max"):
        return f"T.{name.lower()}({_expr_py(e.a)}, {_expr_py(e.b)})"
    raise TraceFormatError(f"trace: index map expression {name} is not supported")

"""Instructions: one recorded call of a schedule primitive, and the ``@primitive`` decorator.

``@primitive("split", inputs=("loop", "factors"), outputs="many")`` registers a state-level
function ``split(state, loop, factors, *, preserve_unit_iters=True)`` as instruction kind
``"split"`` and returns its traced version. A call of the traced function

1. binds and checks every argument against the parameter annotations
   (:mod:`~tilecraft.schedule.arguments`), raising ScheduleError naming the argument;
2. hands the call to the state (:meth:`ScheduleState.run_primitive`), which snapshots the
   schedule, runs the function, turns internal errors into ScheduleError, restores the
   snapshot on any failure, runs the post-commit check and appends an :class:`Instruction`.

Parameters named in ``inputs`` may hold handles (mapped on replay); the others are *attrs*
(plain JSON-able literals). A sampling primitive (``sampling=True``) takes ``decision=`` and
returns ``(result, decision_used)``; the decision is recorded with the instruction. A
``pure`` primitive (a query) does not change the function; :meth:`Trace.simplified` drops it
when nothing uses its outputs.

Imports: this module depends only on :mod:`.handles` and :mod:`.arguments`; the trace
imports it, and the state imports both (no cycle).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from ..errors import ScheduleError
from .arguments import ArgSpec, check_args, from_annotation
from .handles import BlockRV, ExprRV, LoopRV

OutputArity = Literal["one", "many", "none"]
_F = TypeVar("_F", bound=Callable[..., Any])
HandleType = type[BlockRV] | type[LoopRV] | type[ExprRV]

ENTER_POSTPROC = "enter_postproc"
"""Kind of the marker instruction after which postprocessing instructions follow."""


@dataclass(frozen=True, slots=True)
class InstructionKind:
    """The registered description of a primitive: its parameters and how it returns.

    Attributes
    ----------
    name
        Instruction kind, also the ``Schedule`` method name (``"split"``).
    params
        ``(name, inspect kind, default)`` for every parameter after ``state``.
    inputs
        Parameters that may hold handles.
    outputs
        ``"one"`` (a single handle or value), ``"many"`` (a list) or ``"none"``.
    sampling
        Whether the primitive takes ``decision=`` and records it.
    func
        The traced state-level function.
    pure
        The primitive does not change the function (queries, sampling).
    checks
        ``(parameter, check, is *args)`` for every parameter, from the annotations.
    output_type
        The handle type of every output (None when mixed or unknown).
    """

    name: str
    params: tuple[tuple[str, Any, Any], ...]
    inputs: tuple[str, ...]
    outputs: OutputArity
    sampling: bool
    func: Callable[..., Any]
    pure: bool = False
    checks: tuple[ArgSpec, ...] = ()
    output_type: HandleType | None = None

    @property
    def attr_names(self) -> tuple[str, ...]:
        """Parameters that are not inputs (and not ``decision``)."""
        return tuple(p for p, _, _ in self.params if p not in self.inputs and p != "decision")

    def default(self, name: str) -> Any:
        """Default value of parameter ``name`` (``inspect.Parameter.empty`` when none)."""
        for p, _, d in self.params:
            if p == name:
                return d
        return inspect.Parameter.empty

    def record(self, arguments: dict[str, Any], result: Any, decision: Any) -> Instruction:
        """The :class:`Instruction` of one successful call with bound ``arguments``."""
        return Instruction(
            self.name,
            tuple(freeze(arguments[n]) for n in self.inputs),
            tuple((n, freeze(arguments[n])) for n in self.attr_names),
            freeze(decision),
            outputs_of(result),
        )


INSTRUCTION_KINDS: dict[str, InstructionKind] = {}
"""Every registered instruction kind, by name."""


@dataclass(frozen=True, slots=True)
class Instruction:
    """One applied primitive.

    Attributes
    ----------
    kind
        Instruction kind name (``"split"``).
    inputs
        Values of the kind's input parameters, in order; handles appear as handle objects,
        lists as tuples.
    attrs
        ``(name, value)`` of the other parameters (literals).
    decision
        The sampling decision (``None`` for non-sampling instructions).
    outputs
        Handles / sampled values the call returned.
    """

    kind: str
    inputs: tuple[Any, ...]
    attrs: tuple[tuple[str, Any], ...]
    decision: Any
    outputs: tuple[BlockRV | LoopRV | ExprRV, ...]

    def with_decision(self, decision: Any) -> Instruction:
        """A copy with ``decision`` replaced."""
        return Instruction(self.kind, self.inputs, self.attrs, decision, self.outputs)


def freeze(value: Any) -> Any:
    """``value`` with every list turned into a tuple (recursively)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


_freeze = freeze  # the name used before the helper became public


def outputs_of(result: Any) -> tuple[BlockRV | LoopRV | ExprRV, ...]:
    """The outputs tuple of a primitive's return value."""
    if result is None:
        return ()
    if isinstance(result, list | tuple):
        return tuple(result)
    return (result,)


class PrimitiveHost(Protocol):
    """What a traced primitive needs from its first argument (a ``ScheduleState``)."""

    def run_primitive(
        self, kind: InstructionKind, fn: Callable[..., Any], bound: inspect.BoundArguments
    ) -> Any:
        """Run ``fn`` with ``bound`` as instruction ``kind`` (transactional, traced)."""


def _output_type(hint: Any, sampling: bool) -> HandleType | None:
    if sampling and typing.get_origin(hint) is tuple:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (list, tuple):
        hint = typing.get_args(hint)[0]
    if hint in (BlockRV, LoopRV, ExprRV):
        out: HandleType = hint
        return out
    return None


def _checks(fn: Callable[..., Any], sig: inspect.Signature) -> tuple[ArgSpec, ...]:
    hints = typing.get_type_hints(fn, include_extras=True)
    out: list[ArgSpec] = []
    for p in list(sig.parameters.values())[1:]:
        if p.name not in hints:
            raise TypeError(f"primitive {fn.__name__}: parameter {p.name!r} has no annotation")
        star = p.kind is inspect.Parameter.VAR_POSITIONAL
        out.append((p.name, from_annotation(hints[p.name]), star))
    return tuple(out)


def primitive(
    kind: str,
    *,
    inputs: tuple[str, ...] = (),
    outputs: OutputArity = "none",
    sampling: bool = False,
    pure: bool = False,
) -> Callable[[_F], _F]:
    """Register a state-level primitive as instruction ``kind`` and trace its calls.

    Parameters
    ----------
    kind
        The instruction name; the ``Schedule`` method of the same name calls the function.
    inputs
        Parameters that may hold handles (mapped on replay).
    outputs
        ``"one"``, ``"many"`` or ``"none"``: the shape of the return value.
    sampling
        The function takes ``decision=`` and returns ``(result, decision_used)``; the traced
        function returns only ``result``.
    pure
        The function does not change the schedule's function (a query).

    Every parameter after ``state`` must be annotated; its annotation gives its argument
    check (see :mod:`tilecraft.schedule.arguments`).
    """

    def deco(fn: _F) -> _F:
        return _register(kind, fn, inputs, outputs, sampling, pure)  # type: ignore[return-value]

    return deco


def _register(
    kind: str,
    fn: Callable[..., Any],
    inputs: tuple[str, ...],
    outputs: OutputArity,
    sampling: bool,
    pure: bool,
) -> Callable[..., Any]:
    """Register ``fn`` as instruction ``kind``; returns the traced function."""
    sig = inspect.signature(fn)
    params = tuple((p.name, p.kind, p.default) for p in list(sig.parameters.values())[1:])
    checks = _checks(fn, sig)

    @functools.wraps(fn)
    def traced(state: PrimitiveHost, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(state, *args, **kwargs)
        except TypeError as e:
            raise ScheduleError(kind, f"bad arguments: {e}") from None
        bound.apply_defaults()
        check_args(kind, checks, bound.arguments)
        return state.run_primitive(entry, fn, bound)

    entry = InstructionKind(
        kind,
        params,
        inputs,
        outputs,
        sampling,
        traced,
        pure=pure or sampling,
        checks=checks,
        output_type=_output_type(typing.get_type_hints(fn).get("return"), sampling),
    )
    INSTRUCTION_KINDS[kind] = entry
    return traced

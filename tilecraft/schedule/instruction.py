"""Instructions: one recorded call of a schedule primitive, and the ``@primitive`` decorator.

``@primitive("split", inputs=("loop", "factors"))`` turns a state-level function
``split(state, loop, factors, *, preserve_unit_iters=True)`` into a traced one: the call runs,
and only after it returns is an :class:`Instruction` appended to ``state.trace``. Parameters
named in ``inputs`` may hold handles (they are mapped on replay); the others are *attrs*
(plain JSON-able literals). A sampling primitive (``sampling=True``) takes ``decision=`` and
returns ``(result, decision_used)``; the decision is recorded with the instruction.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .state import BlockRV, ExprRV, LoopRV, ScheduleState

OutputArity = Literal["one", "many", "none"]
_F = TypeVar("_F", bound=Callable[..., Any])


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
    """

    name: str
    params: tuple[tuple[str, Any, Any], ...]
    inputs: tuple[str, ...]
    outputs: OutputArity
    sampling: bool
    func: Callable[..., Any]

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


INSTRUCTION_KINDS: dict[str, InstructionKind] = {}


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


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _outputs(result: Any) -> tuple[BlockRV | LoopRV | ExprRV, ...]:
    if result is None:
        return ()
    if isinstance(result, list | tuple):
        return tuple(result)
    return (result,)


def primitive(
    kind: str,
    *,
    inputs: tuple[str, ...] = (),
    outputs: OutputArity = "none",
    sampling: bool = False,
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
    """

    def deco(fn: _F) -> _F:
        sig = inspect.signature(fn)
        params = tuple((p.name, p.kind, p.default) for p in list(sig.parameters.values())[1:])

        @functools.wraps(fn)
        def traced(state: ScheduleState, *args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(state, *args, **kwargs)
            bound.apply_defaults()
            saved = state.primitive
            state.primitive = kind
            state.depth += 1
            try:
                result = fn(*bound.args, **bound.kwargs)
            finally:
                state.depth -= 1
                state.primitive = saved
            decision = None
            if sampling:
                result, decision = result
            if state.depth == 0:
                arguments = bound.arguments
                inst = Instruction(
                    kind,
                    tuple(_freeze(arguments[n]) for n in inputs),
                    tuple(
                        (n, _freeze(arguments[n]))
                        for n, _, _ in params
                        if n not in inputs and n != "decision"
                    ),
                    _freeze(decision),
                    _outputs(result),
                )
                state.trace.append(inst)
            return result

        INSTRUCTION_KINDS[kind] = InstructionKind(kind, params, inputs, outputs, sampling, traced)
        return traced  # type: ignore[return-value]

    return deco

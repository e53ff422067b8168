"""Run a graph program whose extents are partly read from tensors (``bind_symbol`` steps).

Such a program's shapes are not all known from its inputs: a ``bind_symbol`` step
(:mod:`tilecraft.graph.ir_bind`) reads an integer that earlier kernels computed, checks it
against its bounds and binds its shape variable; the steps after it use that extent like an
input's. The memory plan (:mod:`~tilecraft.runtime.executor.memory_plan`) needs every shape
before the first step, so here each step's output is an array of its own, allocated once its
shape is known and released after its last use. The kernels run one call from Python each
(these programs have no native entry: :func:`bind_refusal`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import GraphError
from ...lower.graph_program import GraphProgram, GraphStep, TensorSpec
from ..arguments import eval_shape_expr

if TYPE_CHECKING:
    from .function import GraphFunction

_INT32_MAX = 2**31 - 1
StepHook = Callable[[str, np.ndarray, float], None]


def run_binding(
    fn: GraphFunction, args: Sequence[Any], on_step: StepHook | None = None
) -> np.ndarray | tuple[np.ndarray, ...]:
    """Run ``fn``'s program in Python, binding each ``bind_symbol`` extent as it is read.

    Raises
    ------
    GraphError
        When a read value is outside its symbol's bounds, or an extent would be negative.
    """
    prog = fn.program
    values, env = fn._bind_inputs(args)
    for slot, c in prog.const_of_slot.items():
        values[slot] = prog.constants[c]
    for n, s in enumerate(prog.steps):
        t0 = time.perf_counter()
        if s.is_bind:
            value = read_extent(prog, s, values[s.args[0]], env)
            env[id(prog.bound_symbol(s))] = value
            out = np.empty((value, 0), prog.slot_types[s.out].numpy_dtype)
        else:
            spec = prog.slot_types[s.out]
            out = np.empty(_shape(prog, spec, env), spec.numpy_dtype)
            fn.kernels[n](*(values[a] for a in s.args), out)
        values[s.out] = out
        if on_step is not None:
            on_step(s.func, out, time.perf_counter() - t0)
        for d in s.free_after:
            values[d] = None
    return fn.results(values)


def read_extent(prog: GraphProgram, step: GraphStep, source: Any, env: dict[int, int]) -> int:
    """The integer a ``bind_symbol`` step reads from ``source``, checked against its bounds."""
    assert step.bind is not None  # a bind step (callers check is_bind)
    sym = prog.bound_symbol(step).name
    arr = np.asarray(source)
    if arr.size != 1 or arr.dtype.kind not in "iub":
        raise GraphError(
            f"{prog.name}: bind_symbol {sym} reads one integer, got an array of shape "
            f"{arr.shape} and dtype {arr.dtype}"
        )
    value = int(arr.reshape(-1)[0])
    lower, upper = step.bind
    lo = lower if isinstance(lower, int) else eval_shape_expr(lower, env)
    hi = upper if isinstance(upper, int) else eval_shape_expr(upper, env)
    if lo is None or hi is None:
        raise GraphError(f"{prog.name}: the bounds of extent {sym} are not bound")
    hi = _INT32_MAX if isinstance(upper, int) and hi == -1 else min(hi, _INT32_MAX)
    if not max(lo, 0) <= value <= hi:
        raise GraphError(
            f"{prog.name}: extent {sym} read at run time is {value}, outside its bounds "
            f"[{max(lo, 0)}, {hi}]"
        )
    return value


def _shape(prog: GraphProgram, spec: TensorSpec, env: dict[int, int]) -> tuple[int, ...]:
    out = []
    for s in spec.shape:
        v = eval_shape_expr(s, env)
        if v is None:
            raise GraphError(f"{prog.name}: extent {s!r} is bound neither by the inputs nor read")
        if v < 0:
            raise GraphError(f"{prog.name}: extent {s!r} is {v}; extents must not be negative")
        out.append(v)
    return tuple(out)


def bind_refusal(prog: GraphProgram) -> str | None:
    """Why ``prog`` has no native (C) entry when it reads extents from tensors, else None.

    The C entries size every buffer from the inputs before the first kernel runs, so they
    cannot read an extent a kernel computes: the Python executor runs such a function, and an
    exported library has no plain C entry for it (``extract_c`` says this reason).
    """
    if not prog.has_bind_steps:
        return None
    names = [prog.bound_symbol(s).name for s in prog.steps if s.is_bind]
    return (
        f"it reads the extents {names} from tensors at run time (bind_symbol: nonzero, "
        "boolean masks, .item() sizes), and a C entry sizes every buffer from the inputs "
        "before its first kernel"
    )

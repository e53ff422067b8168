"""The lowered form of a graph function: a straight-line program of kernel calls over slots.

The graph layer lowers each graph function (of ``call_tir`` and constant bindings only) to a
:class:`GraphProgram`; code generation emits its native C entry from it
(:mod:`tilecraft.codegen.graph_c`) and the runtime's executor runs it
(:mod:`tilecraft.runtime.executor`). Nothing here knows the graph IR, so the layers below the
graph can work on graph functions.

Values live in *slots*: the parameters first (slot ``i`` is parameter ``i``), then one slot
per binding in order. A constant's slot holds one of :attr:`GraphProgram.constants`; a
step's slot holds its output. A step calls a compiled kernel or, for a ``call_extern``
binding, an external library routine (BLAS) the runtime's executor knows by name. Each
:class:`GraphStep` also says which slots die after it (their last use, from
:func:`liveness`), the input of the runtime's memory planner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import LowerError
from ..ir import DataType, Expr, IntImm, Var, collect_vars


@dataclass(frozen=True, eq=False)
class TensorSpec:
    """Shape (int constants or expressions of symbolic extents) and dtype of one slot."""

    shape: tuple[Expr, ...]
    dtype: DataType

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def numpy_dtype(self) -> np.dtype[np.generic]:
        """The numpy dtype of the values."""
        return np.dtype(self.dtype.numpy_name())

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.numpy_dtype.itemsize

    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints, or None when some extent is symbolic."""
        dims = [s.value for s in self.shape if isinstance(s, IntImm)]
        return tuple(dims) if len(dims) == len(self.shape) else None

    def describe(self) -> str:
        """Short text such as ``Tensor((1, n, 768), float32)`` for error messages."""
        dims = ", ".join(_dim_text(s) for s in self.shape)
        comma = "," if len(self.shape) == 1 else ""
        return f"Tensor(({dims}{comma}), {self.dtype})"


def _is_zero(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _dim_text(e: Expr) -> str:
    if isinstance(e, IntImm):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    return " * ".join(v.name for v in collect_vars(e)) or type(e).__name__


ExternAttrs = tuple[tuple[str, bool | int | float | str], ...]

BIND_SYMBOL = "tc.bind_symbol"
"""The ``func`` of a step reading a symbolic extent from a tensor (``bind_symbol``)."""


@dataclass(frozen=True)
class GraphStep:
    """One call: ``out = func(*args)`` over slots, and the slots dead after it.

    A kernel step (``extern`` None) calls the compiled PrimFunc ``func``; an external step
    calls the library routine ``func`` (``"blas.gemm"``) configured by the ``extern``
    attributes (sorted ``(key, value)`` pairs), which reads every extent from its arrays.
    A ``bind_symbol`` step (``func`` :data:`BIND_SYMBOL`, ``bind`` its ``(lower, upper)``)
    calls nothing: it reads the integer in slot ``args[0]`` on the host and binds the shape
    variable of its output slot, whose type is ``(symbol, 0)`` (see
    :mod:`tilecraft.graph.ir_bind`).
    """

    func: str
    args: tuple[int, ...]
    out: int
    free_after: tuple[int, ...]  # slots whose last use is this step (their storage is freed)
    extern: ExternAttrs | None = None
    bind: tuple[int | Expr, int | Expr] | None = None

    def __post_init__(self) -> None:
        if (self.bind is not None) != (self.func == BIND_SYMBOL) or (
            self.bind is not None and (len(self.args) != 1 or self.extern is not None)
        ):
            raise LowerError(f"graph step {self.func}: a bind_symbol step reads one slot")

    @property
    def is_bind(self) -> bool:
        """True for a step binding a symbolic extent to a tensor's value."""
        return self.bind is not None

    @property
    def is_extern(self) -> bool:
        """True for a call of an external library routine."""
        return self.extern is not None


@dataclass(frozen=True, eq=False)
class GraphProgram:
    """A lowered graph function (see the module docstring).

    Attributes
    ----------
    name
        The graph function's name.
    param_names
        One name per parameter; parameter ``i`` is slot ``i``.
    slot_types
        Shape and dtype of every slot.
    constants
        The constants' arrays (read-only, C-contiguous).
    const_of_slot
        Slot of a constant -> its index in :attr:`constants`.
    steps
        The kernel calls in order.
    ret_slots
        The slots holding the results, in order (one for a function returning one tensor;
        a slot may appear more than once, and may be a parameter's or a constant's).
    shape_vars
        The symbolic extents of the parameters, in order of first appearance.
    returns_tuple
        True when the function returns a tuple of :attr:`ret_slots` (even of one); False
        when it returns the one tensor of ``ret_slots[0]``.
    """

    name: str
    param_names: tuple[str, ...]
    slot_types: tuple[TensorSpec, ...]
    constants: tuple[np.ndarray, ...]
    const_of_slot: Mapping[int, int]
    steps: tuple[GraphStep, ...]
    ret_slots: tuple[int, ...]
    shape_vars: tuple[Var, ...]
    returns_tuple: bool = False

    def __post_init__(self) -> None:
        n = len(self.slot_types)
        if not self.ret_slots or (len(self.ret_slots) > 1 and not self.returns_tuple):
            raise LowerError(
                f"graph program {self.name}: one result, or a tuple of one or more results"
            )
        slots = [*self.const_of_slot, *self.ret_slots]
        slots += [s for step in self.steps for s in (*step.args, step.out)]
        if len(self.param_names) > n or any(not 0 <= s < n for s in slots):
            raise LowerError(f"graph program {self.name}: a slot is out of range")
        for step in self.steps:
            shape = self.slot_types[step.out].shape if step.is_bind else ()
            if step.is_bind and not (
                len(shape) == 2 and isinstance(shape[0], Var) and _is_zero(shape[1])
            ):
                raise LowerError(
                    f"graph program {self.name}: a bind_symbol step writes a (symbol, 0) slot"
                )

    @property
    def has_extern_steps(self) -> bool:
        """True when some step calls an external library routine."""
        return any(s.is_extern for s in self.steps)

    @property
    def has_bind_steps(self) -> bool:
        """True when some extent is read from a tensor at run time (``bind_symbol`` steps)."""
        return any(s.is_bind for s in self.steps)

    def bound_symbol(self, step: GraphStep) -> Var:
        """The shape variable a ``bind_symbol`` step binds (its output's first extent)."""
        sym = self.slot_types[step.out].shape[0]
        if not step.is_bind or not isinstance(sym, Var):
            raise LowerError(f"graph program {self.name}: step {step.func} binds no symbol")
        return sym

    @property
    def num_params(self) -> int:
        """Number of parameters."""
        return len(self.param_names)

    @property
    def param_types(self) -> tuple[TensorSpec, ...]:
        """Shape and dtype of each parameter."""
        return self.slot_types[: self.num_params]

    @property
    def step_types(self) -> tuple[TensorSpec, ...]:
        """Shape and dtype of each step's output."""
        return tuple(self.slot_types[s.out] for s in self.steps)

    @property
    def ret_slot(self) -> int:
        """The slot of the result of a program returning one tensor.

        Raises
        ------
        LowerError
            When the program returns a tuple (see :attr:`ret_slots`).
        """
        if self.returns_tuple:
            raise LowerError(f"graph program {self.name} returns a tuple; use ret_slots")
        return self.ret_slots[0]

    @property
    def result_type(self) -> TensorSpec:
        """Shape and dtype of the result of a program returning one tensor."""
        return self.slot_types[self.ret_slot]

    @property
    def result_types(self) -> tuple[TensorSpec, ...]:
        """Shape and dtype of each result."""
        return tuple(self.slot_types[s] for s in self.ret_slots)

    def describe_result(self) -> str:
        """``Tensor((n, 4), float32)``, or ``(Tensor(...), Tensor(...))`` for a tuple."""
        if not self.returns_tuple:
            return self.result_type.describe()
        inner = ", ".join(t.describe() for t in self.result_types)
        return f"({inner},)" if len(self.ret_slots) == 1 else f"({inner})"

    def copied_results(self) -> tuple[bool, ...]:
        """Per result of a tuple: True when it is returned as a copy of its slot.

        A result gets an array of its own: one computed by a step the first time it
        appears is that step's output; a parameter, a constant or a repeated result is a
        copy. (A program returning one tensor returns a parameter as is.)
        """
        outs = {s.out for s in self.steps}
        seen: set[int] = set()
        copied = []
        for slot in self.ret_slots:
            copied.append(slot not in outs or slot in seen)
            seen.add(slot)
        return tuple(copied)


def liveness(
    arg_slots: Sequence[tuple[int, ...]], out_slots: Sequence[int], keep: set[int]
) -> list[tuple[int, ...]]:
    """Per step, the slots whose last use it is (never those in ``keep``).

    A step's output that nothing reads is freed right after that step.
    """
    last: dict[int, int] = {}
    for n, args in enumerate(arg_slots):
        for a in args:
            last[a] = n
    out: list[tuple[int, ...]] = []
    for n, (args, res) in enumerate(zip(arg_slots, out_slots, strict=True)):
        dead = sorted({a for a in args if last[a] == n and a not in keep})
        if res not in last and res not in keep:
            dead.append(res)
        out.append(tuple(dead))
    return out

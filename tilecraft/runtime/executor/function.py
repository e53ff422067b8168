"""A graph function of an executable: run a lowered graph program over compiled kernels.

:class:`GraphFunction` runs one :class:`~tilecraft.lower.graph_program.GraphProgram`. With a
native entry (:class:`~tilecraft.runtime.executor.native.NativeGraph`) a call is one call from
Python: the entry checks the arguments, binds the symbolic extents, allocates the result and
calls the kernels with intermediates in the planned storages. When the entry's checks fail,
the arguments are validated here (count, dtype, rank, static and symbolic extents; DLPack
tensors and strided arrays are converted), raising :class:`~tilecraft.errors.GraphError`, and
the entry runs on the converted arrays. :meth:`GraphFunction.run` is the Python executor (one
kernel call from Python per step); it runs targets without a native entry (CUDA) and
programs with external library calls (``call_extern`` steps, such as BLAS GEMMs: their routine
is a Python callable, :mod:`tilecraft.runtime.executor.extern`, so such a program has no
native entry).

A :class:`~tilecraft.runtime.executor.memory_plan.MemoryPlan` (cached per binding of the
symbolic extents) places the intermediate values in a few reused storage blocks.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...codegen.graph_c import NativeStatus
from ...errors import GraphError
from ...ir import BaseFunc, Var
from ...lower.graph_program import GraphProgram, TensorSpec
from ..arguments import (
    ArgumentError,
    GraphArgumentError,
    eval_shape_expr,
    result_like,
    to_array,
)
from ..threads import before_call
from .dynamic import run_binding
from .extern import extern_kernel
from .memory_plan import MemoryPlan, plan_memory
from .native import NativeGraph, StepRecord, buffer_formats

StepHook = Callable[[str, np.ndarray, float], None]  # (kernel name, output, seconds)

_PLAN_CACHE_SIZE = 32


def _no_kernel(name: str) -> Callable[..., Any]:
    """A stand-in until the compiled kernels are attached."""

    def missing(*args: Any) -> None:
        raise GraphError(f"kernel {name!r} is not compiled")

    return missing


class GraphFunction:
    """A callable graph function of an executable: ``f(*inputs, *weights)``.

    Bound parameters (the program's constants) are not arguments: their arrays live in the
    program. ``kernels`` are the compiled kernels, one per step (see
    :meth:`attach_kernels`; ``emulated``: the build is emulated, so external GPU routines
    run on host arrays); ``func`` is the function the program was lowered from (the
    graph layer's, kept for callers that inspect it; never read here).
    """

    def __init__(
        self,
        program: GraphProgram,
        kernels: Sequence[Callable[..., Any]] = (),
        func: BaseFunc | None = None,
        *,
        emulated: bool = False,
    ) -> None:
        self.program = program
        self.emulated = emulated  # GPU library routines run on host arrays
        self.func = func
        self.name = program.name
        self.steps = program.steps
        self.ret_slots = program.ret_slots
        self.const_of_slot = program.const_of_slot
        self.constants = program.constants
        self.shape_vars = list(program.shape_vars)
        self.out_types: list[TensorSpec] = list(program.step_types)
        self._plans: OrderedDict[tuple[int, ...], MemoryPlan] = OrderedDict()
        self.kernels = list(kernels)
        if not self.kernels and program.has_extern_steps:  # no compiled kernels to attach
            self.attach_kernels(_no_kernel)
        self.native: NativeGraph | None = None

    def param_formats(self) -> list[tuple[str, ...]] | None:
        """The buffer formats of each parameter for the native entry (None: runs in Python)."""
        one_constant = not self.program.returns_tuple and self.ret_slots[0] in self.const_of_slot
        if one_constant or self.program.has_extern_steps or self.program.has_bind_steps:
            # run() copies a constant result, calls the external routines, reads extents
            return None
        formats = []
        for t in self.program.param_types:
            try:
                formats.append(buffer_formats(t.dtype))
            except TypeError:  # a dtype numpy has no buffer format for
                return None
        return formats

    def attach_kernels(self, lookup: Callable[[str], Callable[..., Any]]) -> None:
        """Call the kernels ``lookup(name)`` gives, one per step (external routines: their own).

        Raises
        ------
        ExternLibraryError
            When an external routine's library is not installed (the message names the extra).
        """
        self.kernels = [
            extern_kernel(s.func, dict(s.extern), emulated=self.emulated)
            if s.extern is not None
            else _no_kernel(s.func)  # a bind_symbol step: run() reads its value itself
            if s.is_bind
            else lookup(s.func)
            for s in self.steps
        ]

    def attach_native(self, native: NativeGraph) -> None:
        """Run calls through ``native`` from now on."""
        self.native = native

    def _bind_inputs(self, args: Sequence[Any]) -> tuple[list[Any], dict[int, int]]:
        """Check the arguments; the arrays by slot and the symbolic extents they bind."""
        prog = self.program
        params, name = prog.param_names, prog.name
        if len(args) != len(params):
            raise GraphArgumentError(
                f"{name}: expected {len(params)} arguments ({', '.join(params)}), got {len(args)}"
            )
        env: dict[int, int] = {}
        values: list[Any] = [None] * len(prog.slot_types)
        for i, (p, want, a) in enumerate(zip(params, prog.param_types, args, strict=True)):
            where = f"{name}: argument {i} ({p})"
            try:
                arr = to_array(a, where)
            except ArgumentError as e:
                raise GraphArgumentError(str(e)) from None
            if arr.dtype != np.dtype(want.dtype.numpy_name()):
                raise GraphArgumentError(f"{where} has dtype {arr.dtype}, expected {want.dtype}")
            if arr.ndim != want.ndim:
                raise GraphArgumentError(
                    f"{where} has shape {arr.shape}, expected {want.describe()}"
                )
            for d, (dim, actual) in enumerate(zip(want.shape, arr.shape, strict=True)):
                if isinstance(dim, Var) and id(dim) not in env:
                    env[id(dim)] = int(actual)
                expected = eval_shape_expr(dim, env)
                if expected is not None and expected != actual:
                    raise GraphArgumentError(
                        f"{where} has shape {arr.shape}, expected "
                        f"{want.describe()} (dimension {d} should be {expected})"
                    )
            values[i] = np.ascontiguousarray(arr) if arr.ndim else arr  # (it makes 0-d 1-d)
        return values, env

    def memory_plan(self, env: dict[int, int]) -> MemoryPlan:
        """The memory plan for the symbolic extents ``env`` (``id(var)`` -> value), cached."""
        key = tuple(env.get(id(v), -1) for v in self.shape_vars)
        plan = self._plans.get(key)
        if plan is None:
            shapes = [self._shape(t, env) for t in self.out_types]
            dtypes = [t.dtype.numpy_name() for t in self.out_types]
            plan = plan_memory(self.steps, shapes, dtypes, frozenset(self.ret_slots))
            self._plans[key] = plan
            if len(self._plans) > _PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        return plan

    def plan_for(self, *args: Any) -> MemoryPlan:
        """The memory plan a call with ``args`` uses (the arguments are checked, not run)."""
        return self.memory_plan(self._bind_inputs(args)[1])

    def _shape(self, t: TensorSpec, env: dict[int, int]) -> tuple[int, ...]:
        out = []
        for s in t.shape:
            v = eval_shape_expr(s, env)
            if v is None:
                raise GraphError(f"{self.name}: extent {s!r} is not bound by the inputs")
            if v < 0:
                raise GraphError(
                    f"{self.name}: extent {s!r} is {v} for these inputs; extents must "
                    "not be negative"
                )
            out.append(v)
        return tuple(out)

    def run(
        self, args: Sequence[Any], on_step: StepHook | None = None
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run in Python, one kernel call per step (the reference executor).

        ``on_step(kernel, output, seconds)`` is called after each kernel with its output.
        A function returning a tuple gives a tuple of arrays, each its own (see
        :meth:`~tilecraft.lower.graph_program.GraphProgram.copied_results`).
        """
        if self.program.has_bind_steps:  # extents known only as the steps run
            return run_binding(self, args, on_step)
        values, env = self._bind_inputs(args)
        for slot, c in self.const_of_slot.items():
            values[slot] = self.constants[c]
        plan = self.memory_plan(env)
        storages = plan.allocate()
        for n, s in enumerate(self.steps):
            out = plan.output(n, storages)
            kernel = self.kernels[n]
            t0 = time.perf_counter()
            kernel(*(values[a] for a in s.args), out)
            seconds = time.perf_counter() - t0
            values[s.out] = out
            if on_step is not None:
                on_step(s.func, out, seconds)
            for d in s.free_after:
                values[d] = None
        return self.results(values)

    def results(self, values: list[Any]) -> np.ndarray | tuple[np.ndarray, ...]:
        """The function's result(s) from the slots' ``values`` after the last step."""
        if self.program.returns_tuple:
            copied = self.program.copied_results()
            return tuple(
                np.array(values[s], copy=True) if c else values[s]
                for s, c in zip(self.ret_slots, copied, strict=True)
            )
        ret = self.ret_slots[0]
        if ret in self.const_of_slot:
            copy: np.ndarray = self.constants[self.const_of_slot[ret]].copy()
            return copy
        result: np.ndarray = values[ret]
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run on numpy arrays or DLPack CPU tensors (inputs then weights); returns the result.

        Arguments may also be given by parameter name (``f(x=x)``, ``f(x, w=w)``). The
        result is the kind of tensor the first argument is (a numpy array for numpy
        arguments, a PyTorch tensor sharing the result's memory for PyTorch tensors). Tensors
        that require grad are detached (inference).

        Raises
        ------
        GraphArgumentError
            For a keyword that names no parameter, a parameter given twice or missing, too
            many or too few arguments, or an argument of the wrong kind, dtype or shape (a
            ``TypeError``, ``ValueError`` and :class:`~tilecraft.errors.GraphError`).
        """
        if kwargs:
            args = self._positional(args, kwargs)
        return result_like(args, self._call(args))

    def _call(self, args: tuple[Any, ...]) -> np.ndarray | tuple[np.ndarray, ...]:
        """The result as a numpy array: natively when the entry takes the arguments."""
        before_call()
        native = self.native
        if native is not None:
            out = native.call(*args)
            if out is not None:
                return out
            retried = self._retry_native(native, args)
            if retried is not None:
                return retried
        return self.run(args)

    def _positional(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """``args`` completed with ``kwargs`` by parameter name, in parameter order."""
        fname, names = self.name, list(self.program.param_names)
        listed = ", ".join(names)
        if len(args) > len(names):
            raise GraphArgumentError(
                f"{fname}: expected {len(names)} arguments ({listed}), got {len(args)} "
                f"positional and {len(kwargs)} by name"
            )
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise GraphArgumentError(
                f"{fname}: unknown argument {', '.join(map(repr, unknown))}; the parameters "
                f"are ({listed})"
            )
        ambiguous = [k for k in kwargs if names.count(k) > 1]
        if ambiguous:
            raise GraphArgumentError(
                f"{fname}: several parameters are named {ambiguous[0]!r}; pass them by position"
            )
        for k in kwargs:
            if names.index(k) < len(args):
                raise GraphArgumentError(
                    f"{fname}: argument {k!r} given twice: at position {names.index(k)} and by name"
                )
        missing = [n for n in names[len(args) :] if n not in kwargs]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            raise GraphArgumentError(
                f"{fname}: missing argument{plural} {', '.join(map(repr, missing))}; the "
                f"parameters are ({listed})"
            )
        return (*args, *(kwargs[n] for n in names[len(args) :]))

    def _retry_native(
        self, native: NativeGraph, args: Sequence[Any]
    ) -> np.ndarray | tuple[np.ndarray, ...] | None:
        """After the entry declined: validate here (raising GraphError), run on the result.

        None when the entry declines again (a check only the kernels' own wrappers report)
        or another thread is running it: the Python executor runs instead.
        """
        if native.status() is not NativeStatus.DEFER:
            return None
        values, _ = self._bind_inputs(args)
        return native.call(*values[: len(args)])

    def profile(self, *args: Any) -> tuple[np.ndarray | tuple[np.ndarray, ...], list[StepRecord]]:
        """Run once and return the result and, per kernel call, its time and output address.

        Natively the times are measured around each kernel call in C; in Python (targets
        without a native entry) around each kernel wrapper call.
        """
        native = self.native
        if native is not None:
            native.set_profiling(True)
            try:
                out = native.call(*args)
                if out is None:
                    out = self._retry_native(native, args)
            finally:
                native.set_profiling(False)
            if out is not None:
                return out, native.records([s.func for s in self.steps])
        records: list[StepRecord] = []

        def hook(kernel: str, arr: np.ndarray, seconds: float) -> None:
            records.append(StepRecord(kernel, seconds, arr.ctypes.data))

        return self.run(args, hook), records

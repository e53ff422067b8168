"""The graph executor: run a module's graph functions over its compiled PrimFuncs.

``build_graph_module(mod, target)`` legalizes and fuses any operator calls left in the
module, checks every ``call_tir`` against its PrimFunc's signature, compiles every PrimFunc
once and plans each graph function: which values die after which step. On the CPU each
graph function is also compiled to a native entry in the same library
(:mod:`tilecraft.graph.native`), so a forward is one call from Python: the entry checks the
arguments, binds the symbolic extents, allocates the result and calls the kernels with
intermediates in the planned storages. When the entry's checks fail, the arguments are
validated here (count, dtype, rank, static and symbolic extents; DLPack tensors and strided
arrays are converted), raising :class:`GraphError` as the Python executor always has, and the
entry runs on the converted arrays. :meth:`GraphFunction.run` is the Python executor (one
kernel call from Python per step); it runs targets without a native entry (CUDA).

A :class:`~tilecraft.graph.memory_plan.MemoryPlan` (cached per binding of the symbolic
extents) places the intermediate values in a few reused storage blocks.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir import Buffer, IntImm, IRModule, PrimFunc, Var
from ..runtime import build as build_prim_funcs
from ..runtime.arguments import (
    ArgumentError,
    ArgumentTypeError,
    check_timing,
    eval_shape_expr,
    to_array,
)
from ..runtime.backend import backend_of
from ..runtime.emulate import EmulateArg, EmulatedModule, EmulateMode, emulate_mode
from ..runtime.module import TimingResult, time_calls
from ..target import Target, as_target
from .ir import CallFunc, CallTIR, Constant, Function, OpCall, TensorType, graph_functions
from .memory_plan import MemoryPlan, Step, liveness, plan_memory
from .native import (
    NativeBuild,
    NativeGraph,
    StepRecord,
    buffer_formats,
    build_native,
    kernel_prim_funcs,
)
from .native_source import GraphSignature, NativeStatus
from .op import GraphError

StepHook = Callable[[str, np.ndarray, float], None]  # (kernel name, output, seconds)

_PLAN_CACHE_SIZE = 32


class GraphFunction:
    """A callable graph function of an :class:`Executable`: ``f(*inputs, *weights)``.

    Bound parameters (``Constant`` bindings, see :class:`~tilecraft.graph.BindParams`) are
    not arguments: their arrays live in the executable.
    """

    def __init__(self, exe: Executable, func: Function) -> None:
        self.exe = exe
        self.func = func
        slots = {id(p): i for i, p in enumerate(func.params)}
        self.slot_types: list[TensorType] = [p.type for p in func.params]
        self.constants: list[np.ndarray] = []
        self.const_of_slot: dict[int, int] = {}
        args: list[tuple[int, ...]] = []
        outs: list[int] = []
        self.out_types: list[TensorType] = []
        names: list[str] = []
        for b in func.bindings:
            slots[id(b.var)] = len(slots)
            self.slot_types.append(b.var.type)
            if isinstance(b.value, Constant):
                self.const_of_slot[slots[id(b.var)]] = len(self.constants)
                self.constants.append(b.value.data)
                continue
            if not isinstance(b.value, CallTIR):
                kind = "operator call" if isinstance(b.value, OpCall) else "fused group call"
                raise GraphError(
                    f"build: {func.name} still has a {kind} at {b.var.name}; run "
                    "tc.graph.get_pipeline('zero') first"
                )
            args.append(tuple(slots[id(a)] for a in b.value.args))
            outs.append(slots[id(b.var)])
            names.append(b.value.func)
            self.out_types.append(b.var.type)
        keep = {slots[id(p)] for p in func.params} | {slots[id(func.ret)]}
        keep |= set(self.const_of_slot)
        self.steps = [
            Step(n, a, o, f)
            for n, a, o, f in zip(names, args, outs, liveness(args, outs, keep), strict=True)
        ]
        self.ret_slot = slots[id(func.ret)]
        self.num_slots = len(slots)
        self.shape_vars = func.shape_vars()
        self._plans: OrderedDict[tuple[int, ...], MemoryPlan] = OrderedDict()
        self.kernels = [exe.lib[s.func] for s in self.steps] if exe.lib is not None else []
        self.native: NativeGraph | None = None

    def signature(self) -> GraphSignature | None:
        """What the native entry generator needs (None: this function runs in Python)."""
        if self.ret_slot in self.const_of_slot:
            return None  # run() checks the inputs and returns a copy of the constant
        formats = []
        for p in self.func.params:
            try:
                formats.append(buffer_formats(p.type.dtype))
            except TypeError:  # a dtype numpy has no buffer format for
                return None
        return GraphSignature(
            self.func.name,
            len(self.func.params),
            tuple(self.slot_types),
            tuple(formats),
            dict(self.const_of_slot),
            tuple(self.steps),
            tuple(self.out_types),
            self.ret_slot,
            tuple(self.shape_vars),
            lambda t: np.dtype(t.dtype.numpy_name()).itemsize,
        )

    def attach_native(self, native: NativeGraph) -> None:
        """Run calls through ``native`` from now on."""
        self.native = native

    def _bind_inputs(self, args: Sequence[Any]) -> tuple[list[Any], dict[int, int]]:
        """Check the arguments; the arrays by slot and the symbolic extents they bind."""
        params = self.func.params
        name = self.func.name
        if len(args) != len(params):
            raise GraphError(
                f"{name}: expected {len(params)} arguments "
                f"({', '.join(p.name for p in params)}), got {len(args)}"
            )
        env: dict[int, int] = {}
        values: list[Any] = [None] * self.num_slots
        for i, (p, a) in enumerate(zip(params, args, strict=True)):
            where = f"{name}: argument {i} ({p.name})"
            try:
                arr = to_array(a, where)
            except ArgumentError as e:
                raise GraphError(str(e)) from None
            want = p.type
            if arr.dtype != np.dtype(want.dtype.numpy_name()):
                raise GraphError(f"{where} has dtype {arr.dtype}, expected {want.dtype}")
            if arr.ndim != want.ndim:
                raise GraphError(f"{where} has shape {arr.shape}, expected {want.describe()}")
            for d, (dim, actual) in enumerate(zip(want.shape, arr.shape, strict=True)):
                if isinstance(dim, Var) and id(dim) not in env:
                    env[id(dim)] = int(actual)
                expected = eval_shape_expr(dim, env)
                if expected is not None and expected != actual:
                    raise GraphError(
                        f"{where} has shape {arr.shape}, expected "
                        f"{want.describe()} (dimension {d} should be {expected})"
                    )
            values[i] = np.ascontiguousarray(arr)
        return values, env

    def memory_plan(self, env: dict[int, int]) -> MemoryPlan:
        """The memory plan for the symbolic extents ``env`` (``id(var)`` -> value), cached."""
        key = tuple(env.get(id(v), -1) for v in self.shape_vars)
        plan = self._plans.get(key)
        if plan is None:
            shapes = [self._shape(t, env) for t in self.out_types]
            dtypes = [t.dtype.numpy_name() for t in self.out_types]
            plan = plan_memory(self.steps, shapes, dtypes, self.ret_slot)
            self._plans[key] = plan
            if len(self._plans) > _PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        return plan

    def plan_for(self, *args: Any) -> MemoryPlan:
        """The memory plan a call with ``args`` uses (the arguments are checked, not run)."""
        return self.memory_plan(self._bind_inputs(args)[1])

    def _shape(self, t: TensorType, env: dict[int, int]) -> tuple[int, ...]:
        out = []
        for s in t.shape:
            v = eval_shape_expr(s, env)
            if v is None:
                raise GraphError(f"{self.func.name}: extent {s!r} is not bound by the inputs")
            if v < 0:
                raise GraphError(
                    f"{self.func.name}: extent {s!r} is {v} for these inputs; extents must "
                    "not be negative"
                )
            out.append(v)
        return tuple(out)

    def run(self, args: Sequence[Any], on_step: StepHook | None = None) -> np.ndarray:
        """Run in Python, one kernel call per step (the reference executor).

        ``on_step(kernel, output, seconds)`` is called after each kernel with its output.
        """
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
        if self.ret_slot in self.const_of_slot:
            copy: np.ndarray = self.constants[self.const_of_slot[self.ret_slot]].copy()
            return copy
        result: np.ndarray = values[self.ret_slot]
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        """Run on numpy arrays or DLPack CPU tensors (inputs then weights); returns the result.

        Arguments may also be given by parameter name (``f(x=x)``, ``f(x, w=w)``).

        Raises
        ------
        ArgumentTypeError
            For a keyword that names no parameter, or a parameter given twice.
        ArgumentError
            For a parameter missing from a call with keywords, or too many arguments.
        """
        if kwargs:
            args = self._positional(args, kwargs)
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
        fname, names = self.func.name, [p.name for p in self.func.params]
        listed = ", ".join(names)
        if len(args) > len(names):
            raise ArgumentError(
                f"{fname}: expected {len(names)} arguments ({listed}), got {len(args)} "
                f"positional and {len(kwargs)} by name"
            )
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise ArgumentTypeError(
                f"{fname}: unknown argument {', '.join(map(repr, unknown))}; the parameters "
                f"are ({listed})"
            )
        ambiguous = [k for k in kwargs if names.count(k) > 1]
        if ambiguous:
            raise ArgumentTypeError(
                f"{fname}: several parameters are named {ambiguous[0]!r}; pass them by position"
            )
        for k in kwargs:
            if names.index(k) < len(args):
                raise ArgumentTypeError(
                    f"{fname}: argument {k!r} given twice: at position {names.index(k)} and by name"
                )
        missing = [n for n in names[len(args) :] if n not in kwargs]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            raise ArgumentError(
                f"{fname}: missing argument{plural} {', '.join(map(repr, missing))}; the "
                f"parameters are ({listed})"
            )
        return (*args, *(kwargs[n] for n in names[len(args) :]))

    def _retry_native(self, native: NativeGraph, args: Sequence[Any]) -> np.ndarray | None:
        """After the entry declined: validate here (raising GraphError), run on the result.

        None when the entry declines again (a check only the kernels' own wrappers report)
        or another thread is running it: the Python executor runs instead.
        """
        if native.status() is not NativeStatus.DEFER:
            return None
        values, _ = self._bind_inputs(args)
        return native.call(*values[: len(args)])

    def profile(self, *args: Any) -> tuple[np.ndarray, list[StepRecord]]:
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


class Executable:
    """Compiled kernels plus the graph functions that call them: ``exe["forward"](x, *w)``."""

    def __init__(self, mod: IRModule, lib: Any, target: Target | str) -> None:
        self.mod = mod
        self.lib = lib
        self.target = target
        self.functions = {
            n: GraphFunction(self, f)
            for n, f in graph_functions(mod)
            if not f.attrs.get("primitive")
        }

    def __getitem__(self, name: str) -> Any:
        """A graph function (:class:`GraphFunction`) or a compiled PrimFunc by name."""
        if name in self.functions:
            return self.functions[name]
        if self.lib is not None and name in self.lib:
            return self.lib[name]
        raise GraphError(
            f"executable has no function {name!r}; graph functions: {sorted(self.functions)}"
        )

    def __contains__(self, name: object) -> bool:
        in_lib = self.lib is not None and isinstance(name, str) and name in self.lib
        return name in self.functions or in_lib

    @property
    def source(self) -> str:
        """The generated source of the kernels (and of the native graph entries)."""
        text: str = self.lib.source if self.lib is not None else ""
        return text

    def time_evaluator(
        self, name: str, number: int = 10, repeat: int = 5, min_repeat_ms: float = 0
    ) -> Callable[..., TimingResult]:
        """A callable timing graph function (or kernel) ``name`` on given arguments.

        Same contract as :meth:`tilecraft.runtime.Module.time_evaluator`: ``evaluator(*args)``
        warms up once and returns a :class:`~tilecraft.runtime.TimingResult` (seconds per call).
        """
        if name not in self.functions:
            if self.lib is None or name not in self.lib:
                raise GraphError(
                    f"executable has no function {name!r}; graph functions: "
                    f"{sorted(self.functions)}"
                )
            evaluator: Callable[..., TimingResult] = self.lib.time_evaluator(
                name, number, repeat, min_repeat_ms
            )
            return evaluator
        fn = self.functions[name]
        check_timing(number, repeat)

        def run(*args: Any) -> TimingResult:
            return time_calls(lambda: fn(*args), number, repeat, min_repeat_ms)

        return run

    def profile(self, name: str, *args: Any) -> list[tuple[str, float]]:
        """Run graph function ``name`` once and return (kernel name, seconds) per call."""
        func = self.functions.get(name)
        if func is None:
            raise GraphError(
                f"executable has no graph function {name!r}; graph functions: "
                f"{sorted(self.functions)}"
            )
        return [(r.kernel, r.seconds) for r in func.profile(*args)[1]]


def _needs_pipeline(mod: IRModule) -> bool:
    return any(
        isinstance(b.value, (OpCall, CallFunc)) for _, f in graph_functions(mod) for b in f.bindings
    )


def check_calls(mod: IRModule) -> None:
    """Check every ``call_tir`` of ``mod``'s graph functions against its PrimFunc.

    The callee must be a PrimFunc taking one buffer per argument plus the output, with the
    same dtypes and ranks and equal static extents, so no kernel is handed arrays it would
    index out of bounds.
    """
    for _, f in graph_functions(mod):
        for b in f.bindings:
            v = b.value
            if not isinstance(v, CallTIR):
                continue
            callee = mod.functions.get(v.func)
            where = f"build: {f.name} calls {v.func!r} at {b.var.name}"
            if not isinstance(callee, PrimFunc):
                raise GraphError(f"{where}, which is not a PrimFunc of the module")
            types = [a.type for a in v.args] + [v.out_type]
            if len(callee.params) != len(types):
                raise GraphError(
                    f"{where} with {len(types)} buffers (arguments and result); "
                    f"it takes {len(callee.params)} parameters"
                )
            for p, t in zip(callee.params, types, strict=True):
                if not isinstance(p, Buffer) or not _fits(p, t):
                    shown = (
                        p.name
                        if not isinstance(p, Buffer)
                        else TensorType(p.shape, p.dtype).describe()
                    )
                    raise GraphError(
                        f"{where}: parameter {p.name} is {shown}, but the call "
                        f"passes {t.describe()}"
                    )


def _fits(p: Buffer, t: TensorType) -> bool:
    if p.dtype != t.dtype or len(p.shape) != t.ndim:
        return False
    return all(
        not (isinstance(a, IntImm) and isinstance(b, IntImm)) or a.value == b.value
        for a, b in zip(p.shape, t.shape, strict=True)
    )


def build_graph_module(
    mod: IRModule,
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Executable:
    """Compile a module holding graph functions into an :class:`Executable`.

    Operator calls left in the module are legalized (and fused) by the "zero" pipeline first.

    Parameters
    ----------
    mod
        Graph functions plus the PrimFuncs they call.
    target
        Where the kernels run (``"cpu"``).
    emulate
        For a GPU target: run the kernels on the CPU — ``True`` or ``"racecheck"`` the
        GPU-lowered program in the emulator, ``"serial"`` thread loops as serial loops (see
        :func:`tilecraft.runtime.build`). A race-checked build runs its graph functions
        through the Python executor, so a fault is reported by the kernel call that made it.
    bounds_check
        Check every buffer access of every kernel (see :func:`tilecraft.runtime.build`). A
        checked build runs its graph functions through the Python executor, one checked kernel
        call at a time, so a violation is reported by the kernel that made it.

    Returns
    -------
    Executable
        ``exe["forward"](x, *params)`` runs a graph function.

    Raises
    ------
    GraphError
        A call whose callee is missing or does not take the buffers the call passes.
    """
    if _needs_pipeline(mod):
        from .pipeline import get_pipeline

        mod = get_pipeline("zero")(mod)
    check_calls(mod)
    prims = kernel_prim_funcs(mod)
    tgt = as_target(target)
    if not prims.functions:
        return Executable(mod, None, tgt)
    mode = emulate_mode(emulate)
    if not backend_of(tgt, mode, bounds_check=bounds_check).hosts_graph_entries:
        return Executable(mod, build_prim_funcs(prims, tgt), tgt)
    exe = Executable(mod, None, tgt)
    sigs = [s for f in exe.functions.values() if (s := f.signature()) is not None]
    per_call = bounds_check or mode is EmulateMode.RACECHECK
    _attach(exe, build_native(prims, [] if per_call else sigs, tgt, mode, bounds_check))
    return exe


def _attach(exe: Executable, native: NativeBuild) -> None:
    """Give ``exe`` the compiled library and its graph functions their native entries."""
    exe.lib = native.lib
    for name, f in exe.functions.items():
        f.kernels = [native.lib[s.func] for s in f.steps]
        if name in native.entries:
            symbol, layout = native.entries[name]
            dtype = np.dtype(f.func.ret.type.dtype.numpy_name())
            entry = NativeGraph(
                native.lib.path, symbol, layout, f.shape_vars, f.constants, dtype, f.memory_plan
            )
            if isinstance(native.lib, EmulatedModule):  # raise what its kernels recorded
                entry.call = _checked(entry.call, native.lib.check_faults)
            f.attach_native(entry)


def _checked(call: Callable[..., Any], check: Callable[[], None]) -> Callable[..., Any]:
    """``call`` followed by ``check()``."""

    def run(*args: Any) -> Any:
        out = call(*args)
        check()
        return out

    return run


def is_graph_module(mod: Any) -> bool:
    """True for an IRModule holding at least one graph function."""
    return isinstance(mod, IRModule) and bool(graph_functions(mod))

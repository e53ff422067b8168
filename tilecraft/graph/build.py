"""Build a module holding graph functions: lower each graph function, hand it to the runtime.

:func:`lower_graph_function` turns a graph function of ``call_tir`` and constant bindings into
its lowered form, a :class:`~tilecraft.lower.graph_program.GraphProgram` (slots, constants,
kernel calls with the slots that die after each, the result slots; a ``call_extern`` becomes
a step calling the library routine, a ``bind_symbol`` a step reading an extent from a tensor
on the host). PrimFuncs marked ``dispatch:<library>`` that no graph
function calls any more (library dispatch replaced their calls) are not compiled.
:func:`build_graph_module` checks every ``call_tir`` against its PrimFunc, lowers the module's
graph functions and asks the runtime's executor
(:func:`~tilecraft.runtime.executor.build_executable`) for an executable.
:func:`build` (``tc.build``) does that for a module holding graph functions and hands
PrimFuncs alone to :func:`tilecraft.runtime.build`.

No pipeline runs here: a module whose graph functions still call operators (or fused group
functions) is refused with a :class:`~tilecraft.errors.BuildError` naming the pipeline to run.
"""

from __future__ import annotations

from typing import Any, Literal, overload

from ..config import deep_recursion
from ..errors import BuildError
from ..ir import Buffer, IntImm, IRModule, PrimFunc, scheduled_by, verify
from ..ir.scheduled import DISPATCH_PREFIX
from ..lower.graph_program import BIND_SYMBOL, GraphProgram, GraphStep, TensorSpec, liveness
from ..runtime import CUDAModule, EmulatedModule, Library, Module
from ..runtime import build as build_prim_funcs
from ..runtime.arguments import ArgumentTypeError
from ..runtime.emulate import EmulateArg, emulate_mode
from ..runtime.executor import Executable, build_executable
from ..runtime.executor.extern import ROUTINE_ARITY
from ..target import Target, as_target
from .ir import (
    CallExtern,
    CallFunc,
    CallTIR,
    Constant,
    Function,
    OpCall,
    TensorType,
    graph_functions,
)
from .ir_bind import BindSymbol
from .op import GraphError


def lower_graph_function(func: Function) -> GraphProgram:
    """The lowered form of ``func`` (see the module docstring).

    Raises
    ------
    BuildError
        When a binding is not a ``call_tir`` or a constant (run a graph pipeline first).
    """
    slots = {id(p): i for i, p in enumerate(func.params)}
    types = [_spec(p.type) for p in func.params]
    constants: list[Any] = []
    const_of_slot: dict[int, int] = {}
    calls: list[CallTIR | CallExtern | BindSymbol] = []
    outs: list[int] = []
    for b in func.bindings:
        slots[id(b.var)] = slot = len(slots)
        types.append(_spec(b.var.type))
        if isinstance(b.value, Constant):
            const_of_slot[slot] = len(constants)
            constants.append(b.value.data)
        elif isinstance(b.value, (CallTIR, CallExtern, BindSymbol)):
            calls.append(b.value)
            outs.append(slot)
        else:
            raise BuildError(_leftover_message(func))
    args = [tuple(slots[id(a)] for a in c.args) for c in calls]
    rets = tuple(slots[id(r)] for r in func.rets)
    keep = {slots[id(p)] for p in func.params} | set(rets) | set(const_of_slot)
    dead = liveness(args, outs, keep)
    steps = (
        GraphStep(BIND_SYMBOL, a, o, d, bind=(c.lower, c.upper))
        if isinstance(c, BindSymbol)
        else GraphStep(c.func, a, o, d, _extern_attrs(c))
        for c, a, o, d in zip(calls, args, outs, dead, strict=True)
    )
    return GraphProgram(
        func.name,
        tuple(p.name for p in func.params),
        tuple(types),
        tuple(constants),
        const_of_slot,
        tuple(steps),
        rets,
        tuple(func.shape_vars()),
        func.returns_tuple,
    )


def _extern_attrs(
    call: CallTIR | CallExtern | BindSymbol,
) -> tuple[tuple[str, Any], ...] | None:
    """A library call's attributes as a step's (None for a kernel call)."""
    if not isinstance(call, CallExtern):
        return None
    return tuple(sorted(call.attrs.items_tuple()))


def _spec(t: TensorType) -> TensorSpec:
    return TensorSpec(t.shape, t.dtype)


def _leftover_message(func: Function) -> str:
    """Why ``func`` cannot be built yet, naming what it still calls and what to run."""
    ops = dict.fromkeys(b.value.op for b in func.bindings if isinstance(b.value, OpCall))
    groups = dict.fromkeys(b.value.func for b in func.bindings if isinstance(b.value, CallFunc))
    what = []
    if ops:
        what.append(f"operators ({', '.join(ops)})")
    if groups:
        what.append(f"fused group functions ({', '.join(groups)})")
    return (
        f"build: {func.name} still calls {' and '.join(what)}; run "
        "tc.graph.get_pipeline('zero') under the target first, or use tc.compile"
    )


def check_lowered(mod: IRModule) -> None:
    """Refuse a module whose graph functions still call operators or fused groups.

    Raises
    ------
    BuildError
        Naming the function, what it calls and the pipeline to run.
    """
    for _, f in graph_functions(mod):
        if any(isinstance(b.value, (OpCall, CallFunc)) for b in f.bindings):
            raise BuildError(_leftover_message(f))


def check_calls(mod: IRModule) -> None:
    """Check every ``call_tir`` of ``mod``'s graph functions against its PrimFunc.

    The callee must be a PrimFunc taking one buffer per argument plus the output, with the
    same dtypes and ranks and equal static extents, so no kernel is handed arrays it would
    index out of bounds.
    """
    for _, f in graph_functions(mod):
        for b in f.bindings:
            v = b.value
            if isinstance(v, CallExtern):
                _check_extern(f, b.var.name, v)
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


def _check_extern(f: Function, at: str, v: CallExtern) -> None:
    """A library call names a routine the executor knows, with its number of inputs."""
    where = f"build: {f.name} calls the external routine {v.func!r} at {at}"
    arity = ROUTINE_ARITY.get(v.func)
    if arity is None:
        raise GraphError(f"{where}, which is unknown; known routines: {sorted(ROUTINE_ARITY)}")
    if arity != len(v.args):
        raise GraphError(f"{where} with {len(v.args)} tensors; it takes {arity}")


def kernel_module(mod: IRModule) -> IRModule:
    """``mod`` without the PrimFuncs dispatched to a library that no graph function calls."""
    called = {
        b.value.func
        for _, f in graph_functions(mod)
        for b in f.bindings
        if isinstance(b.value, CallTIR)
    }
    drop = [
        n
        for n, f in mod.prim_funcs()
        if n not in called and (scheduled_by(f) or "").startswith(DISPATCH_PREFIX)
    ]
    if not drop:
        return mod
    return IRModule({n: f for n, f in mod.items() if n not in drop}, mod.attrs)


def _fits(p: Buffer, t: TensorType) -> bool:
    if p.dtype != t.dtype or len(p.shape) != t.ndim:
        return False
    return all(
        not (isinstance(a, IntImm) and isinstance(b, IntImm)) or a.value == b.value
        for a, b in zip(p.shape, t.shape, strict=True)
    )


@deep_recursion
def build_graph_module(
    mod: IRModule,
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Executable:
    """Compile a module holding graph functions into an :class:`Executable`.

    The graph functions must call PrimFuncs only (``call_tir``): run a graph pipeline first
    (``tc.graph.get_pipeline("zero")`` under the target, or use ``tc.compile``).

    Parameters
    ----------
    mod
        Graph functions plus the PrimFuncs they call.
    target
        Where the kernels run (``"cpu"``).
    emulate
        For a GPU target: run the kernels on the CPU — ``True`` or ``"racecheck"`` the
        GPU-lowered program in the emulator, ``"serial"`` thread loops as serial loops (see
        :func:`tilecraft.build`). A race-checked build runs its graph functions through the
        Python executor, so a fault is reported by the kernel call that made it.
    bounds_check
        Check every buffer access of every kernel (see :func:`tilecraft.build`). A checked
        build runs its graph functions through the Python executor, one checked kernel call
        at a time, so a violation is reported by the kernel that made it.

    Returns
    -------
    Executable
        ``exe["forward"](x, *params)`` runs a graph function.

    Raises
    ------
    BuildError
        When a graph function still calls operators or fused group functions (naming the
        pipeline to run), or the C compiler fails.
    GraphError
        A call whose callee is missing or does not take the buffers the call passes.
    IRError
        When a function of the module fails :func:`tilecraft.ir.verify`.
    """
    tgt = as_target(target)
    emulate_mode(emulate)
    if not isinstance(bounds_check, bool):
        raise ArgumentTypeError("build: bounds_check must be True or False")
    verify(mod)  # malformed IR stops here, not as a C error or a bad write
    check_lowered(mod)
    check_calls(mod)
    programs = {
        n: lower_graph_function(f) for n, f in graph_functions(mod) if not f.attrs.get("primitive")
    }
    kernels = kernel_module(mod)
    return build_executable(kernels, programs, tgt, emulate=emulate, bounds_check=bounds_check)


@overload
def build(
    func_or_module: PrimFunc,
    target: Literal["cpu"] = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Module: ...


@overload
def build(
    func_or_module: PrimFunc,
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Module | CUDAModule | EmulatedModule: ...


@overload
def build(
    func_or_module: IRModule,
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Library: ...


@deep_recursion
def build(
    func_or_module: PrimFunc | IRModule,
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Module | CUDAModule | EmulatedModule | Library:
    """Compile a PrimFunc, a module of PrimFuncs, or a module holding graph functions.

    No pipeline runs here: graph functions must call PrimFuncs only (run
    ``tc.graph.get_pipeline("zero")`` under the target first, or use :func:`compile`).

    Parameters
    ----------
    func_or_module
        Scheduled or unscheduled PrimFuncs (lowered here), with or without graph functions
        calling them.
    target, emulate, bounds_check
        See :func:`tilecraft.runtime.build`.

    Returns
    -------
    Module, CUDAModule or Library
        For PrimFuncs alone what :func:`tilecraft.runtime.build` returns; for a module holding
        graph functions the graph :class:`~tilecraft.graph.Executable`
        (``exe["forward"](x, *params)``).

    Raises
    ------
    BuildError
        When a graph function still calls operators (naming the pipeline to run), the target
        is unsupported, or the C compiler fails.
    GraphError
        When a ``call_tir`` does not fit its PrimFunc.
    IRError
        When a function fails :func:`tilecraft.ir.verify`.
    """
    if isinstance(func_or_module, IRModule) and is_graph_module(func_or_module):
        return build_graph_module(
            func_or_module, target, emulate=emulate, bounds_check=bounds_check
        )
    return build_prim_funcs(func_or_module, target, emulate=emulate, bounds_check=bounds_check)


def is_graph_module(mod: Any) -> bool:
    """True for an IRModule holding at least one graph function."""
    return isinstance(mod, IRModule) and bool(graph_functions(mod))

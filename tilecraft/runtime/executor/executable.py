"""An executable: compiled kernels plus the graph programs that call them.

:func:`build_executable` compiles every PrimFunc of a module once through the target's backend
and gives each lowered graph function (:class:`~tilecraft.lower.graph_program.GraphProgram`,
made by the graph layer) a :class:`~tilecraft.runtime.executor.function.GraphFunction`. Where
the backend's compiled unit is a host C library the program's C entry
(:mod:`tilecraft.codegen.graph_c`) is compiled with the kernels, so a forward is one call
from Python.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...errors import GraphError
from ...ir import IRModule
from ...lower.graph_program import GraphProgram
from ...target import Target, as_target
from ..arguments import ArgumentTypeError, NoSuchAttributeError, check_timing
from ..backend import backend_of
from ..emulate import EmulateArg, EmulatedModule, EmulateMode, emulate_mode
from ..module import TimingResult, time_calls
from .function import GraphFunction
from .native import NativeBuild, NativeGraph, build_native, kernel_prim_funcs


class Executable:
    """Compiled kernels plus the graph functions that call them.

    A graph function is called by name, ``exe["forward"](x, *w)`` or ``exe.forward(x, *w)``,
    or as the executable itself, ``exe(x, *w)``, when it is the only graph function or is
    named ``forward``; arguments go by position or by parameter name (``x=x``).
    """

    def __init__(
        self,
        mod: IRModule,
        programs: Mapping[str, GraphProgram],
        lib: Any,
        target: Target | str,
        *,
        emulated: bool = False,
    ) -> None:
        self.mod = mod
        self.lib = lib
        self.target = target
        self.functions = {
            n: GraphFunction(p, func=mod.functions.get(n), emulated=emulated)
            for n, p in programs.items()
        }
        # graph function -> entry symbol of those with a plain C entry but no native one
        self.plain_only: dict[str, str] = {}
        if lib is not None:
            for f in self.functions.values():
                f.attach_kernels(lib.__getitem__)

    def __getitem__(self, name: str) -> Any:
        """A graph function (:class:`GraphFunction`) or a compiled PrimFunc by name."""
        if name in self.functions:
            return self.functions[name]
        if self.lib is not None and name in self.lib:
            return self.lib[name]
        raise GraphError(
            f"executable has no function {name!r}; graph functions: {sorted(self.functions)}"
        )

    def __getattr__(self, name: str) -> Any:
        """``exe.forward``: the graph function (or compiled PrimFunc) ``name``."""
        functions = self.__dict__.get("functions")
        if name.startswith("__") or functions is None:
            raise AttributeError(name)
        if name in functions:
            return functions[name]
        lib = self.__dict__.get("lib")
        if lib is not None and name in lib:
            return lib[name]
        raise NoSuchAttributeError(
            f"executable has no attribute or function {name!r}; graph functions: "
            f"{sorted(functions)} (call one as exe.<name>(...) or exe[<name>](...))"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the only graph function, or the one named ``forward``: ``exe(x)``.

        Raises
        ------
        ArgumentTypeError
            When there are several graph functions and none is named ``forward`` (or none),
            naming them; the graph function raises its own argument errors.
        """
        if "forward" in self.functions:
            return self.functions["forward"](*args, **kwargs)
        if len(self.functions) == 1:
            return next(iter(self.functions.values()))(*args, **kwargs)
        if not self.functions:
            kernels = list(getattr(self.lib, "function_names", []))
            raise ArgumentTypeError(
                f"executable has no graph function to call; call a kernel by name: "
                f"exe[name](...) with name in {kernels}"
            )
        names = sorted(self.functions)
        raise ArgumentTypeError(
            f"executable has graph functions {names} and none is named 'forward': call one "
            f"by name, exe[{names[0]!r}](...) or exe.{names[0]}(...)"
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

    def export_library(
        self, path: str | os.PathLike[str], *, require_c_entry: bool = False
    ) -> Path:
        """Write this executable to one file; :func:`tilecraft.runtime.load_module` loads it
        without a compiler, a C program through its plain C entries (see
        :mod:`tilecraft.runtime.export`; ``require_c_entry`` refuses graph functions without
        one)."""
        from ..export import export_library  # the exporter imports this module

        return export_library(self, path, require_c_entry=require_c_entry)

    def profile(self, name: str, *args: Any) -> list[tuple[str, float]]:
        """Run graph function ``name`` once and return (kernel name, seconds) per call."""
        func = self.functions.get(name)
        if func is None:
            raise GraphError(
                f"executable has no graph function {name!r}; graph functions: "
                f"{sorted(self.functions)}"
            )
        return [(r.kernel, r.seconds) for r in func.profile(*args)[1]]


def build_executable(
    mod: IRModule,
    programs: Mapping[str, GraphProgram],
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Executable:
    """Compile the PrimFuncs of ``mod`` and run ``programs`` over them.

    Parameters
    ----------
    mod
        The module: its PrimFuncs are the kernels (kept as :attr:`Executable.mod`).
    programs
        Graph function name -> its lowered program, calling PrimFuncs of ``mod`` (the graph
        layer lowers and checks them: :func:`tilecraft.graph.build_graph_module`).
    target, emulate, bounds_check
        As for :func:`tilecraft.runtime.build`. A race-checked or bounds-checked build runs
        its graph functions through the Python executor, one checked kernel call at a time,
        so a fault is reported by the kernel call that made it.

    Returns
    -------
    Executable
        ``exe["forward"](x, *params)`` runs a graph function.
    """
    prims = kernel_prim_funcs(mod)
    tgt = as_target(target)
    mode = emulate_mode(emulate)
    per_call = bounds_check or mode is EmulateMode.RACECHECK
    emulated = mode is not EmulateMode.OFF
    externs = not per_call and any(p.has_extern_steps for p in programs.values())
    if not prims.functions and not externs:
        return Executable(mod, programs, None, tgt, emulated=emulated)
    backend = backend_of(tgt, mode, bounds_check=bounds_check)
    if not prims.functions and not backend.hosts_graph_entries:
        return Executable(mod, programs, None, tgt, emulated=emulated)
    # (a program of external calls only still gets a library: its plain C entry)
    if not backend.hosts_graph_entries:
        return Executable(mod, programs, backend.build(prims, tgt), tgt, emulated=emulated)
    exe = Executable(mod, programs, None, tgt, emulated=emulated)
    entries = [
        (f.program, formats)
        for f in exe.functions.values()
        if (formats := f.param_formats()) is not None or f.program.has_extern_steps
    ]
    _attach(exe, build_native(prims, [] if per_call else entries, tgt, mode, bounds_check))
    return exe


def _attach(exe: Executable, native: NativeBuild) -> None:
    """Give ``exe`` the compiled library and its graph functions their native entries."""
    exe.lib = native.lib
    exe.plain_only = dict(native.plain_only)
    for name, f in exe.functions.items():
        f.attach_kernels(native.lib.__getitem__)
        if name in native.entries:
            symbol, layout = native.entries[name]
            dtypes = [t.numpy_dtype for t in f.program.result_types]
            entry = NativeGraph(
                native.lib.path, symbol, layout, f.shape_vars, f.constants, dtypes, f.memory_plan
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

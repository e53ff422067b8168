"""Native graph functions: compile the entry points with the kernels, and call them.

:func:`build_native` emits each graph program's C entry (:mod:`tilecraft.codegen.graph_c`) and
its plain C entry (:mod:`tilecraft.codegen.graph_c_abi`, for C programs) after the kernels'
C, compiles the unit once with the runtime's compile cache, and returns the kernel
:class:`~tilecraft.runtime.Module` plus, per graph program, its entry's symbol and context
layout (a :class:`NativeGraph` loads and calls one).

Where things live: the context block of a graph function is an int64 numpy array owned by
its :class:`NativeGraph`; it holds the address of the CPython function table, the constants'
data pointers (the constant arrays themselves stay in Python, referenced by the
:class:`NativeGraph`), the workspace pointers and capacities, and the profiling slots. The
workspace is a list of numpy ``uint64`` blocks planned by
:func:`~tilecraft.runtime.executor.memory_plan.plan_memory`: when a call needs more bytes than the
current blocks hold (the first call, or larger symbolic extents), the entry calls
:meth:`NativeGraph.replan` (under its busy flag, so no native call is using the blocks) which
plans for the call's extents, allocates fresh blocks and writes their addresses into the
block. Smaller later calls reuse the larger blocks, so memory stays at the largest binding
seen. A second thread calling while a native call runs gets ``BUSY`` and runs the Python
executor on its own buffers.
"""

from __future__ import annotations

import ctypes
import dataclasses
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...codegen import graph_c_abi as abi
from ...codegen import graph_c_extern
from ...codegen.graph_c import (
    PRELUDE,
    ContextLayout,
    Kernel,
    NativeStatus,
    Unsupported,
    graph_source,
)
from ...ir import DataType, IRModule, PrimFunc, Var
from ...lower.graph_program import GraphProgram
from ...target import Target
from ..backend import backend_of
from ..emulate import EmulateArg
from ..module import Module
from ..openmp_fork import guard_forks
from .dynamic import bind_refusal
from .memory_plan import RESULT, MemoryPlan

_API_FUNCTIONS = (
    "PyObject_GetBuffer",
    "PyBuffer_Release",
    "PyErr_Clear",
    "PyTuple_GetItem",
    "PyLong_AsVoidPtr",
    "PyTuple_New",
    "PyTuple_SetItem",
    "PyLong_FromLongLong",
    "PyObject_CallObject",
    "Py_IncRef",
    "Py_DecRef",
    "PyEval_SaveThread",
    "PyEval_RestoreThread",
)
_api: np.ndarray | None = None

PlanFn = Callable[[dict[int, int]], MemoryPlan]
_NEW_FUNCTION = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.py_object, ctypes.py_object
)


def _new_function(method_def: int, self: object) -> Any:
    """``PyCFunction_NewEx(method_def, self, None)``: a builtin function calling the entry."""
    new = _NEW_FUNCTION(("PyCFunction_NewEx", ctypes.pythonapi))
    return new(method_def, self, None)


def api_table() -> np.ndarray | None:
    """The CPython function table the entries call through (None outside CPython)."""
    global _api
    if _api is None and platform.python_implementation() == "CPython":
        api = ctypes.pythonapi
        addrs = [ctypes.cast(getattr(api, n), ctypes.c_void_p).value for n in _API_FUNCTIONS]
        _api = np.array([*addrs, id(None), id(np.empty)], dtype=np.uint64)
    return _api


def buffer_formats(dt: DataType) -> tuple[str, ...]:
    """The buffer-protocol formats numpy gives arrays of ``dt`` (``int64``: ``l`` and ``q``)."""
    want = np.dtype(dt.numpy_name())
    found = [memoryview(np.empty(0, want)).format]  # type: ignore[arg-type]
    for code in np.typecodes["All"]:
        other = np.dtype(code)
        if other == want:
            fmt = memoryview(np.empty(0, other)).format  # type: ignore[arg-type]
            if fmt not in found:
                found.append(fmt)
    return tuple(found)


@dataclass(frozen=True)
class StepRecord:
    """One kernel call of a profiled forward: its name, seconds and output address."""

    kernel: str
    seconds: float
    address: int


class NativeGraph:
    """A graph function's compiled entry and its context block (see the module docstring).

    Parameters
    ----------
    path, symbol
        The shared library and the entry's symbol.
    layout
        Slot indices of the context block.
    shape_vars
        The graph function's symbolic extents, in the entry's order.
    constants
        The constants' arrays, by index (kept alive here).
    result_dtypes
        numpy dtype of each result (one for a function returning one tensor).
    plan
        ``plan(env) -> MemoryPlan`` for a binding ``id(var) -> value`` (cached by the caller).
    """

    def __init__(
        self,
        path: Path,
        symbol: str,
        layout: ContextLayout,
        shape_vars: Sequence[Var],
        constants: Sequence[np.ndarray],
        result_dtypes: Sequence[np.dtype[Any]],
        plan: PlanFn,
    ) -> None:
        table = api_table()
        assert table is not None  # build_native checked
        self._table = table
        self.symbol = symbol
        self.layout = layout
        self.shape_vars = list(shape_vars)
        self.constants = list(constants)
        self.result_dtypes = list(result_dtypes)
        self.plan = plan
        self.storages: list[np.ndarray] = []
        guard_forks()  # a forked child must not wait for this process's OpenMP threads
        dll = ctypes.CDLL(str(path))
        dll.tcg__init.argtypes = (ctypes.c_void_p,)
        dll.tcg__init(table.ctypes.data)
        method_def = getattr(dll, f"{symbol}_def")
        method_def.restype = ctypes.c_void_p
        self.ctx = np.zeros(layout.size, np.int64)
        self.ctx_addr: int = self.ctx.ctypes.data
        # the entry as a builtin function; its self keeps this object (and the block) alive
        self.call: Callable[..., np.ndarray | tuple[np.ndarray, ...] | None] = _new_function(
            method_def(), (self.ctx_addr, self)
        )
        self._replan = self.replan  # the entry holds a borrowed pointer to this bound method
        ctx = self.ctx
        ctx[layout.REPLAN] = id(self._replan)
        for k, dt in enumerate(self.result_dtypes):
            ctx[layout.dtype(k)] = id(dt)
        for i, arr in enumerate(self.constants):
            ctx[layout.consts + i] = arr.ctypes.data
        ctx[layout.cap : layout.cap + layout.num_steps] = -1  # nothing planned yet

    def status(self) -> NativeStatus:
        """Why the last call returned None."""
        return NativeStatus(int(self.ctx[self.layout.STATUS]))

    def replan(self) -> None:
        """Plan and allocate the workspace for the extents in the context block."""
        lay = self.layout
        env = {id(v): int(self.ctx[lay.VARS + i]) for i, v in enumerate(self.shape_vars)}
        plan = self.plan(env)
        storages = plan.allocate()
        for n, sid in enumerate(plan.storage):
            if sid == RESULT:
                self.ctx[lay.out + n] = 0
                self.ctx[lay.cap + n] = np.iinfo(np.int64).max
            else:
                self.ctx[lay.out + n] = storages[sid].ctypes.data
                self.ctx[lay.cap + n] = storages[sid].nbytes
        self.storages = storages  # the previous blocks are freed: no native call is running

    def set_profiling(self, on: bool) -> None:
        """Record per-step times and output addresses in later calls (or stop)."""
        self.ctx[self.layout.PROFILE] = int(on)

    def records(self, kernels: Sequence[str]) -> list[StepRecord]:
        """The records of the last profiled call, one per step."""
        lay = self.layout
        return [
            StepRecord(
                name,
                float(self.ctx[lay.nanos + n]) * 1e-9,
                int(self.ctx[lay.addr + n]),
            )
            for n, name in enumerate(kernels)
        ]


@dataclass(frozen=True)
class NativeBuild:
    """The kernel library and the entries of the graph functions compiled natively."""

    lib: Module
    entries: dict[str, tuple[str, ContextLayout]]  # graph function -> (symbol, layout)
    # graph function -> entry symbol, for those with a plain C entry only (external calls)
    plain_only: dict[str, str] = dataclasses.field(default_factory=dict)


def build_native(
    prims: IRModule,
    programs: Sequence[tuple[GraphProgram, Sequence[tuple[str, ...]] | None]],
    target: Target,
    emulate: EmulateArg,
    bounds_check: bool = False,
) -> NativeBuild:
    """Compile the kernels of ``prims`` and an entry per graph program into one library.

    ``programs`` pairs each program with its parameters' buffer formats
    (:func:`buffer_formats`), or None for a program the Python executor runs that gets a
    plain C entry only (one calling external routines, :mod:`~tilecraft.codegen.graph_c_extern`:
    :attr:`NativeBuild.plain_only`). A graph function whose entry cannot be generated
    (:class:`~tilecraft.codegen.graph_c.Unsupported`) gets none; the Python executor runs
    it. The kernels are lowered and emitted by the target's backend
    (:func:`~tilecraft.runtime.backend.backend_of`; for a CUDA target with ``emulate`` True or
    ``"racecheck"`` the GPU emulator's, with the same ABI), the entries appended to that unit,
    and the whole compiled and loaded by the same backend.
    """
    backend = backend_of(target, emulate, bounds_check=bounds_check)
    emitted = backend.emit(backend.lower(prims, target), target)
    originals, lowered = emitted.lowered.originals, emitted.lowered.functions
    taken = set(emitted.symbols.values())
    parts = [emitted.text, PRELUDE]
    entries: dict[str, tuple[str, ContextLayout]] = {}
    plain_only: dict[str, str] = {}
    plain: list[tuple[GraphProgram, str, str]] = []  # program, entry symbol, plain C entry
    if api_table() is not None and not taken & set(abi.GLOBAL_SYMBOLS):
        for prog, formats in programs:
            if bind_refusal(prog) is not None:  # the Python executor runs it
                continue
            kernels = [
                None if s.is_extern else
                Kernel(originals[s.func], lowered[s.func], emitted.symbols[s.func])
                for s in prog.steps
            ]  # fmt: skip
            symbol = _fresh_symbol(f"{abi.ENTRY_PREFIX}{prog.name}", taken)
            try:  # the CPython entry and the plain C one (tilecraft.codegen.graph_c_abi)
                native = None if formats is None else graph_source(prog, formats, kernels, symbol)
                plain.append((prog, symbol, abi.entry_source(prog, kernels, symbol)))
            except Unsupported:
                continue
            taken.update((symbol, *abi.c_names(symbol)))
            if native is None:
                plain_only[prog.name] = symbol
            else:
                parts.append(native[0])
                entries[prog.name] = (symbol, native[1])
    if plain:
        used = graph_c_extern.used_routines([prog for prog, *_ in plain])
        parts += [abi.prelude(), graph_c_extern.prelude(used), *(text for *_, text in plain)]
        parts.append(abi.weights_source([(prog, symbol) for prog, symbol, _ in plain]))
    unit = dataclasses.replace(emitted, text="\n".join(parts) + "\n")
    lib = backend.load(backend.compile(unit, target))
    assert isinstance(lib, Module)
    return NativeBuild(lib, entries, plain_only)


def _fresh_symbol(base: str, taken: set[str]) -> str:
    """``base`` or ``base_<n>``, such that neither it nor its plain C names are taken."""
    name, n = base, 1
    while name in taken or taken.intersection(abi.c_names(name)):
        name = f"{base}_{n}"
        n += 1
    return name


def kernel_prim_funcs(mod: IRModule) -> IRModule:
    """The PrimFuncs of ``mod`` as a module of their own."""
    return IRModule({n: f for n, f in mod.prim_funcs() if isinstance(f, PrimFunc)})

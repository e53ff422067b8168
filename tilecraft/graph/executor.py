"""The graph executor: run a module's graph functions over its compiled PrimFuncs.

``build_graph_module(mod, target)`` legalizes any operator calls left in the module,
compiles every PrimFunc once with :func:`tilecraft.runtime.build`, and plans each graph
function: which intermediate buffers die after which binding. At call time symbolic extents
are bound from the inputs' shapes, and intermediate arrays come from a pool keyed by
(shape, dtype) that is refilled as soon as a value's last use has run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import IRModule, PrimFunc, Var
from ..runtime import build as build_prim_funcs
from ..runtime.arguments import eval_shape_expr
from ..target import Target
from .ir import CallFunc, CallTIR, Function, OpCall, TensorType, graph_functions
from .op import GraphError


@dataclass
class _Step:
    func: str
    args: tuple[int, ...]  # slots
    out: int
    out_type: TensorType
    free_after: tuple[int, ...]


class GraphFunction:
    """A callable graph function of an :class:`Executable`."""

    def __init__(self, exe: Executable, func: Function) -> None:
        self.exe = exe
        self.func = func
        slots = {id(p): i for i, p in enumerate(func.params)}
        steps: list[_Step] = []
        for b in func.bindings:
            if not isinstance(b.value, CallTIR):
                kind = "operator call" if isinstance(b.value, OpCall) else "fused group call"
                raise GraphError(f"build: {func.name} still has a {kind} at {b.var.name}; run "
                                 "tc.graph.get_pipeline('zero') first")
            slots[id(b.var)] = len(slots)
            steps.append(_Step(b.value.func, tuple(slots[id(a)] for a in b.value.args),
                               slots[id(b.var)], b.var.type, ()))
        last: dict[int, int] = {}
        for n, s in enumerate(steps):
            for a in s.args:
                last[a] = n
        keep = {slots[id(p)] for p in func.params} | {slots[id(func.ret)]}
        for n, s in enumerate(steps):
            dead = tuple(sorted({a for a in s.args if last[a] == n and a not in keep}))
            if s.out not in last and s.out not in keep:
                dead = (*dead, s.out)
            s.free_after = dead
        self.steps = steps
        self.ret_slot = slots[id(func.ret)]
        self.num_slots = len(slots)
        self.pool_stats = {"allocated": 0, "reused": 0}

    def _bind_inputs(self, args: Sequence[Any]) -> tuple[list[Any], dict[int, int]]:
        params = self.func.params
        name = self.func.name
        if len(args) != len(params):
            raise GraphError(f"{name}: expected {len(params)} arguments "
                             f"({', '.join(p.name for p in params)}), got {len(args)}")
        env: dict[int, int] = {}
        values: list[Any] = [None] * self.num_slots
        for i, (p, a) in enumerate(zip(params, args, strict=False)):
            arr = np.asarray(a)
            want = p.type
            if str(arr.dtype) != want.dtype.numpy_name():
                raise GraphError(f"{name}: argument {i} ({p.name}) has dtype {arr.dtype}, "
                                 f"expected {want.dtype}")
            if arr.ndim != want.ndim:
                raise GraphError(f"{name}: argument {i} ({p.name}) has shape {arr.shape}, "
                                 f"expected {want.describe()}")
            for d, (dim, actual) in enumerate(zip(want.shape, arr.shape, strict=False)):
                if isinstance(dim, Var) and id(dim) not in env:
                    env[id(dim)] = int(actual)
                expected = eval_shape_expr(dim, env)
                if expected is not None and expected != actual:
                    raise GraphError(f"{name}: argument {i} ({p.name}) has shape {arr.shape}, "
                                     f"expected {want.describe()} (dimension {d} should be "
                                     f"{expected})")
            values[i] = np.ascontiguousarray(arr)
        return values, env

    def _shape(self, t: TensorType, env: dict[int, int]) -> tuple[int, ...]:
        out = []
        for s in t.shape:
            v = eval_shape_expr(s, env)
            if v is None:
                raise GraphError(f"{self.func.name}: extent {s!r} is not bound by the inputs")
            out.append(v)
        return tuple(out)

    def _run(self, args: Sequence[Any], timings: list[tuple[str, float]] | None) -> np.ndarray:
        values, env = self._bind_inputs(args)
        pool: dict[tuple[tuple[int, ...], str], list[np.ndarray]] = {}
        for s in self.steps:
            shape = self._shape(s.out_type, env)
            key = (shape, s.out_type.dtype.numpy_name())
            free = pool.get(key)
            if free:
                out = free.pop()
                self.pool_stats["reused"] += 1
            else:
                out = np.empty(shape, key[1])
                self.pool_stats["allocated"] += 1
            kernel = self.exe.lib[s.func]
            call_args = [values[a] for a in s.args] + [out]
            if timings is None:
                kernel(*call_args)
            else:
                t0 = time.perf_counter()
                kernel(*call_args)
                timings.append((s.func, time.perf_counter() - t0))
            values[s.out] = out
            for d in s.free_after:
                arr = values[d]
                values[d] = None
                pool.setdefault((arr.shape, str(arr.dtype)), []).append(arr)
        return values[self.ret_slot]  # type: ignore[no-any-return]

    def __call__(self, *args: Any) -> np.ndarray:
        """Run on numpy arrays (inputs then weights); returns the result array."""
        return self._run(args, None)


class Executable:
    """Compiled kernels plus the graph functions that call them: ``exe["forward"](x, *w)``."""

    def __init__(self, mod: IRModule, lib: Any, target: Target | str) -> None:
        self.mod = mod
        self.lib = lib
        self.target = target
        self.functions = {n: GraphFunction(self, f) for n, f in graph_functions(mod)
                          if not f.attrs.get("primitive")}

    def __getitem__(self, name: str) -> GraphFunction:
        if name in self.functions:
            return self.functions[name]
        if name in self.lib:
            return self.lib[name]  # type: ignore[no-any-return]
        raise GraphError(f"executable has no function {name!r}; graph functions: "
                         f"{sorted(self.functions)}")

    def __contains__(self, name: object) -> bool:
        return name in self.functions or name in self.lib

    @property
    def source(self) -> str:
        """The generated source of the kernels."""
        return self.lib.source  # type: ignore[no-any-return]

    def profile(self, name: str, *args: Any) -> list[tuple[str, float]]:
        """Run graph function ``name`` once and return (kernel name, seconds) per call."""
        timings: list[tuple[str, float]] = []
        self[name]._run(args, timings)
        return timings


def _needs_pipeline(mod: IRModule) -> bool:
    return any(isinstance(b.value, (OpCall, CallFunc))
               for _, f in graph_functions(mod) for b in f.bindings)


def build_graph_module(mod: IRModule, target: Target | str | None = "cpu",
                       **kwargs: Any) -> Executable:
    """Compile a module holding graph functions into an :class:`Executable`.

    Operator calls left in the module are legalized (and fused) by the "zero" pipeline first.

    Parameters
    ----------
    mod
        Graph functions plus the PrimFuncs they call.
    target
        Where the kernels run (``"cpu"``); extra keyword arguments go to
        :func:`tilecraft.runtime.build` (e.g. ``emulate=True``).
    """
    if _needs_pipeline(mod):
        from .pipeline import get_pipeline

        mod = get_pipeline("zero")(mod)
    prims = IRModule(dict(mod.prim_funcs()))
    for _, f in graph_functions(mod):
        for b in f.bindings:
            callee = mod.functions.get(b.value.func)  # type: ignore[union-attr]
            if not isinstance(callee, PrimFunc):
                raise GraphError(f"build: {f.name} calls {b.value.func!r}, which is not a "  # type: ignore[union-attr]
                                 "PrimFunc of the module")
    lib = build_prim_funcs(prims, target, **kwargs)
    return Executable(mod, lib, target if target is not None else "cpu")


def is_graph_module(mod: Any) -> bool:
    """True for an IRModule holding at least one graph function."""
    return isinstance(mod, IRModule) and bool(graph_functions(mod))



"""What to tune: one :class:`ExtractedTask` per distinct PrimFunc of a module.

``extract_tasks(mod, target)`` accepts a model module after the graph pipeline (graph
functions calling PrimFuncs through ``call_tir``) or a plain module of PrimFuncs. Functions
are grouped by workload key (structural hash under ``module_equality``), so two calls of
equal kernels are one task; a task's weight is its number of call sites (counting a graph
function called twice twice), or for a plain module its number of functions. PrimFuncs no
graph function calls are left out of a model's tasks, and functions already scheduled (they
carry the ``tc.scheduled`` mark, :func:`tilecraft.ir.is_scheduled`) are left out of every
module's. A module straight from a frontend's export (graph functions calling operators, no
PrimFuncs yet) is refused: there is nothing to tune before the graph pipeline has legalized
its operators.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import TuneError
from ..graph import CallFunc, CallTIR, Function, OpCall, is_graph_module
from ..ir import IRModule, PrimFunc, is_scheduled
from ..lower.merge_specializations import SPECIALIZATION_OF_ATTR
from ..target import Target, as_target
from .database.workload import ModuleEquality, WorkloadKey, canonical_func


@dataclass(frozen=True, eq=False)
class ExtractedTask:
    """One workload to tune.

    Attributes
    ----------
    task_name
        The name of the first function of the workload (in call order).
    mod
        The workload: ``IRModule({"main": func})``.
    weight
        How many call sites (or functions) it stands for.
    dispatched
        The module's functions this task covers, each as ``IRModule({name: func})``.
    target
        The target to tune for.
    """

    task_name: str
    mod: IRModule
    weight: int
    dispatched: tuple[IRModule, ...]
    target: Target

    @property
    def func(self) -> PrimFunc:
        """The workload's function."""
        func = self.mod["main"]
        assert isinstance(func, PrimFunc)
        return func

    def __repr__(self) -> str:
        return f"ExtractedTask({self.task_name!r}, weight={self.weight})"


def _call_counts(mod: IRModule) -> Counter[str]:
    """Calls of each PrimFunc name from the graph functions no other graph function calls."""
    graphs = {n: f for n, f in mod.items() if isinstance(f, Function)}
    called = {
        b.value.func for f in graphs.values() for b in f.bindings if isinstance(b.value, CallFunc)
    }
    memo: dict[str, Counter[str]] = {}

    def counts(name: str, path: tuple[str, ...]) -> Counter[str]:
        if name in path:
            raise TuneError(f"extract_tasks: graph functions call each other in a cycle: {path}")
        if name not in memo:
            total: Counter[str] = Counter()
            for b in graphs[name].bindings:
                if isinstance(b.value, CallTIR):
                    total[b.value.func] += 1
                elif isinstance(b.value, CallFunc) and b.value.func in graphs:
                    total.update(counts(b.value.func, (*path, name)))
            memo[name] = total
        return memo[name]

    result: Counter[str] = Counter()
    for name in graphs:
        if name not in called:
            result.update(counts(name, ()))
    return result


def _check_legalized(mod: IRModule) -> None:
    """Refuse a module of graph functions calling operators but holding no PrimFunc yet."""
    if any(True for _ in mod.prim_funcs()):
        return
    ops = sorted(
        {b.value.op for g in mod.functions.values() if isinstance(g, Function)
         for b in g.bindings if isinstance(b.value, OpCall)}
    )  # fmt: skip
    if ops:
        raise TuneError(
            "extract_tasks: the module has no PrimFuncs yet, only graph functions calling "
            f"operators ({', '.join(ops)}): legalize them first with the graph pipeline, "
            'e.g. `with target: mod = tc.graph.get_pipeline("zero")(mod)`, and extract the '
            "tasks of the result"
        )


def _variant_weights(prims: Mapping[str, PrimFunc], calls: Mapping[str, int]) -> dict[str, int]:
    """Each size variant's weight: the call count of the function it specialises."""
    out = {}
    for name, func in prims.items():
        general = func.attrs.get(SPECIALIZATION_OF_ATTR)
        if isinstance(general, str) and calls.get(general):
            out[name] = calls[general]
    return out


def extract_tasks(
    mod: IRModule | PrimFunc,
    target: Target | str | None = None,
    *,
    module_equality: ModuleEquality | str = ModuleEquality.STRUCTURAL,
) -> list[ExtractedTask]:
    """The tuning tasks of ``mod``, in order of first call (or of definition).

    Parameters
    ----------
    mod
        A module after the graph pipeline, a module of PrimFuncs, or one PrimFunc.
    target
        The target (default: the current target, else the CPU).
    module_equality
        How functions are grouped into workloads (as the database will match them).

    Raises
    ------
    TuneError
        When ``mod`` is neither a module nor a PrimFunc, or is a module straight from an
        export (operator calls, no PrimFuncs: run ``tc.graph.get_pipeline("zero")`` first).
    """
    tgt = as_target(target)
    mode = ModuleEquality.parse(module_equality)
    if isinstance(mod, PrimFunc):
        mod = IRModule({mod.name: mod})
    if not isinstance(mod, IRModule):
        raise TuneError(
            f"extract_tasks: expected an IRModule or PrimFunc, got {type(mod).__name__}"
        )
    _check_legalized(mod)
    prims = dict(mod.prim_funcs())
    if is_graph_module(mod):
        calls = _call_counts(mod)
        weights: Mapping[str, int] = {n: c for n, c in calls.items() if n in prims}
        # a size variant (SpecializeShapes) runs in place of its general function's calls
        weights = {**weights, **_variant_weights(prims, calls)}
    else:
        weights = dict.fromkeys(prims, 1)
    groups: dict[WorkloadKey, list[str]] = {}
    for name in weights:
        if not is_scheduled(prims[name]):
            groups.setdefault(WorkloadKey.of(prims[name], tgt, mode), []).append(name)
    return [
        ExtractedTask(
            task_name=names[0],
            mod=IRModule({"main": canonical_func(prims[names[0]])}),
            weight=sum(weights[n] for n in names),
            dispatched=tuple(IRModule({n: prims[n]}) for n in names),
            target=tgt,
        )
        for names in groups.values()
    ]

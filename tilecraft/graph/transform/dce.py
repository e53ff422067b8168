"""DeadCodeElimination: drop unused bindings and functions nothing calls.

After: every binding of a graph function contributes to one of its results, and the module holds
only the entry graph functions (those without ``attrs["primitive"]``) and the functions they
call, directly or through fused groups. A module without graph functions is returned as is.
"""

from __future__ import annotations

from ...ir import IRModule
from ...ir.transform import ModulePass
from ..ir import CallFunc, CallTIR, Function, graph_functions, rebuild


def _live_bindings(func: Function) -> Function:
    live = {id(r) for r in func.rets}  # every result is a root
    keep = []
    for b in reversed(func.bindings):
        if id(b.var) in live:
            keep.append(b)
            live.update(id(a) for a in b.value.args)
    keep.reverse()
    return func if len(keep) == len(func.bindings) else rebuild(func, keep)


class DeadCodeElimination(ModulePass):
    """Remove dead bindings and unreachable functions."""

    def __init__(self, entries: tuple[str, ...] | None = None) -> None:
        self.entries = entries

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        graphs = graph_functions(mod)
        if not graphs:
            return mod
        funcs = {n: _live_bindings(f) if isinstance(f, Function) else f for n, f in mod.items()}
        roots = (
            list(self.entries)
            if self.entries
            else [n for n, f in graphs if not f.attrs.get("primitive")]
        )
        reach: set[str] = set()
        todo = [r for r in roots if r in funcs]
        while todo:
            name = todo.pop()
            if name in reach:
                continue
            reach.add(name)
            f = funcs[name]
            if isinstance(f, Function):
                todo.extend(
                    b.value.func for b in f.bindings if isinstance(b.value, (CallTIR, CallFunc))
                )
        return IRModule({n: f for n, f in funcs.items() if n in reach}, mod.attrs)

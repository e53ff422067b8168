"""FuseOps: group call_tir bindings into fused graph functions.

Before: graph functions of ``call_tir`` bindings whose PrimFuncs carry ``op_pattern``
(AnnotateOpPattern runs first when missing). After: each group of two or more calls becomes
a graph function ``fused_<callee names>`` with ``attrs["primitive"] = True`` called through
``CallFunc``; FuseTIR then merges each into one PrimFunc.

Grouping, in binding order: an elementwise/broadcast call joins the group producing one of
its arguments when that group is open (its anchor is output-fusable such as matmul/conv, or
injective) and the argument is the group's latest output, used exactly once and not the
function's result. An injective call may join an open group with no output-fusable anchor.
Reductions and opaque calls stay alone and close their group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...ir import Attrs, BaseFunc, IRModule, PrimFunc
from ...ir.transform import ModulePass
from ..ir import (
    Binding,
    CallFunc,
    CallTIR,
    Function,
    ShapeVarCopier,
    TensorVar,
    graph_functions,
    rebuild,
)
from .annotate_op_pattern import OpPattern, op_pattern_of
from .names import fresh_name


@dataclass
class _Group:
    anchor: OpPattern
    members: list[Binding] = field(default_factory=list)

    @property
    def output(self) -> TensorVar:
        return self.members[-1].var


def _use_counts(func: Function) -> dict[int, int]:
    counts: dict[int, int] = {}
    for b in func.bindings:
        for a in b.value.args:
            counts[id(a)] = counts.get(id(a), 0) + 1
    for r in func.rets:  # a result escapes: it is never an intermediate of a group
        counts[id(r)] = counts.get(id(r), 0) + 1
    return counts


def _can_join(group: _Group, pattern: OpPattern) -> bool:
    if pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST):
        return group.anchor <= OpPattern.INJECTIVE or group.anchor is OpPattern.OUT_EWISE_FUSABLE
    if pattern is OpPattern.INJECTIVE:
        return group.anchor <= OpPattern.INJECTIVE
    return False


def group_bindings(func: Function, mod_funcs: Mapping[str, BaseFunc]) -> list[_Group]:
    """Partition ``func``'s bindings into fusion groups (in order of their last member)."""
    uses = _use_counts(func)
    group_of: dict[int, _Group] = {}
    groups: list[_Group] = []
    for b in func.bindings:
        v = b.value
        callee = mod_funcs.get(v.func) if isinstance(v, CallTIR) else None
        if not isinstance(callee, PrimFunc):
            groups.append(_Group(OpPattern.OPAQUE, [b]))
            continue
        pattern = op_pattern_of(callee)
        target: _Group | None = None
        for a in v.args:
            producer = group_of.get(id(a))
            if (
                producer is not None
                and producer.output is a
                and uses[id(a)] == 1
                and _can_join(producer, pattern)
            ):
                target = producer
                break
        if target is None:
            target = _Group(pattern)
            groups.append(target)
        target.members.append(b)
        group_of[id(b.var)] = target
    # groups are emitted where their last member stood
    order = {id(g.members[-1]): g for g in groups}
    return [order[id(b)] for b in func.bindings if id(b) in order]


def _call_tir(b: Binding) -> CallTIR:
    """The call of a binding inside a group of two or more (always a call_tir)."""
    assert isinstance(b.value, CallTIR)
    return b.value


def _group_function(group: _Group, name: str) -> tuple[Function, tuple[TensorVar, ...]]:
    inside = {id(b.var) for b in group.members}
    outer: list[TensorVar] = []
    for b in group.members:
        for a in b.value.args:
            if id(a) not in inside and all(a is not o for o in outer):
                outer.append(a)
    fresh = ShapeVarCopier()  # the group function gets its own symbolic extents
    vmap = {id(a): TensorVar(a.name, fresh.type(a.type)) for a in outer}
    bindings = []
    for b in group.members:
        nv = TensorVar(b.var.name, fresh.type(b.var.type))
        call = _call_tir(b)
        bindings.append(
            Binding(nv, CallTIR(call.func, tuple(vmap[id(a)] for a in call.args), nv.type))
        )
        vmap[id(b.var)] = nv
    params = tuple(vmap[id(a)] for a in outer)
    func = Function(params, tuple(bindings), bindings[-1].var, Attrs({"primitive": True}), name)
    return func, tuple(outer)


class FuseOps(ModulePass):
    """Group fusable call_tir bindings into primitive graph functions (see module docstring)."""

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        funcs = dict(mod.functions)
        for gname, func in graph_functions(mod):
            if func.attrs.get("primitive"):
                continue
            new_bindings: list[Binding] = []
            for g in group_bindings(func, funcs):
                if len(g.members) == 1:
                    new_bindings.append(g.members[0])
                    continue
                callees = [_call_tir(b).func for b in g.members]
                name = fresh_name(funcs, "fused_" + "_".join(callees))
                sub, args = _group_function(g, name)
                funcs[name] = sub
                new_bindings.append(Binding(g.output, CallFunc(name, args)))
            funcs[gname] = rebuild(func, new_bindings)
        return IRModule(funcs, mod.attrs)

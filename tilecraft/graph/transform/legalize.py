"""Legalize: replace every operator call by a ``call_tir`` of a PrimFunc built from te.

Before: graph functions may hold ``OpCall`` bindings. After: they hold only ``CallTIR`` (and
``CallFunc``) bindings; one PrimFunc per distinct call, named after the operator
(``matmul``, ``matmul1``, ...; ``permute_dims`` gives ``transpose``). Structurally equal
PrimFuncs are shared when structural equality is available.
"""

from __future__ import annotations

from ... import te
from ...ir import IRModule, PrimFunc, Var
from .. import legalize_ops  # noqa: F401  (registers the legalizations)
from ..ir import Binding, CallTIR, Function, OpCall, TensorVar, graph_functions, rebuild
from ..op import GraphError, get_op
from .base import ModulePass
from .names import detach_shape_vars, fresh_name, same_prim_func


def legalize_call(call: OpCall, out: TensorVar) -> tuple[PrimFunc, tuple[TensorVar, ...]]:
    """The PrimFunc computing ``call`` and the (deduplicated) arguments to pass it."""
    op = get_op(call.op)
    if op.legalize is None:
        raise GraphError(f"Legalize: operator {call.op!r} has no legalization")
    args: list[TensorVar] = []
    for a in call.args:
        if all(a is not b for b in args):
            args.append(a)
    for suffix in ("", "_in", "_input"):
        phs = {id(a): te.placeholder(a.type.shape, a.type.dtype, name=a.name + suffix)
               for a in args}
        result = op.legalize([phs[id(a)] for a in call.args], call.attrs, out.type)
        if all(result.name != p.name for p in phs.values()):
            break
    func = te.create_prim_func([*(phs[id(a)] for a in args), result], name=op.func_name)
    extra = [p for p in func.params if isinstance(p, Var)]
    if extra:
        raise GraphError(f"Legalize: {call.op} needs scalar parameters {[v.name for v in extra]}"
                         " that its arguments' shapes do not bind")
    return detach_shape_vars(func), tuple(args)


class Legalize(ModulePass):
    """Lower every ``OpCall`` to ``call_tir`` of a new PrimFunc of the module."""

    name = "Legalize"

    def transform(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        funcs = dict(mod.functions)
        for gname, func in graph_functions(mod):
            funcs[gname] = self._function(func, funcs)
        return IRModule(funcs, mod.attrs)

    def _function(self, func: Function, funcs: dict) -> Function:  # type: ignore[type-arg]
        out: list[Binding] = []
        for b in func.bindings:
            if not isinstance(b.value, OpCall):
                out.append(b)
                continue
            prim, args = legalize_call(b.value, b.var)
            name = same_prim_func(funcs, prim)
            if name is None:
                name = fresh_name(funcs, prim.name)
                funcs[name] = prim.update(name=name)
            out.append(Binding(b.var, CallTIR(name, args, b.var.type)))
        return rebuild(func, out)

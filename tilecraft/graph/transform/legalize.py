"""Legalize: replace every operator call by a ``call_tir`` of a PrimFunc built from topi.

Before: graph functions may hold ``OpCall`` bindings. After: they hold only ``CallTIR`` (and
``CallFunc``) bindings; one PrimFunc per distinct call, named after the operator
(``matmul``, ``matmul1``, ...; ``permute_dims`` gives ``transpose``). A call whose PrimFunc is
structurally equal to one already in the module reuses it.

A PrimFunc binds its symbolic extents from its buffers' shapes. A call whose tensors have
only compound extents of some shape variable (``s + 1`` for a KV cache grown by one token,
never ``s`` alone) is legalized with a variable of its own for each such extent, so the
kernel takes any extent there (the executor binds it from the graph's ``s + 1``).
"""

from __future__ import annotations

from ... import te
from ...errors import TilecraftError
from ...ir import BaseFunc, IntImm, IRModule, PrimFunc, Var
from ...ir.transform import ModulePass
from .. import legalize_ops  # noqa: F401  (registers the legalizations)
from ..ir import Binding, CallTIR, Function, OpCall, TensorType, TensorVar, graph_functions, rebuild
from ..op import GraphError, get_op
from .names import PrimFuncIndex, detach_shape_vars, fresh_name, unbound_extents, with_extents


def legalize_call(call: OpCall, out: TensorVar) -> tuple[PrimFunc, tuple[TensorVar, ...]]:
    """The PrimFunc computing ``call`` and the (deduplicated) arguments to pass it.

    Placeholders are named after the graph values; create_prim_func keeps parameter names
    and renames clashing intermediate buffers.
    """
    op = get_op(call.op)
    if op.legalize is None:
        raise GraphError(f"Legalize: operator {call.op!r} has no legalization")
    args: list[TensorVar] = []
    for a in call.args:
        if all(a is not b for b in args):
            args.append(a)
    func = _prim_func(call, out, args, unbound_extents([*args, out]))
    extra = [p for p in func.params if isinstance(p, Var)]
    if extra:
        raise GraphError(
            f"Legalize: {call.op} needs scalar parameters {[v.name for v in extra]}"
            " that its arguments' shapes do not bind"
        )
    return detach_shape_vars(func), tuple(args)


def _prim_func(
    call: OpCall, out: TensorVar, args: list[TensorVar], extents: dict[str, Var]
) -> PrimFunc:
    """The PrimFunc of ``call``, each compound extent named in ``extents`` as its Var."""
    op = get_op(call.op)
    assert op.legalize is not None  # legalize_call checked
    phs = {
        id(a): te.placeholder(with_extents(a.type, extents), a.type.dtype, name=a.name)
        for a in args
    }
    want = TensorType(with_extents(out.type, extents), out.type.dtype)
    try:
        result = op.legalize([phs[id(a)] for a in call.args], call.attrs, want)
    except GraphError:
        raise
    except TilecraftError as e:
        raise GraphError(f"Legalize: {call.op} at {out.name}: {e}") from e
    _check_result(call.op, result, want)
    return te.create_prim_func([*(phs[id(a)] for a in args), result], name=op.func_name)


def _check_result(op: str, result: te.Tensor, want: TensorType) -> None:
    """The legalized computation must produce the inferred type (static extents compared)."""
    ok = (
        result.dtype == want.dtype
        and result.ndim == want.ndim
        and all(
            not (isinstance(a, IntImm) and isinstance(b, IntImm)) or a.value == b.value
            for a, b in zip(result.shape, want.shape, strict=False)
        )
    )
    if not ok:
        shape = TensorType(result.shape, result.dtype).describe()
        raise GraphError(f"Legalize: {op} computes {shape}, but its type is {want.describe()}")


class Legalize(ModulePass):
    """Lower every ``OpCall`` to ``call_tir`` of a new PrimFunc of the module."""

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        funcs = dict(mod.functions)
        index = PrimFuncIndex(funcs)
        for gname, func in graph_functions(mod):
            funcs[gname] = self._function(func, funcs, index)
        return IRModule(funcs, mod.attrs)

    def _function(
        self, func: Function, funcs: dict[str, BaseFunc], index: PrimFuncIndex
    ) -> Function:
        out: list[Binding] = []
        for b in func.bindings:
            if not isinstance(b.value, OpCall):
                out.append(b)
                continue
            prim, args = legalize_call(b.value, b.var)
            name = index.find(prim)
            if name is None:
                name = fresh_name(funcs, prim.name)
                prim = prim.update(name=name)
                funcs[name] = prim
                index.add(name, prim)
            out.append(Binding(b.var, CallTIR(name, args, b.var.type)))
        return rebuild(func, out)

"""FuseTIR: merge each primitive graph function (a FuseOps group) into one PrimFunc.

Before: ``CallFunc`` bindings to graph functions with ``attrs["primitive"]`` whose bindings
are ``call_tir``s. After: each such call is a ``call_tir`` of one PrimFunc with the group's
name; the group's parameters and result become the PrimFunc's buffers, the results of inner
calls become buffers allocated in its root block, and block names are made unique. The
primitive graph functions are removed (DCE removes PrimFuncs no longer called).
"""

from __future__ import annotations

from typing import Any

from ...ir import (
    Block,
    Buffer,
    Expr,
    IRModule,
    Mutator,
    PrimFunc,
    Stmt,
    Var,
    block_realize,
    seq,
)
from ..ir import Binding, CallFunc, CallTIR, Function, TensorVar, graph_functions, rebuild
from ..op import GraphError
from .annotate_op_pattern import op_pattern_of
from .base import ModulePass
from .names import detach_shape_vars


class _Rewrite(Mutator):
    """Replace parameter buffers and shape variables of one member PrimFunc."""

    def __init__(self, bmap: dict[int, Buffer], vmap: dict[int, Expr], taken: set[str]) -> None:
        super().__init__()
        self.bmap = bmap
        self.vmap = vmap
        self.taken = taken

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        """Parameter buffers map to the fused function's; others get shapes rewritten."""
        mapped = self.bmap.get(id(buf))
        if mapped is None:
            mapped = self.bmap[id(buf)] = self.generic_visit(buf)
        return mapped

    def visit_Var(self, var: Var) -> Expr:  # noqa: N802
        """Shape variables map to the fused function's extents."""
        return self.vmap.get(id(var), var)

    def visit_Block(self, block: Block) -> Block:  # noqa: N802
        """Rename a block whose name another member already uses."""
        new = self.generic_visit(block)
        name, n = block.name, 1
        while name in self.taken:
            name = f"{block.name}_{n}"
            n += 1
        self.taken.add(name)
        return new.update(name=name)  # type: ignore[no-any-return]


def _buffer_of(var: TensorVar) -> Buffer:
    return Buffer(var.name, var.type.shape, var.type.dtype)


def _root(func: PrimFunc) -> tuple[Stmt, tuple[Buffer, ...]]:
    body = func.body
    block = getattr(body, "block", None)
    if isinstance(block, Block) and block.name == "root" and not block.iter_vars:
        return block.body, block.alloc_buffers
    return body, ()


def fuse_group(group: Function, funcs: dict[str, Any]) -> PrimFunc:
    """One PrimFunc computing the primitive graph function ``group``."""
    bufs: dict[int, Buffer] = {id(p): _buffer_of(p) for p in group.params}
    allocs: list[Buffer] = []
    stmts: list[Stmt] = []
    taken: set[str] = {"root"}
    for b in group.bindings:
        call = b.value
        callee = funcs.get(call.func) if isinstance(call, CallTIR) else None
        if not isinstance(callee, PrimFunc):
            raise GraphError(f"FuseTIR: {group.name} binds {b.var.name} to something other "
                             "than a call_tir of a PrimFunc")
        bufs[id(b.var)] = out = _buffer_of(b.var)
        if b.var is not group.ret:
            allocs.append(out)
        actual = [bufs[id(a)] for a in call.args] + [out]
        if len(callee.params) != len(actual) or not all(isinstance(p, Buffer)
                                                        for p in callee.params):
            raise GraphError(f"FuseTIR: {callee.name} takes {len(callee.params)} parameters, "
                             f"the call passes {len(actual)} buffers")
        bmap: dict[int, Buffer] = {}
        vmap: dict[int, Expr] = {}
        for p, a in zip(callee.params, actual, strict=False):
            assert isinstance(p, Buffer)
            bmap[id(p)] = a
            for dp, da in zip(p.shape, a.shape, strict=False):
                if isinstance(dp, Var) and id(dp) not in vmap:
                    vmap[id(dp)] = da
        rw = _Rewrite(bmap, vmap, taken)
        body, inner = _root(callee)
        stmts.append(rw.visit(body))
        allocs.extend(rw.visit(x) for x in inner)
    root = Block("root", (), (), (), seq(*stmts), alloc_buffers=tuple(allocs))
    pattern = max(op_pattern_of(funcs[b.value.func]) for b in group.bindings)  # type: ignore[union-attr]
    params = [bufs[id(p)] for p in group.params] + [bufs[id(group.ret)]]
    func = PrimFunc(tuple(params), block_realize(root), {"op_pattern": int(pattern)}, group.name)
    return detach_shape_vars(func)


class FuseTIR(ModulePass):
    """Replace calls of primitive graph functions by call_tir of merged PrimFuncs."""

    name = "FuseTIR"

    def transform(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        funcs = dict(mod.functions)
        prims = {n: f for n, f in graph_functions(mod) if f.attrs.get("primitive")}
        for name, group in prims.items():
            del funcs[name]
            funcs[name] = fuse_group(group, funcs)
        for gname, func in graph_functions(mod):
            if gname in prims:
                continue
            out = []
            for b in func.bindings:
                v = b.value
                if isinstance(v, CallFunc) and v.func in prims:
                    b = Binding(b.var, CallTIR(v.func, v.args, b.var.type))
                out.append(b)
            funcs[gname] = rebuild(func, out)
        return IRModule(funcs, mod.attrs)

"""FuseTIR: merge each primitive graph function (a FuseOps group) into one PrimFunc.

Before: ``CallFunc`` bindings to graph functions with ``attrs["primitive"]`` whose bindings
are ``call_tir``s. After: each such call is a ``call_tir`` of one PrimFunc with the group's
name; the group's parameters and result become the PrimFunc's buffers, the results of inner
calls become buffers allocated in its root block, and block and buffer names are made unique.
A fused PrimFunc structurally equal to one already in the module is not added: its calls use
the existing one (the decoder's two ``reshape`` + ``rotary_embedding`` groups share one). The
primitive graph functions are removed (DCE removes PrimFuncs no longer called).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...ir import (
    Attrs,
    BaseFunc,
    Block,
    BlockRealize,
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
from ...ir.transform import ModulePass
from ..ir import Binding, CallFunc, CallTIR, Function, TensorVar, graph_functions, rebuild
from ..op import GraphError
from .annotate_op_pattern import OpPattern, op_pattern_of
from .names import PrimFuncIndex, detach_shape_vars, fresh_name, unbound_extents, with_extents


def _buffer_of(var: TensorVar, extents: Mapping[str, Var]) -> Buffer:
    return Buffer(var.name, with_extents(var.type, extents), var.type.dtype)


class _Rewrite(Mutator):
    """Map one member PrimFunc into the fused function.

    Parameter buffers become the fused function's buffers, shape variables its extents;
    blocks and the member's own intermediate buffers are renamed where an earlier member
    already uses the name (``T_add`` -> ``T_add_1``), so names stay unique in the result.
    """

    def __init__(
        self, bmap: dict[int, Buffer], vmap: dict[int, Expr], blocks: set[str], buffers: set[str]
    ) -> None:
        super().__init__()
        self.buffer_map.update(bmap)
        self.vmap = vmap
        self.blocks = blocks
        self.buffers = buffers

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        """Mapped parameter buffers as given; others with shapes rewritten and a free name."""
        mapped = self.buffer_map.get(id(buf))
        if mapped is None:
            new = super().visit_Buffer(buf)
            mapped = self.buffer_map[id(buf)] = new.update(name=_unique(buf.name, self.buffers))
        return mapped

    def visit_Var(self, var: Var) -> Expr:  # noqa: N802
        """Shape variables map to the fused function's extents."""
        return self.vmap.get(id(var), var)

    def visit_Block(self, block: Block) -> Block:  # noqa: N802
        """Rename a block whose name another member already uses."""
        new: Block = self.generic_visit(block)
        return new.update(name=_unique(block.name, self.blocks))


def _unique(name: str, taken: set[str]) -> str:
    """A name not in ``taken`` (``name``, ``name_1``, ...), recorded as taken."""
    out = fresh_name(taken, name, "_")
    taken.add(out)
    return out


def _root(func: PrimFunc) -> tuple[Stmt, tuple[Buffer, ...]]:
    body = func.body
    if isinstance(body, BlockRealize) and body.block.name == "root" and not body.block.iter_vars:
        return body.block.body, body.block.alloc_buffers
    return body, ()


def _member_call(
    group: Function, b: Binding, funcs: Mapping[str, BaseFunc]
) -> tuple[CallTIR, PrimFunc]:
    call = b.value
    callee = funcs.get(call.func) if isinstance(call, CallTIR) else None
    if not isinstance(call, CallTIR) or not isinstance(callee, PrimFunc):
        raise GraphError(
            f"FuseTIR: {group.name} binds {b.var.name} to something other "
            "than a call_tir of a PrimFunc"
        )
    return call, callee


def _bind_params(
    callee: PrimFunc, actual: list[Buffer]
) -> tuple[dict[int, Buffer], dict[int, Expr]]:
    """Parameter buffer -> actual buffer, parameter shape variable -> actual extent."""
    if len(callee.params) != len(actual):
        raise GraphError(
            f"FuseTIR: {callee.name} takes {len(callee.params)} parameters, "
            f"the call passes {len(actual)} buffers"
        )
    bmap: dict[int, Buffer] = {}
    vmap: dict[int, Expr] = {}
    for p, a in zip(callee.params, actual, strict=True):
        if not isinstance(p, Buffer):
            raise GraphError(f"FuseTIR: {callee.name} has scalar parameter {p.name}")
        bmap[id(p)] = a
        for dp, da in zip(p.shape, a.shape, strict=True):
            if isinstance(dp, Var) and id(dp) not in vmap:
                vmap[id(dp)] = da
    return bmap, vmap


def fuse_group(group: Function, funcs: Mapping[str, BaseFunc]) -> PrimFunc:
    """One PrimFunc computing the primitive graph function ``group``."""
    extents = unbound_extents([*group.params, *group.rets])  # e.g. only s + 1, never s
    bufs: dict[int, Buffer] = {id(p): _buffer_of(p, extents) for p in group.params}
    allocs: list[Buffer] = []
    stmts: list[Stmt] = []
    blocks: set[str] = {"root"}
    names: set[str] = {b.name for b in bufs.values()}
    pattern = OpPattern.ELEMWISE
    for b in group.bindings:
        call, callee = _member_call(group, b, funcs)
        pattern = max(pattern, op_pattern_of(callee))
        out = bufs[id(b.var)] = _buffer_of(b.var, extents).update(name=_unique(b.var.name, names))
        if b.var is not group.ret:
            allocs.append(out)
        bmap, vmap = _bind_params(callee, [bufs[id(a)] for a in call.args] + [out])
        rw = _Rewrite(bmap, vmap, blocks, names)
        body, inner = _root(callee)
        stmts.append(rw.visit(body))
        allocs.extend(rw.visit(x) for x in inner)
    root = Block("root", (), (), (), seq(*stmts), alloc_buffers=tuple(allocs))
    params = [bufs[id(p)] for p in group.params] + [bufs[id(group.ret)]]
    func = PrimFunc(
        tuple(params), block_realize(root), Attrs({"op_pattern": int(pattern)}), group.name
    )
    return detach_shape_vars(func)


class FuseTIR(ModulePass):
    """Replace calls of primitive graph functions by call_tir of merged PrimFuncs."""

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        funcs = dict(mod.functions)
        index = PrimFuncIndex(funcs)
        renamed: dict[str, str] = {}
        for name, group in graph_functions(mod):
            if not group.attrs.get("primitive"):
                continue
            del funcs[name]
            fused = fuse_group(group, funcs)
            twin = index.find(fused)
            if twin is not None:
                renamed[name] = twin
                continue
            funcs[name] = fused
            index.add(name, fused)
            renamed[name] = name
        for gname, func in graph_functions(mod):
            if gname in renamed:
                continue
            out = []
            for b in func.bindings:
                v = b.value
                if isinstance(v, CallFunc) and v.func in renamed:
                    b = Binding(b.var, CallTIR(renamed[v.func], v.args, b.var.type))
                out.append(b)
            funcs[gname] = rebuild(func, out)
        return IRModule(funcs, mod.attrs)

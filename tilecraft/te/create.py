"""``create_prim_func``: turn a graph of te tensors into a PrimFunc with one block per stage.

The result's body is a BlockRealize of a ``"root"`` block (no iterators) whose
``alloc_buffers`` hold the intermediate stages; under it, in topological order, one loop nest
per compute stage ending in a block named after the stage::

    for i, j, k in grid(M, N, K):
        with block("C"):
            vi, vj, vk = spatial(M, i), spatial(N, j), reduce(K, k)
            reads(A[vi, vk], B[vk, vj], C[vi, vj]); writes(C[vi, vj])
            with init(): C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

Reads list the regions of the stage's sources in order of first access, then, for
reductions, the output itself. Symbolic extents are bound from the buffer parameters' shapes;
a variable that is not directly some parameter's extent (it occurs only inside a compound
extent such as ``n * 2``, or only in a compute body) becomes a trailing scalar ``int``
parameter, in order of first appearance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import TilecraftError
from ..ir import (
    Attrs,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    For,
    ForKind,
    IterKind,
    IterVar,
    LetStmt,
    Node,
    PrimFunc,
    Range,
    Stmt,
    Var,
    as_expr,
    collect_vars,
    post_order_visit,
    seq,
)
from ..ir import op as irop
from ..ir.visitor import node_fields
from ._region import access_regions
from .reduce import Reduce, ReduceAxis
from .tensor import ComputeOp, PlaceholderOp, Tensor


def _topo_ops(outputs: Sequence[Tensor]) -> list[PlaceholderOp | ComputeOp]:
    """Operations reachable from ``outputs``, producers before consumers (post-order DFS)."""
    order: list[PlaceholderOp | ComputeOp] = []
    state: dict[int, int] = {}  # 1: visiting, 2: done
    for root in outputs:
        stack: list[tuple[PlaceholderOp | ComputeOp, int]] = [(root.op, 0)]
        while stack:
            op, pos = stack.pop()
            if pos == 0 and state.get(id(op)) == 2:
                continue
            state[id(op)] = 1
            inputs = op.input_tensors
            if pos < len(inputs):
                stack.append((op, pos + 1))
                child = inputs[pos].op
                if state.get(id(child)) == 1:
                    raise TilecraftError(f"create_prim_func: cycle through stage {child.name!r}")
                if state.get(id(child)) != 2:
                    stack.append((child, 0))
            else:
                state[id(op)] = 2
                order.append(op)
    return order


def _unique(name: str, taken: set[str]) -> str:
    out, n = name, 0
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    taken.add(out)
    return out


class _Rename:
    """Replace buffers by renamed copies and, per stage, axis variables by block iterators.

    The rewrite keeps its own stack instead of recursing, so compute bodies of any depth (a
    sum of hundreds of terms) are renamed without hitting Python's recursion limit.
    """

    def __init__(self, buffers: dict[int, Buffer]) -> None:
        self.buffer_map: dict[int, Buffer] = dict(buffers)
        self.vmap: dict[int, Expr] = {}

    def visit(self, root: Any) -> Any:
        """``root`` with buffers and variables replaced; unchanged subtrees are kept."""
        done: dict[int, Any] = {}
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in done:
                continue
            if isinstance(node, Var):  # reduce axes are Vars of a te subclass
                done[id(node)] = self.vmap.get(id(node), node)
                continue
            if isinstance(node, Buffer) and id(node) in self.buffer_map:
                done[id(node)] = self.buffer_map[id(node)]
                continue
            kids = [k for k in _child_nodes(node) if id(k) not in done]
            if not expanded and kids:
                stack.append((node, True))
                stack.extend((k, False) for k in kids)
                continue
            done[id(node)] = new = _rebuilt(node, done)
            if isinstance(node, Buffer):
                assert isinstance(new, Buffer)
                self.buffer_map[id(node)] = new
        return done[id(root)]


def _child_nodes(node: Node) -> list[Node]:
    """Nodes held by ``node``'s fields (directly or in tuples)."""
    out: list[Node] = []
    for name in node_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple) and not isinstance(value, Attrs):
            out.extend(v for v in value if isinstance(v, Node))
    return out


def _rebuilt(node: Node, done: dict[int, Any]) -> Node:
    """``node`` with every child replaced by its entry in ``done``."""
    changes: dict[str, Any] = {}
    for name in node_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            new = done[id(value)]
            if new is not value:
                changes[name] = new
        elif isinstance(value, tuple) and value and not isinstance(value, Attrs):
            items = tuple(done[id(v)] if isinstance(v, Node) else v for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[name] = items
    return node.update(**changes) if changes else node


def _rename_buffers(
    ops: list[PlaceholderOp | ComputeOp], params: list[Buffer]
) -> dict[int, Buffer]:
    """Map each buffer to a copy with a name unique in the function (params keep theirs first)."""
    taken: set[str] = set()
    mapping: dict[int, Buffer] = {}
    all_bufs = [*params]
    for op in ops:
        for b in (op.buffer,) if isinstance(op, PlaceholderOp) else op.buffers:
            if all(b is not x for x in all_bufs):
                all_bufs.append(b)
    for b in all_bufs:
        name = _unique(b.name, taken)
        mapping[id(b)] = b if name == b.name else b.update(name=name)
    return mapping


def _loop_names(op: ComputeOp) -> list[str]:
    taken: set[str] = set()
    return [_unique(v.name, taken) for v in (*op.axes, *op.reduce_axes)]


def _stage(op: ComputeOp, rename: _Rename, block_name: str) -> Stmt:
    """The loop nest and block computing one stage."""
    raxes: tuple[ReduceAxis, ...] = op.reduce_axes
    names = _loop_names(op)
    outs = [rename.visit(b) for b in op.buffers]
    doms = [Range(as_expr(0, s.dtype), s) for s in outs[0].shape]
    doms += [a.dom for a in raxes if a.dom is not None]
    doms = [rename.visit(d) for d in doms]
    loops = [Var(n, d.extent.dtype) for n, d in zip(names, doms, strict=True)]
    ivars = [Var(f"v{n}", d.extent.dtype) for n, d in zip(names, doms, strict=True)]
    kinds = [IterKind.SPATIAL] * len(op.axes) + [IterKind.REDUCE] * len(raxes)
    rename.vmap = {id(a): v for a, v in zip((*op.axes, *raxes), ivars, strict=True)}
    idx = tuple(ivars[: len(op.axes)])

    def fix(e: Expr) -> Expr:
        return rename.visit(e)  # type: ignore[no-any-return]

    init: Stmt | None = None
    if op.is_reduction:
        red = op.body[0]
        assert isinstance(red, Reduce)
        srcs = [fix(s) for s in red.source]
        cond = None if red.condition is None else fix(red.condition)
        reads = access_regions([*srcs, *([cond] if cond is not None else [])])
        reads += [BufferRegion.point(b, idx) for b in outs]
        comb = red.combiner
        if cond is not None:
            srcs = [irop.select(cond, s, i) for s, i in zip(srcs, comb.identity, strict=True)]
        new = comb.combine([BufferLoad(b, idx) for b in outs], srcs)
        init = seq(*(BufferStore(b, i, idx) for b, i in zip(outs, comb.identity, strict=True)))
        body = _store_all(outs, new, idx)
    else:
        values = [fix(v) for v in op.body if isinstance(v, Expr)]
        reads = access_regions(values)
        stores = [BufferStore(b, v, idx) for b, v in zip(outs, values, strict=True)]
        body = seq(*stores)
    block = Block(
        name=block_name,
        iter_vars=tuple(IterVar(v, d, k) for v, d, k in zip(ivars, doms, kinds, strict=True)),
        reads=tuple(reads),
        writes=tuple(BufferRegion.point(b, idx) for b in outs),
        body=body,
        init=init,
        annotations=op.attrs,
    )
    stmt: Stmt = BlockRealize(tuple(loops), as_expr(True), block)
    for lv, d in reversed(list(zip(loops, doms, strict=True))):
        stmt = For(lv, d.min, d.extent, ForKind.SERIAL, stmt)
    return stmt


def _store_all(outs: list[Buffer], values: tuple[Expr, ...], idx: tuple[Var, ...]) -> Stmt:
    """Store every value; several values are bound first so each sees the old state."""
    if len(outs) == 1:
        return BufferStore(outs[0], values[0], idx)
    temps = [Var(f"{b.name}_new", b.dtype) for b in outs]
    body: Stmt = seq(*(BufferStore(b, t, idx) for b, t in zip(outs, temps, strict=True)))
    for t, v in reversed(list(zip(temps, values, strict=True))):
        body = LetStmt(t, v, body)
    return body


def create_prim_func(tensors: Sequence[Tensor], name: str = "main") -> PrimFunc:
    """Build a PrimFunc computing ``tensors``.

    Parameters
    ----------
    tensors
        The function's buffer parameters in order: the inputs (placeholders) and the outputs.
        Every placeholder reachable from the outputs must be listed. Compute stages that are
        not listed become intermediate buffers allocated in the root block.
    name
        The function's name.

    Returns
    -------
    PrimFunc
        Body: a root block holding one loop nest and block per compute stage, in topological
        order. Symbolic extents not directly bound by a parameter's shape become trailing
        scalar parameters.
    """
    tensors = list(tensors)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TilecraftError(f"create_prim_func: expected te Tensors, got {type(t).__name__}")
    listed = [t.buffer for t in tensors]
    if len({id(b) for b in listed}) != len(listed):
        raise TilecraftError("create_prim_func: a tensor is listed twice")
    ops = _topo_ops(tensors)
    for op in ops:
        if isinstance(op, PlaceholderOp) and all(op.buffer is not b for b in listed):
            raise TilecraftError(
                f"create_prim_func: placeholder {op.name!r} is used but not among the arguments"
            )
    rename = _Rename(_rename_buffers(ops, listed))
    taken: set[str] = set()
    computes = [op for op in ops if isinstance(op, ComputeOp)]
    stages = [_stage(op, rename, _unique(op.name, taken)) for op in computes]
    if not stages:
        raise TilecraftError("create_prim_func: no compute stage among the tensors")
    params = [rename.visit(b) for b in listed]
    allocs = [
        rename.visit(b)
        for op in ops
        if isinstance(op, ComputeOp)
        for b in op.buffers
        if all(b is not x for x in listed)
    ]
    root = Block("root", (), (), (), seq(*stages), alloc_buffers=tuple(allocs))
    body = BlockRealize((), as_expr(True), root)
    return PrimFunc((*params, *_scalar_params(params, body)), body, name=name)


def _scalar_params(params: list[Buffer], body: Stmt) -> list[Var]:
    """Free variables that no parameter's shape binds directly, in order of appearance."""
    bound = {id(v) for b in params for v in b.shape_vars()}
    declared: set[int] = set()
    free: list[Var] = []

    def scan(node: Stmt | Buffer) -> None:
        for v in collect_vars(node):
            if id(v) not in bound and id(v) not in declared and all(v is not f for f in free):
                free.append(v)

    for b in params:
        scan(b)

    # variables bound inside the body (loops, block iterators, lets) are not free
    def decl(n: object) -> None:
        if isinstance(n, For):
            declared.add(id(n.loop_var))
        elif isinstance(n, (IterVar, LetStmt)):
            declared.add(id(n.var))

    post_order_visit(body, decl)
    scan(body)
    return free

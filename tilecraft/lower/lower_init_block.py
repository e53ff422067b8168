"""Lower block ``init`` statements into guarded statements of the block body.

Before: blocks may carry ``init`` (run before the first reduction step).
After:  no block has ``init``; a block whose reduce iterators are ``vk1..vkn`` has the body
``if vk1 == min1 and ... and vkn == minn: init`` followed by the old body. The condition is
written on the block's iterators, so it becomes a condition on their bound values once blocks
are lowered to loops. A block with an init but no reduce iterator runs its init unconditionally.

An empty reduction (a reduce extent of 0, possible when it is symbolic) never runs the block,
so the guarded init would never run and the output would keep whatever memory held; numpy
gives the init value (``sum`` of nothing is 0). For such a block — reduce extents not provably
positive, written only over function-level variables, not under a thread binding — a separate
init nest over the block's spatial domain runs first, only when some reduce extent is 0::

    if k <= 0:                                # the reduction is empty
        for i in range(n): C_empty_init: C[i] = 0.0
    for i, r in T.grid(n, k): C: (if r == 0: C[i] = 0.0); C[i] += A[i, r]
"""

from __future__ import annotations

from ..ir import (
    Block,
    BlockRealize,
    Expr,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IterKind,
    IterVar,
    Mutator,
    Or,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    collect_vars,
    const,
    post_order_visit,
    seq,
    substitute,
)
from ..ir.transform import FunctionPass


def _init_condition(block: Block) -> Expr | None:
    cond: Expr | None = None
    for iv in block.iter_vars:
        if iv.kind is IterKind.REDUCE:
            term = iv.var.eq(iv.dom.min)
            cond = term if cond is None else cond & term
    return cond


def _function_vars(func: PrimFunc) -> set[int]:
    """Ids of the variables defined for the whole function: scalar params and shape vars."""
    ids = {id(p) for p in func.params if isinstance(p, Var)}
    for buf in func.buffer_params:
        for dim in buf.shape:
            ids.update(id(v) for v in collect_vars(dim))
    return ids


class _InitLowerer(Mutator):
    def __init__(self, func: PrimFunc) -> None:
        super().__init__()
        self.outer = _function_vars(func)
        self.names: set[str] = set()
        post_order_visit(
            func.body, lambda n: self.names.add(n.name) if isinstance(n, Block) else None
        )
        self.thread_depth = 0
        self.scopes: list[list[tuple[Block, Stmt]]] = []  # per open block: (lowered B, nest)

    def _note_name(self, node: object) -> None:
        if isinstance(node, Block):
            self.names.add(node.name)

    def visit_For(self, loop: For) -> For:  # noqa: N802
        bound = loop.kind is ForKind.THREAD_BINDING
        self.thread_depth += bound
        out: For = self.generic_visit(loop)
        self.thread_depth -= bound
        return out

    def visit_Block(self, block: Block) -> Block:  # noqa: N802
        self.scopes.append([])
        block = self.generic_visit(block)
        pending = self.scopes.pop()
        if pending:
            block = block.update(body=_insert_before_users(block.body, pending))
        if block.init is None:
            return block
        cond = _init_condition(block)
        lowered = block.update(
            body=seq(block.init if cond is None else IfThenElse(cond, block.init), block.body),
            init=None,
        )
        nest = self._empty_reduction_init(block) if self.scopes else None
        if nest is not None:
            self.scopes[-1].append((lowered, nest))
        return lowered

    def _empty_reduction_init(self, block: Block) -> Stmt | None:
        """The guarded init nest for ``block`` (module docstring), or None when not needed."""
        assert block.init is not None
        reduce = [iv for iv in block.iter_vars if iv.kind is IterKind.REDUCE]
        spatial = [iv for iv in block.iter_vars if iv.kind is IterKind.SPATIAL]
        if self.thread_depth or not reduce or len(spatial) + len(reduce) != len(block.iter_vars):
            return None
        if all(isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value > 0 for iv in reduce):
            return None
        fresh = {iv.var: Var(f"{iv.var.name}_e", iv.var.dtype) for iv in spatial}
        writes = tuple(substitute(region, fresh) for region in block.writes)
        init = substitute(block.init, fresh)
        used = {id(v) for v in collect_vars(init)}
        for region in writes:
            used.update(id(v) for r in region.region for v in collect_vars(r.min + r.extent))
        allowed = self.outer | {id(v) for v in fresh.values()}
        doms = [iv.dom.min + iv.dom.extent for iv in block.iter_vars]
        if not used <= allowed or not all(
            {id(v) for v in collect_vars(d)} <= self.outer for d in doms
        ):
            return None
        name = _fresh(f"{block.name}_empty_init", self.names)
        ivs = tuple(IterVar(fresh[iv.var], iv.dom, IterKind.SPATIAL) for iv in spatial)
        loops = [Var(f"{iv.var.name}_l", iv.var.dtype) for iv in spatial]
        body: Stmt = BlockRealize(
            tuple(loops), const(True, "bool"), Block(name, ivs, (), writes, init)
        )
        for iv, lv in reversed(list(zip(spatial, loops, strict=True))):
            body = For(lv, iv.dom.min, iv.dom.extent, ForKind.SERIAL, body)
        empty: Expr | None = None
        for iv in reduce:
            term = iv.dom.extent <= 0
            empty = term if empty is None else Or(empty, term)
        assert empty is not None
        return IfThenElse(empty, body)


def _fresh(base: str, names: set[str]) -> str:
    name, k = base, 1
    while name in names:
        name, k = f"{base}_{k}", k + 1
    names.add(name)
    return name


def _insert_before_users(body: Stmt, pending: list[tuple[Block, Stmt]]) -> Stmt:
    """``body`` with each init nest placed right before the top-level statement holding its
    block."""
    items = list(body.stmts) if isinstance(body, SeqStmt) else [body]
    out: list[Stmt] = []
    for item in items:
        found = {id(b) for b in _blocks_in(item)}
        out.extend(nest for blk, nest in pending if id(blk) in found)
        out.append(item)
    return seq(*out)


def _blocks_in(stmt: Stmt) -> list[Block]:
    found: list[Block] = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, Block) else None)
    return found


class LowerInitBlock(FunctionPass):
    """Move every block's ``init`` into its body under a "first reduction step" guard."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Lower the inits of ``func``'s blocks."""
        return func.update(body=_InitLowerer(func).visit(func.body))

"""Block descriptions of a schedule's function: :func:`normalize_prim_func`.

Every rule and every search-space generator starts here: ``infos = normalize_prim_func(sch)``
lists the blocks directly under the root block, in program order, each with its iterators and
the handles of the loops binding them, so a rule can ask questions (``info.dom_kind()``,
``info.is_reduction()``, :func:`~tilecraft.schedule.analysis.classify_einsum`...) and then act
on the handles.

*Normalized* means: every statement under the root block is a loop or a block (no bare store,
``if`` or ``let`` outside blocks), no block has a predicate, and the loops above each block
correspond one-to-one to its iterators: each iterator, with a domain starting at 0, is bound
to exactly the variable of one loop above the block, that loop starts at 0 and has the same
extent, and every loop above the block binds one iterator. Functions made by
``te.create_prim_func``, the graph pipeline (``Legalize``/``FuseTIR``) and ordinary script are
normalized; a function after ``split``/``fuse``/``compute_at`` usually is not.

Normalization never changes the function. It reads ``sch.func`` and then, only when it
succeeds, takes the handles with the traced queries ``get_block`` (the root),
``get_child_blocks`` and ``get_loops``, so the returned handles replay with the trace. The
alternative (fusing/splitting loops until each binds one iterator) would put loop rewrites in
the trace of every rule that merely looks at a function and then declines, and in every tuning
candidate; rules that want a different loop structure make it themselves, from these handles.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import (
    Block,
    BlockRealize,
    BufferRegion,
    Expr,
    For,
    IntImm,
    IterKind,
    IterVar,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    structural_equal,
)
from ..schedule import Schedule
from ..state import BlockRV, LoopRV
from ._util import expect
from .op_pattern import OpPattern, block_op_pattern

_KIND_LETTER = {IterKind.SPATIAL: "S", IterKind.REDUCE: "R", IterKind.OPAQUE: "O"}


@dataclass(frozen=True, slots=True, eq=False)
class IterInfo:
    """One block iterator of a normalized block and the loop binding it.

    Attributes
    ----------
    kind
        Spatial, reduce or opaque.
    var
        The block iterator's variable (``vi``).
    dom
        Its extent: an ``int`` when constant, else the symbolic expression.
    loop_rv
        The handle of the loop that binds it.
    binding
        The expression it is bound to: the loop's variable in a normalized block.
    """

    kind: IterKind
    var: Var
    dom: int | Expr
    loop_rv: LoopRV
    binding: Expr

    @property
    def is_spatial(self) -> bool:
        """Whether the iterator is spatial."""
        return self.kind is IterKind.SPATIAL

    @property
    def is_reduce(self) -> bool:
        """Whether the iterator is a reduction iterator."""
        return self.kind is IterKind.REDUCE

    @property
    def is_unit(self) -> bool:
        """Whether the extent is the constant 1."""
        return isinstance(self.dom, int) and self.dom == 1


@dataclass(frozen=True, slots=True, eq=False)
class BlockInfo:
    """A block directly under the root of a normalized function.

    Attributes
    ----------
    name
        The block's name.
    block_rv
        Its handle.
    iters
        Its iterators in the order of the loops binding them, outermost first (so
        ``[it.loop_rv for it in iters]`` is ``sch.get_loops(block_rv)``).
    block
        The Block node when the analysis ran (a snapshot: analyse again after changing the
        schedule).
    pattern
        The block's operator pattern (:func:`block_op_pattern`).
    is_output
        Whether it writes a buffer that is a parameter of the function.
    """

    name: str
    block_rv: BlockRV
    iters: list[IterInfo]
    block: Block
    pattern: OpPattern
    is_output: bool

    @property
    def reads(self) -> tuple[BufferRegion, ...]:
        """The regions the block reads (its ``T.reads``)."""
        return self.block.reads

    @property
    def writes(self) -> tuple[BufferRegion, ...]:
        """The regions the block writes (its ``T.writes``)."""
        return self.block.writes

    @property
    def loops(self) -> list[LoopRV]:
        """The handles of the loops above the block, outermost first."""
        return [it.loop_rv for it in self.iters]

    def dom(self) -> list[int | Expr]:
        """The iterator extents in loop order."""
        return [it.dom for it in self.iters]

    def dom_kind(self) -> str:
        """The iterator kinds in loop order as letters: ``"SSR"`` for a matmul nest."""
        return "".join(_KIND_LETTER[it.kind] for it in self.iters)

    def iter_info(self, var: Var) -> IterInfo | None:
        """The iterator whose variable is ``var`` (identity), or None."""
        return next((it for it in self.iters if it.var is var), None)

    def is_reduction(self) -> bool:
        """Whether the block has reduction iterators and no opaque one."""
        kinds = {it.kind for it in self.iters}
        return IterKind.REDUCE in kinds and IterKind.OPAQUE not in kinds

    def is_injective(self) -> bool:
        """Whether every iterator is spatial (no reduction, nothing opaque)."""
        return all(it.kind is IterKind.SPATIAL for it in self.iters)

    def is_elementwise(self) -> bool:
        """Whether the block is elementwise: every load at exactly the store's indices."""
        return self.pattern is OpPattern.ELEMWISE

    def is_opaque(self) -> bool:
        """Whether the block's pattern is opaque (its body is not one analysable store)."""
        return self.pattern is OpPattern.OPAQUE


@dataclass(frozen=True, slots=True)
class _Plan:
    """A block that normalizes: its realize, its loops, and (IterVar, loop) in loop order."""

    realize: BlockRealize
    loops: tuple[For, ...]
    pairs: tuple[tuple[IterVar, For], ...]


def _root_of(func: PrimFunc) -> Block | None:
    body = func.body
    if isinstance(body, BlockRealize) and not body.block.iter_vars:
        return body.block
    return None


def _nests(body: Stmt) -> list[tuple[BlockRealize, tuple[For, ...]]] | str:
    """The blocks under ``body`` with the loops above each (iteratively: no deep recursion)."""
    out: list[tuple[BlockRealize, tuple[For, ...]]] = []
    stack: list[tuple[Stmt, tuple[For, ...]]] = [(body, ())]
    while stack:
        stmt, loops = stack.pop()
        if isinstance(stmt, BlockRealize):
            out.append((stmt, loops))
        elif isinstance(stmt, For):
            stack.append((stmt.body, (*loops, stmt)))
        elif isinstance(stmt, SeqStmt):
            stack.extend((s, loops) for s in reversed(stmt.stmts))
        else:
            return f"a statement ({type(stmt).__name__}) under the root lies outside every block"
    return out


def _is_zero(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _plan_block(realize: BlockRealize, loops: tuple[For, ...]) -> _Plan | str:
    """Match a block's iterators one-to-one with its loops, or say why they do not match."""
    block = realize.block
    where = f'block "{block.name}"'
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1):
        return f"{where} has a predicate"
    by_loop = {id(f.loop_var): f for f in loops}
    bound: dict[int, IterVar] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values, strict=True):
        loop = by_loop.get(id(value)) if isinstance(value, Var) else None
        if loop is None:
            return f"{where}: iterator {iv.var.name} is not bound to one loop variable"
        if id(loop.loop_var) in bound:
            return f"{where}: loop {loop.loop_var.name} binds more than one iterator"
        if not (_is_zero(iv.dom.min) and _is_zero(loop.min)):
            return f"{where}: iterator {iv.var.name} or its loop does not start at 0"
        if not structural_equal(iv.dom.extent, loop.extent):
            return f"{where}: loop {loop.loop_var.name} and iterator {iv.var.name} differ in extent"
        bound[id(loop.loop_var)] = iv
    for f in loops:
        if id(f.loop_var) not in bound:
            return f"{where}: loop {f.loop_var.name} binds none of its iterators"
    pairs = tuple((bound[id(f.loop_var)], f) for f in loops)
    return _Plan(realize, loops, pairs)


def _plans(func: PrimFunc) -> list[_Plan] | str:
    root = _root_of(func)
    if root is None:
        return "the function has no root block"
    nests = _nests(root.body)
    if isinstance(nests, str):
        return nests
    plans: list[_Plan] = []
    for realize, loops in nests:
        plan = _plan_block(realize, loops)
        if isinstance(plan, str):
            return plan
        plans.append(plan)
    return plans


def block_of(value: Block | BlockInfo, where: str) -> Block:
    """The Block of ``value``; ScheduleError (naming ``where``) for anything else."""
    expect(where, value, (Block, BlockInfo), "block", "a Block or BlockInfo")
    return value.block if isinstance(value, BlockInfo) else value


def why_not_normalized(sch: Schedule) -> str | None:
    """Why :func:`normalize_prim_func` returns None for ``sch``; None when it succeeds.

    Parameters
    ----------
    sch
        The schedule whose current function is examined (nothing is traced).

    Returns
    -------
    str or None
        The first reason found, naming the block and loop or iterator.
    """
    expect("why_not_normalized", sch, Schedule, "sch", "a Schedule")
    plans = _plans(sch.func)
    return plans if isinstance(plans, str) else None


def normalize_prim_func(sch: Schedule) -> list[BlockInfo] | None:
    """Describe the blocks under the root of ``sch``'s function, in program order.

    Parameters
    ----------
    sch
        The schedule. Its function is not changed; on success the trace gains the queries
        ``get_block`` (root), ``get_child_blocks`` and one ``get_loops`` per block.

    Returns
    -------
    list of BlockInfo or None
        None, with the trace untouched, exactly when the function is not normalized (see the
        module docstring): a statement other than loops and blocks under the root block (a
        bare store, ``if``, ``let``); a block with a predicate; an iterator not bound to
        exactly one loop variable (bound to an expression such as ``i0 * 32 + i1`` or to a
        constant), or whose domain or loop does not start at 0, or whose loop has another
        extent; a loop bound to several iterators of a block, or to none.
        :func:`why_not_normalized` gives the reason.

    Raises
    ------
    ScheduleError
        When ``sch`` is not a Schedule.
    """
    expect("normalize_prim_func", sch, Schedule, "sch", "a Schedule")
    func = sch.func
    plans = _plans(func)
    if isinstance(plans, str):
        return None
    root = _root_of(func)
    assert root is not None  # _plans checked it
    block_rvs = sch.get_child_blocks(sch.get_block(root.name))
    params = {id(b) for b in func.buffer_params}
    infos: list[BlockInfo] = []
    for rv, plan in zip(block_rvs, plans, strict=True):
        block = plan.realize.block
        assert rv.name == block.name
        loop_rvs = sch.get_loops(rv)
        assert [lrv.var for lrv in loop_rvs] == [f.loop_var for f in plan.loops]
        iters = [
            IterInfo(iv.kind, iv.var, _extent(iv.dom.extent), loop_rv, loop.loop_var)
            for (iv, loop), loop_rv in zip(plan.pairs, loop_rvs, strict=True)
        ]
        writes_param = any(id(w.buffer) in params for w in block.writes)
        infos.append(BlockInfo(block.name, rv, iters, block, block_op_pattern(block), writes_param))
    return infos


def _extent(e: Expr) -> int | Expr:
    return e.value if isinstance(e, IntImm) else e

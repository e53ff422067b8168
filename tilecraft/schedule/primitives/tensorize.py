"""``tensorize``: replace a block that computes a tensor intrinsic's description by the
intrinsic's implementation.

:func:`build_tensorize` is pure: it matches the block's body against the description
(:mod:`._tensorize_match`), then rebuilds the block with the implementation's body, whose
buffers become the block's buffers shifted to the matched tiles. The block keeps its name,
iterators, bindings and ``reads``/``writes``, loses its inner loops, and is annotated
``tc.tensor_intrin = <name>``. :func:`tensorize` is the traced primitive; given a loop it
blockizes it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from ...arith import Analyzer
from ...errors import ScheduleError
from ...ir import (
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    LetStmt,
    Mutator,
    PrimFunc,
    Stmt,
    Var,
    post_order_visit,
    substitute,
)
from ...ir.node import Node
from .. import _tree
from ..arguments import Check, RejectedError
from ..instruction import primitive
from ..state import BlockRV, LoopRV, ScheduleState
from ..tensor_intrin import TensorIntrin, get_tensor_intrin, list_tensor_intrins
from ._blockutil import fragment, get_block
from ._tensorize_match import BufferBinding, MismatchError, match_description
from .blockize import blockize

PRIM = "tensorize"
INTRIN_ATTR = "tc.tensor_intrin"
"""Block annotation naming the intrinsic a block was tensorized with."""


class IntrinName(Check):
    """The name of a registered tensor intrinsic."""

    noun = "name of a registered tensor intrinsic"

    def __call__(self, value: object) -> object:
        if not isinstance(value, str) or value not in list_tensor_intrins():
            raise RejectedError(f"registered: {list_tensor_intrins()}")
        return value


class _Instantiate(Mutator):
    """The implementation body on the block's buffers, at the matched tiles."""

    def __init__(self, bindings: Mapping[int, BufferBinding]) -> None:
        super().__init__()
        self.bindings = bindings
        self.ana = Analyzer()

    def _indices(self, b: BufferBinding, idx: tuple[Expr, ...]) -> tuple[Expr, ...]:
        lead = len(b.offset) - len(idx)
        shifted = [o + self.visit(i) for o, i in zip(b.offset[lead:], idx, strict=True)]
        return (*b.offset[:lead], *(self.ana.simplify(e) for e in shifted))

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:  # noqa: N802
        b = self.bindings.get(id(node.buffer))
        if b is None:
            return self.generic_visit(node)  # type: ignore[no-any-return]
        return BufferLoad(b.actual, self._indices(b, node.indices))

    def visit_BufferStore(self, node: BufferStore) -> Stmt:  # noqa: N802
        b = self.bindings.get(id(node.buffer))
        if b is None:
            return self.generic_visit(node)  # type: ignore[no-any-return]
        return BufferStore(b.actual, self.visit(node.value), self._indices(b, node.indices))


def _fresh_defs(body: Stmt) -> Stmt:
    """``body`` with fresh loop and let variables (the impl is instantiated many times)."""
    defined: list[Var] = []

    def fn(n: Node) -> None:
        if isinstance(n, For):
            defined.append(n.loop_var)
        elif isinstance(n, LetStmt):
            defined.append(n.var)

    post_order_visit(body, fn)
    out: Stmt = substitute(body, {v: Var(v.name, v.dtype) for v in defined})
    return out


def _impl_body(intrin: TensorIntrin, by_desc: Mapping[int, BufferBinding]) -> Stmt:
    """The impl's root body rewritten onto the bound buffers (impl params pair with desc's)."""
    by_impl: dict[int, BufferBinding] = {}
    for d, i in zip(intrin.desc.params, intrin.impl.params, strict=True):
        assert isinstance(d, Buffer)
        assert isinstance(i, Buffer)
        by_impl[id(i)] = by_desc[id(d)]
    root = _tree.root_block(intrin.impl)
    assert root is not None
    out: Stmt = _Instantiate(by_impl).visit(_fresh_defs(root.block.body))
    return out


def build_tensorize(func: PrimFunc, block: str, intrin: TensorIntrin) -> PrimFunc:
    """Tensorize block ``block`` with ``intrin`` (see the module docstring)."""
    realize, _ = get_block(func, block, PRIM)
    blk = realize.block
    desc_root = _tree.root_block(intrin.desc)
    assert desc_root is not None
    if blk.init is not None:
        raise ScheduleError(
            PRIM,
            f'block "{block}" has an init; intrinsic "{intrin.name}" computes no init',
            requires="the block has no init (the intrinsic's description has none)",
            fragment=fragment(realize, {id(realize): "<- block"}),
            hint="decompose_reduction first, then tensorize the init block separately",
            locations=[block],
        )
    try:
        bindings = match_description(desc_root.block, blk)
    except MismatchError as e:
        raise ScheduleError(
            PRIM,
            f'block "{block}" does not compute intrinsic "{intrin.name}": {e}',
            requires="the block's body is the intrinsic's description (same loops, iterators, "
            "computation, buffer dtypes and scopes) on tiles at offsets the block's regions give",
            fragment=fragment(realize, {id(realize): "<- block"}),
            hint="split/reorder/blockize so the block holds exactly the intrinsic's loops; "
            "cache_read/cache_write operands into the intrinsic's storage scopes",
            locations=[block],
        ) from None
    missing = [
        p.name for p in intrin.desc.params if isinstance(p, Buffer) and id(p) not in bindings
    ]
    if missing:
        raise ScheduleError(
            PRIM,
            f'block "{block}" never uses intrinsic buffers {missing}',
            requires="every buffer of the intrinsic is accessed by the block",
            locations=[block],
        )
    new_blk: Block = blk.update(
        body=_impl_body(intrin, bindings),
        init=None,
        annotations=blk.annotations.with_item(INTRIN_ATTR, intrin.name),
    )
    return _tree.replace_stmt(func, realize, realize.update(block=new_blk))


@primitive("tensorize", inputs=("block_or_loop",))
def tensorize(
    state: ScheduleState,
    block_or_loop: BlockRV | LoopRV,
    intrin: Annotated[str, IntrinName()],
) -> None:
    """Replace a block computing ``intrin``'s description by its implementation.

    Requires: (1) ``intrin`` names a registered tensor intrinsic; (2) given a loop,
    ``blockize`` succeeds on it; (3) the block's body has the description's form: the same
    loop nest (constant extents), iterators (kinds, domains), computation and buffers (dtype,
    storage scope), with no init; (4) each buffer's declared region is a tile of the
    description buffer's shape (leading extra dimensions of extent 1) and every access sits
    at that tile's offset plus the description's index.
    Rewrite: ``C_o: for i, j, k in T.grid(16, 8, 16): C[...] += A[...] * B[...]`` -->
    ``C_o: T.evaluate(T.mma_sync_m16n8k16(C[vi_o * 16, vj_o * 8], A[...], B[...]))``.
    """
    if isinstance(block_or_loop, LoopRV):
        block_or_loop = blockize(state, block_or_loop)
    name = state.block_name(block_or_loop)
    state.commit(build_tensorize(state.func, name, get_tensor_intrin(intrin)))

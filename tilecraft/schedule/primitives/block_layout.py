"""Block-shape primitives: get_output_blocks, transform_block_layout.

``output_blocks`` and ``build_transform_block_layout`` are pure (PrimFunc in, names or a new
PrimFunc out); :func:`get_output_blocks` and :func:`transform_block_layout` are the traced,
handle-level primitives the :class:`~tilecraft.schedule.Schedule` methods call.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...arith import Analyzer
from ...errors import ScheduleError, TilecraftError
from ...ir import (
    Block,
    BlockRealize,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    Mutator,
    PrimFunc,
    Range,
    Stmt,
    Var,
    collect_vars,
    const,
    substitute,
)
from .. import _tree
from ..instruction import primitive
from ..state import BlockRV, ScheduleState
from ._block_nest import owned_nest
from ._blockutil import fragment, fresh_var_names, get_block, is_param
from .index_map import IndexMap

# ------------------------------------------------------------------------------------------
# get_output_blocks


def output_blocks(func: PrimFunc, scope: str) -> list[str]:
    """Names of the blocks directly under block ``scope`` (not inside another block) that
    write a buffer parameter of ``func`` (a function output), in program order."""
    realize, _ = _tree.find_block(func, scope)
    return [
        br.block.name
        for br in _tree.child_blocks(realize)
        if any(is_param(func, r.buffer) for r in br.block.writes)
    ]


# ------------------------------------------------------------------------------------------
# transform_block_layout


class _SimplifyAccesses(Mutator):
    """Simplify buffer indices and regions under the new iterators' domains."""

    def __init__(self, dom: Mapping[Var, Range]) -> None:
        super().__init__()
        self.ana = Analyzer()
        for v, r in dom.items():
            self.ana.bind(v, r)

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:  # noqa: N802
        idx = tuple(self.ana.simplify(self.visit(i)) for i in node.indices)
        return node.update(indices=idx)

    def visit_BufferStore(self, node: BufferStore) -> Stmt:  # noqa: N802
        idx = tuple(self.ana.simplify(self.visit(i)) for i in node.indices)
        return node.update(value=self.visit(node.value), indices=idx)

    def visit_BufferRegion(self, node: BufferRegion) -> BufferRegion:  # noqa: N802
        region = tuple(
            Range(self.ana.simplify(r.min), self.ana.simplify(r.extent)) for r in node.region
        )
        return node.update(region=region)


def _new_kinds(prim: str, blk: Block, index_map: IndexMap) -> list[IterKind]:
    """The kind of each new iterator: the one kind of the iterators its index uses."""
    kind_of = {
        id(v): iv.kind for v, iv in zip(index_map.initial_indices, blk.iter_vars, strict=True)
    }
    out: list[IterKind] = []
    for k, e in enumerate(index_map.final_indices):
        kinds = {kind_of[id(v)] for v in collect_vars(e) if id(v) in kind_of}
        if len(kinds) > 1:
            raise ScheduleError(
                prim,
                f'new iterator {k} mixes spatial and reduction iterators of block "{blk.name}"',
                requires="each output index of the map uses iterators of one kind",
                fragment=fragment(blk),
                hint="fuse or split spatial and reduction iterators separately",
                locations=[blk.name],
            )
        out.append(kinds.pop() if kinds else IterKind.SPATIAL)
    return out


def _check_map(prim: str, blk: Block, index_map: IndexMap) -> tuple[IndexMap, tuple[Expr, ...]]:
    """The inverse map and the new extents; ScheduleError unless the map is a bijection
    of the block's iteration domain onto a 0-based box."""
    if index_map.ndim_in != len(blk.iter_vars):
        raise ScheduleError(
            prim,
            f'index map takes {index_map.ndim_in} indices but block "{blk.name}" has '
            f"{len(blk.iter_vars)} iterators",
            requires="the map takes one index per block iterator",
            locations=[blk.name],
        )
    opaque = [iv.var.name for iv in blk.iter_vars if iv.kind is IterKind.OPAQUE]
    if opaque:
        raise ScheduleError(
            prim,
            f'block "{blk.name}" has opaque iterators {opaque}',
            requires="every iterator is spatial or a reduction",
            locations=[blk.name],
        )
    shape = tuple(iv.dom.extent for iv in blk.iter_vars)
    try:
        inverse = index_map.inverse(shape)
        extents = index_map.map_shape(shape)
    except ScheduleError as e:
        raise ScheduleError(
            prim,
            f'the index map is not a bijection of the iteration space of "{blk.name}": {e.short}',
            requires="the map is a composition of permutations, splits and fusions of the "
            "iterators onto a 0-based box",
            locations=[blk.name],
        ) from e
    return inverse, extents


def build_transform_block_layout(func: PrimFunc, block: str, index_map: IndexMap) -> PrimFunc:
    """Re-map the iteration space of ``block`` with ``index_map`` (see the primitive)."""
    prim = "transform_block_layout"
    realize, path = get_block(func, block, prim)
    blk = realize.block
    loops = owned_nest(prim, realize, path, unit_constants=True)
    inverse, extents = _check_map(prim, blk, index_map)
    kinds = _new_kinds(prim, blk, index_map)
    dt = blk.iter_vars[0].var.dtype
    iv_names = fresh_var_names(func, [f"v{k}" for k in range(len(extents))])
    loop_names = fresh_var_names(func, [f"ax{k}" for k in range(len(extents))])
    new_vars = [Var(n, dt) for n in iv_names]
    dom = {v: Range(IntImm(dt, 0), e) for v, e in zip(new_vars, extents, strict=True)}
    to_new = dict(zip(inverse.initial_indices, new_vars, strict=True))
    vmap = {
        iv.var: substitute(e, to_new)
        for iv, e in zip(blk.iter_vars, inverse.final_indices, strict=True)
    }
    ivs = tuple(IterVar(v, dom[v], kind) for v, kind in zip(new_vars, kinds, strict=True))
    moved = substitute(blk.update(iter_vars=ivs), vmap)
    new_blk = _SimplifyAccesses(dom).visit(moved)
    lvars = [Var(n, dt) for n in loop_names]
    nest: Stmt = BlockRealize(tuple(lvars), const(True, "bool"), new_blk)
    for lv, e in reversed(list(zip(lvars, extents, strict=True))):
        nest = For(lv, IntImm(dt, 0), e, ForKind.SERIAL, nest)
    return _tree.replace_stmt(func, loops[0] if loops else realize, nest)


def as_block_map(value: object) -> IndexMap:
    """An IndexMap from an IndexMap or a callable ``lambda i, j: (j, i)``; ScheduleError
    otherwise."""
    if isinstance(value, IndexMap):
        return value
    if not callable(value):
        raise ScheduleError(
            "transform_block_layout",
            f"argument 'index_map': expected an IndexMap or a callable, got {type(value).__name__}",
        )
    try:
        return IndexMap.from_func(value)
    except ScheduleError as e:
        raise ScheduleError("transform_block_layout", e.short, hint=e.hint) from e
    except (TilecraftError, TypeError, ValueError) as e:  # the callable did not build indices
        raise ScheduleError(
            "transform_block_layout",
            f"argument 'index_map': calling it on index variables failed: {e}",
            hint="pass a function of the block's iterators returning index expressions",
        ) from e


# ------------------------------------------------------------------------------------------
# traced primitives


@primitive("get_output_blocks", inputs=("scope_block",), outputs="many", pure=True)
def get_output_blocks(state: ScheduleState, scope_block: BlockRV) -> list[BlockRV]:
    """Handles of the blocks directly under ``scope_block`` that write a function output.

    Requires: the handle refers to a block of the function (the root block included).
    Rewrite: none (a query).
    """
    name = state.block_name(scope_block)
    return [state.block_rv(n) for n in output_blocks(state.func, name)]


@primitive("transform_block_layout", inputs=("block",))
def transform_block_layout(state: ScheduleState, block: BlockRV, index_map: IndexMap) -> None:
    """Re-map ``block``'s iterators (and the loops binding them) with ``index_map``.

    Requires: (1) the block owns its loop nest (one serial loop per iterator, perfectly nested
    around the block alone, each binding its iterator directly, from 0; no predicate; an
    iterator of extent 1 bound to 0 may have none); (2) no opaque iterator; (3) the map takes
    one index per iterator and is a bijection (permutations, splits, fusions) of the iteration
    domain onto a 0-based box; (4) each output index uses iterators of one kind (spatial or
    reduction).
    Rewrite: ``for i, j: C[vi=i, vj=j]`` -- ``lambda i, j: (i * n + j,)`` -->
    ``for ax0 in range(m * n): C[v0=ax0]`` with ``vi = v0 // n``, ``vj = v0 % n`` inside.
    """
    name = state.block_name(block)
    if not isinstance(index_map, IndexMap):
        raise state.error(
            f"argument 'index_map': expected an IndexMap or a callable, got "
            f"{type(index_map).__name__}"
        )
    state.commit(build_transform_block_layout(state.func, name, index_map))

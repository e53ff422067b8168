"""conv2d on tensor cores for the GPU ``Matmul`` rule: the implicit GEMM normalized to one
``i``, one ``j`` and one ``k``.

A conv block (NCHW: ``C[n, o, h, w] += X[n, c, h * s + r, w * s + q] * W[o, c, r, q]``) has
seven iterators; the tensor-core schedule wants ``C[i, j] += A[i, k] * B[j, k]``.
:func:`normalize_conv` makes it ``C[o, (n h w)] += W[o, (c r q)] * X[(n h w), (c r q)]``:

* ``A`` is the weight (``(o, c, r, q)`` is ``(o, k)`` row-major, as in memory), ``B`` the im2col
  gather kept ``(n, k)`` in shared memory (``ldmatrix`` without ``.trans``); ``i`` is the
  output channel and ``j`` the output pixel, so the write-back to NCHW is contiguous along
  ``j`` (NHWC: strided, still correct);
* the output (an intermediate; a parameter gets a ``cache_write`` copy) is re-laid out
  ``(o, (n h w))`` by ``transform_layout``, the conv's and the epilogue's iteration spaces by
  ``transform_block_layout``: first permuted, then fused a pair at a time, so each index
  stays ``x // e * e + x % e``, which the simplifier folds (a three-level fused index is not
  folded); a unit dimension is dropped, not fused;
* then both operands, now read at fused indices, are staged by
  :func:`~._mm_common.stage_implicit_gemm` (``reindex``, the padding inlined): buffers
  indexed ``(j, k)`` and ``(i, k)`` whose blocks inline into the shared-memory fetch: the
  weight in 16-byte ``cp.async`` copies (``w[o, k // 9, k % 9 // 3, k % 3]`` is contiguous
  once flattened), the gather with its zero halo in guarded scalar loads (it is not
  contiguous along ``k``);
* the epilogue (bias, ReLU, residual) iterates ``(i, j)`` and is fused into the write-back as
  for a GEMM; extents the tiles do not divide are padded as for a GEMM.

Declined (the SIMT schedule is used), with the reason :func:`normalize_conv` returns:
symbolic extents (image size, channels, batch), grouped and depthwise convs (the output
channel indexes the image), an epilogue of another shape than the conv's output. The dtype
checks are the GEMM's, after normalization (fp16/bf16 operands; fp16 accumulated in fp16,
as ``topi.conv2d`` writes it, on ``mma`` only: on WMMA targets such a conv stays SIMT).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...ir import BufferStore, Expr, IterKind, Var, collect_vars
from ...schedule import BlockRV, IndexMap, Schedule
from ...schedule.analysis import classify_einsum, is_multiply_accumulate
from ..base import Decline
from ..common import block_node, const_int, fold_epilogue, loads_of, writes_param
from ._mm_common import match_single_reduction, stage_implicit_gemm

Groups = list[list[int]]
"""A layout: the extents of each group of dimensions to be fused into one, in order."""


def is_implicit_gemm(sch: Schedule, name: str) -> bool:
    """Whether block ``name`` is a multiply-accumulate that is not an einsum as written (a
    conv before staging)."""
    block = block_node(sch, sch.get_block(name))
    return classify_einsum(block) is None and is_multiply_accumulate(block)


def normalize_conv(sch: Schedule, name: str) -> Decline | None:
    """Make block ``name`` (a conv, :func:`is_implicit_gemm`) ``C[i, j] += A[i, k] * B[j, k]``
    (module docstring); its iterators are then ``(i, j, k)``. Why not (the schedule may be
    partly changed: the caller then drops it), or None."""
    main = sch.get_block(name)
    layout = _conv_layout(sch, main)
    if isinstance(layout, Decline):
        return layout
    o, spatial, reduce, out_order = layout
    exts = [const_int(iv.dom.extent) for iv in block_node(sch, main).iter_vars]
    ext = [e for e in exts if e is not None]
    if len(ext) != len(exts):
        return Decline("conv on tensor cores: symbolic extents (image size, channels, batch)")
    # Step 1. The output an intermediate buffer (re-laid out below), the epilogue folded.
    if writes_param(sch, main):
        sch.cache_write(main, 0, "global")
    epilogue = fold_epilogue(sch, main)
    out = block_node(sch, main).writes[0].buffer
    out_shape = [const_int(e) for e in out.shape]
    for consumer in epilogue:
        shape = [iv.dom.extent for iv in block_node(sch, consumer).iter_vars]
        if [const_int(e) for e in shape] != out_shape:
            return Decline("conv on tensor cores: an epilogue of another shape than the output")
    # Step 2. Permute to (o, spatial..., reduce...), then fuse a pair at a time: the output
    # (the epilogue blocks follow it) and the conv's iteration space.
    o_ext, s_ext, k_ext = [ext[o]], [ext[n] for n in spatial], [ext[n] for n in reduce]
    items = [
        _Item(out.name, epilogue, _perm([o, *spatial], out_order), [o_ext, s_ext]),
        _Item(None, [main], _perm([o, *spatial, *reduce], range(len(ext))),
              [o_ext, s_ext, k_ext]),
    ]  # fmt: skip
    for item in items:
        if item.perm != sorted(item.perm):
            _relayout(sch, main, item, _permute(item.perm))
    while any(len(g) > 1 for item in items for g in item.groups):
        for item in items:
            fn, item.groups = _fuse_pairs(item.groups)
            _relayout(sch, main, item, fn)
    # Step 3. Stage both operands (now read at fused indices) through buffers indexed by
    # (j, k) and (i, k): the im2col gather (zero halo inlined) and the weight.
    found = match_single_reduction(sch)
    if isinstance(found, Decline):
        return found
    if (staged := stage_implicit_gemm(sch, found[0])) is not None:
        return staged
    for index, region in enumerate(block_node(sch, main).reads):  # a 1x1 weight: W[o, k, 0, 0]
        if region.buffer.name != out.name and len(region.buffer.shape) != 2:
            sch.reindex(main, ("read", index))
    return None


@dataclass
class _Item:
    """A buffer of ``main`` (None: ``main``'s iteration space) and the blocks iterating it,
    the permutation to apply first, and the groups of extents still to fuse."""

    buffer: str | None
    blocks: list[BlockRV]
    perm: list[int]
    groups: Groups


def _perm(want: Sequence[int], have: Sequence[int]) -> list[int]:
    """Where each of ``want`` (block positions) stands in ``have`` (an access's positions)."""
    have = list(have)
    return [have.index(w) for w in want]


def _relayout(sch: Schedule, main: BlockRV, item: _Item, fn: IndexMap) -> None:
    if item.buffer is not None:
        block = block_node(sch, main)
        if block.writes[0].buffer.name == item.buffer:
            sch.transform_layout(main, ("write", 0), fn)
        else:
            sch.transform_layout(main, ("read", _read_pos(sch, main, item.buffer)), fn)
    for b in item.blocks:
        sch.transform_block_layout(b, fn)


def _conv_layout(
    sch: Schedule, main: BlockRV
) -> tuple[int, list[int], list[int], list[int]] | Decline:
    """(position of the output-channel iterator, the other spatial (``n``, ``h``, ``w``) and
    the reduction iterators in block order, the output's indices as positions) of a conv:
    the output-channel iterator is the one spatial iterator indexing the weight (the read of
    a parameter at iterators only)."""
    block = block_node(sch, main)
    pos = {id(iv.var): n for n, iv in enumerate(block.iter_vars)}
    params = {id(b) for b in sch.func.buffer_params}
    out = block.body.indices if isinstance(block.body, BufferStore) else ()
    loads = [ld for ld in loads_of(block.body) if ld.buffer is not block.writes[0].buffer]
    weights = [ld for ld in loads if id(ld.buffer) in params
               and all(isinstance(i, Var) and id(i) in pos for i in ld.indices)]  # fmt: skip
    if len(loads) != 2 or len(weights) != 1:
        return Decline("conv on tensor cores: expected an image and a weight read at iterators")
    weight = weights[0]
    image = next(ld for ld in loads if ld is not weight)
    spatial_kind = {n for n, iv in enumerate(block.iter_vars) if iv.kind is IterKind.SPATIAL}
    os = [pos[id(i)] for i in weight.indices if pos[id(i)] in spatial_kind]
    if len(os) != 1:
        return Decline("conv on tensor cores: the weight has more than one output channel axis")
    o = os[0]
    used = {id(v) for e in image.indices for v in collect_vars(e)}
    if id(block.iter_vars[o].var) in used:
        return Decline("grouped or depthwise conv: the output channel indexes the image too")
    if not all(isinstance(i, Var) and id(i) in pos for i in out) or len(out) != len(spatial_kind):
        return Decline("conv on tensor cores: the output is not indexed by the iterators")
    spatial = [n for n in sorted(spatial_kind) if n != o]
    reduce = [n for n in range(len(block.iter_vars)) if n not in spatial_kind]
    return o, spatial, reduce, [pos[id(i)] for i in out]


def _read_pos(sch: Schedule, block: BlockRV, name: str) -> int:
    reads = block_node(sch, block).reads
    return next(n for n, r in enumerate(reads) if r.buffer.name == name)


def _fuse_pairs(groups: Groups) -> tuple[IndexMap, Groups]:
    """The map fusing the last two dimensions of every group of two or more (dropping the last
    where it is a unit one), and the layout after it."""

    def fn(*idx: Expr) -> tuple[Expr, ...]:
        out: list[Expr] = []
        at = 0
        for g in groups:
            vals = list(idx[at : at + len(g)])
            at += len(g)
            if len(g) > 1 and g[-1] == 1:  # a unit dimension is dropped (x * 1 + 0 is x)
                vals = vals[:-1]
            elif len(g) > 1:
                vals = [*vals[:-2], vals[-2] * g[-1] + vals[-1]]
            out.extend(vals)
        return tuple(out)

    after = [g if len(g) == 1 else [*g[:-2], g[-2] * g[-1]] for g in groups]
    return IndexMap.from_func(fn, ndim=sum(len(g) for g in groups)), after


def _permute(perm: Sequence[int]) -> IndexMap:
    def fn(*idx: Expr) -> tuple[Expr, ...]:
        return tuple(idx[p] for p in perm)

    return IndexMap.from_func(fn, ndim=len(perm))

"""Recognise a 2-D convolution block in NCHW (package-private; see ``conv.py``).

A convolution block here is a multiply-accumulate with four plain output indices and three
reduction iterators::

    Y[n, oc, oh, ow] += X[n, chan, oh * sh + r * dh, ow * sw + q * dw] * W[oc, ic, r, q]

where ``chan`` is ``ic`` (a dense convolution, ``groups = 1``) or ``oc + ic`` with ``ic`` of
extent 1 (depthwise: one input channel per output channel). ``X`` is the padded input
(``pad_temp``, an intermediate the padding block writes) or the input itself; the strides
and dilations are read off the index expressions, which must be affine in their two
iterators. Everything is checked on the block; :func:`match_conv` returns why not otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...arith import evaluate
from ...ir import Block, Buffer, BufferLoad, Expr, Var
from ...ir.visitor import collect_vars
from ...schedule.analysis import BlockInfo, is_multiply_accumulate
from ..common import const_int, loads_of


@dataclass(frozen=True)
class ConvInfo:
    """What :func:`match_conv` found: the iterators by role and the two operands.

    Attributes
    ----------
    n, oc, oh, ow
        The output's iterators (batch, channel, row, column).
    ic, r, q
        The reduction iterators (input channel, kernel row, kernel column).
    data, weight
        The input (padded or not) and the weight buffers, and the read index of each in
        the block's ``T.reads``.
    stride_h, stride_w
        The strides along rows and columns.
    depthwise
        One input channel per output channel (``groups`` = channels).
    extents
        Constant extent of each iterator by ``id`` of its variable (all but a symbolic
        batch).
    """

    n: Var
    oc: Var
    oh: Var
    ow: Var
    ic: Var
    r: Var
    q: Var
    data: Buffer
    data_read: int
    weight: Buffer
    weight_read: int
    stride_h: int
    stride_w: int
    depthwise: bool
    extents: dict[int, int]

    def extent(self, v: Var) -> int:
        """The constant extent of iterator ``v`` (not the batch: it may be symbolic)."""
        return self.extents[id(v)]


def _vars(e: Expr) -> set[int]:
    return {id(v) for v in collect_vars(e)}


def _affine_step(e: Expr, outer: Var, inner: Var) -> tuple[int, int] | None:
    """``(a, b)`` when ``e == c + a * outer + b * inner`` on a few points, else None."""
    if not _vars(e) <= {id(outer), id(inner)}:
        return None

    def at(o: int, i: int) -> int:
        return int(evaluate(e, {outer: o, inner: i}))

    base = at(0, 0)
    a, b = at(1, 0) - base, at(0, 1) - base
    if any(at(o, i) != base + a * o + b * i for o, i in ((2, 1), (3, 2), (1, 3))):
        return None
    return a, b


def _operands(block: Block, out: Buffer) -> tuple[BufferLoad, BufferLoad] | str:
    """(data load, weight load): the weight is the load indexed by four plain variables,
    its first the output channel."""
    loads = [ld for ld in loads_of(block.body) if ld.buffer is not out]
    if len(loads) != 2 or loads[0].buffer is loads[1].buffer:
        return "the product does not read exactly two different buffers"
    plain = [all(isinstance(i, Var) for i in ld.indices) for ld in loads]
    if plain[0] == plain[1]:
        # a 1x1 convolution's data read may be plain as well: the weight is the one whose
        # indices are the output channel followed by reduction iterators only
        first = [ld.indices[0] for ld in loads]
        out_c = block.writes[0].region[1].min if len(block.writes[0].region) == 4 else None
        picks = [i for i, f in enumerate(first) if f is out_c and plain[i]]
        if len(picks) != 1:
            return "cannot tell the weight from the data (both or neither plainly indexed)"
        return loads[1 - picks[0]], loads[picks[0]]
    return (loads[1], loads[0]) if plain[0] else (loads[0], loads[1])


def match_conv(main: BlockInfo) -> ConvInfo | str:
    """The convolution ``main`` computes (module docstring), or why it is not one."""
    block = main.block
    if not is_multiply_accumulate(block) or len(block.writes) != 1:
        return "not a multiply-accumulate block"
    out = block.writes[0]
    idx = [r.min for r in out.region]
    if len(idx) != 4 or not all(isinstance(i, Var) for i in idx):
        return "the output is not 4-D with plain indices (NCHW)"
    spatial = [it for it in main.iters if it.is_spatial]
    reduce = [it for it in main.iters if it.is_reduce]
    extents = {id(it.var): const_int(it.dom) for it in main.iters}
    if len(spatial) != 4 or len(reduce) != 3:
        return "needs four spatial and three reduction iterators (n, oc, oh, ow; ic, r, q)"
    batch = idx[0]
    if any(e is None for k, e in extents.items() if k != id(batch)):
        return "a symbolic extent other than the batch"
    got = _operands(block, out.buffer)
    if isinstance(got, str):
        return got
    x, w = got
    if len(w.indices) != 4 or len(x.indices) != 4:
        return "the data or the weight is not 4-D"
    n, oc, oh, ow = (i for i in idx if isinstance(i, Var))
    if w.indices[0] is not oc or not all(isinstance(i, Var) for i in w.indices[1:]):
        return "the weight is not read as W[oc, ic, r, q]"
    ic, r, q = (i for i in w.indices[1:] if isinstance(i, Var))
    if {id(ic), id(r), id(q)} != {id(it.var) for it in reduce}:
        return "the weight's last three indices are not the reduction iterators"
    if x.indices[0] is not n and not (const_int(x.indices[0]) == 0 and extents[id(n)] == 1):
        return "the data's batch index is not the output's"
    chan = x.indices[1]
    depthwise = chan is not ic
    if depthwise and (_affine_step(chan, oc, ic) != (1, 1) or extents[id(ic)] != 1):
        return "a grouped convolution that is not depthwise (one channel per group)"
    steps = [_affine_step(x.indices[2], oh, r), _affine_step(x.indices[3], ow, q)]
    if steps[0] is None or steps[1] is None:
        return "the data's row or column index is not affine in (oh, r) and (ow, q)"
    reads = [rg.buffer for rg in block.reads]
    if x.buffer not in reads or w.buffer not in reads:
        return "the operands are not among the block's reads"
    return ConvInfo(n, oc, oh, ow, ic, r, q, x.buffer, reads.index(x.buffer), w.buffer,
                    reads.index(w.buffer), steps[0][0], steps[1][0], depthwise,
                    {k: v for k, v in extents.items() if v is not None})  # fmt: skip

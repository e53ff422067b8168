"""Expand warp tile operations into the loops they stand for (serial GPU emulation).

Before: any IR; a tensorized block's body may call warp tile operations
(:data:`tilecraft.ir.device_intrin.TILE_OPS`) on logical tiles of warp fragment buffers.
After:  each such call is the loop nest its tensor intrinsic's description states (a 16x16 or
16x8 copy, fill, store, or multiply-accumulate over ``k = 16``, or 32 for int8, with products
in the accumulator's dtype), on the same buffers and tiles, and fragment buffers are ``local``.

The serial emulation pipeline (``lower(..., emulate_gpu=True)``) runs this first: it gives a
tensorized schedule its serial meaning, so ``check_numeric(..., emulate_gpu=True)`` checks
that tensorize matched and instantiated the right tiles. It says nothing about the per-lane
lowering of :class:`~tilecraft.lower.LowerWarpFragments`.
"""

from __future__ import annotations

from ..errors import LowerError
from ..ir import (
    WARP_FRAGMENT_SCOPES,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    Expr,
    For,
    ForKind,
    IntImm,
    Mutator,
    PrimFunc,
    Stmt,
    Var,
    cast,
)
from ..ir.device_intrin import TILE_OPS
from ..ir.transform import FunctionPass
from .warp_layouts import TILE_SHAPE, footprint, tile_op_error


def _at(arg: BufferLoad, di: Expr, dj: Expr, new: dict[int, Buffer]) -> BufferLoad:
    """Element ``(di, dj)`` of the tile ``arg`` starts."""
    idx = arg.indices
    buf = new.get(id(arg.buffer), arg.buffer)
    return BufferLoad(buf, (*idx[:-2], idx[-2] + di, idx[-1] + dj))


def _nest(shape: tuple[int, ...], names: str, body_of: object) -> Stmt:
    loops = [Var(n) for n in names[: len(shape)]]
    body: Stmt = body_of(*loops)  # type: ignore[operator]
    for v, ext in reversed(list(zip(loops, shape, strict=True))):
        body = For(v, IntImm(v.dtype, 0), IntImm(v.dtype, ext), ForKind.SERIAL, body)
    return body


class _Expand(Mutator):
    def __init__(self) -> None:
        super().__init__()
        self.new: dict[int, Buffer] = {}

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        if buf.scope not in WARP_FRAGMENT_SCOPES:
            return buf
        got = self.new.get(id(buf))
        if got is None:
            got = self.new[id(buf)] = buf.update(scope="local")
        return got

    def visit_Evaluate(self, s: Evaluate) -> Stmt:  # noqa: N802
        call = s.value
        if not (isinstance(call, Call) and call.op in TILE_OPS):
            return s
        why = tile_op_error(
            call.op, [a.buffer.scope for a in call.args if isinstance(a, BufferLoad)]
        )
        if why is not None:
            raise LowerError(f"ExpandWarpTiles: {why}")
        for a in call.args:
            if isinstance(a, BufferLoad):
                self.visit_Buffer(a.buffer)
        return _expand(call, self.new)


def _expand(call: Call, new: dict[int, Buffer]) -> Stmt:
    op = call.op
    args = [a for a in call.args if isinstance(a, BufferLoad)]
    if op in ("mma_sync_m16n8k16", "mma_sync_m16n8k32", "wmma_sync"):
        c, a, b = args
        m, n = TILE_SHAPE[c.buffer.scope]
        kdim = TILE_SHAPE[a.buffer.scope][1]
        dt = c.buffer.dtype

        def mac(i: Var, j: Var, k: Var) -> Stmt:
            acc = _at(c, i, j, new)
            prod = cast(_at(a, i, k, new), dt) * cast(_at(b, k, j, new), dt)
            return BufferStore(acc.buffer, acc + prod, acc.indices)

        return _nest((m, n, kdim), "ijk", mac)
    if op in ("mma_fill", "wmma_fill"):
        (dst,) = args
        value = call.args[1]

        def fill(i: Var, j: Var) -> Stmt:
            el = _at(dst, i, j, new)
            return BufferStore(el.buffer, cast(value, el.buffer.dtype), el.indices)

        return _nest(TILE_SHAPE[dst.buffer.scope], "ij", fill)
    if op == "mma_load_matrix_b":
        dst, src = args
        nk = call.args[2]
        transposed = isinstance(nk, IntImm) and nk.value == 1

        def load_b(i: Var, j: Var) -> Stmt:
            el = _at(dst, i, j, new)
            value = _at(src, j, i, new) if transposed else _at(src, i, j, new)
            return BufferStore(el.buffer, value, el.indices)

        return _nest(footprint(call, 0, dst.buffer.scope), "ij", load_b)
    if op in ("mma_load_matrix", "mma_store", "wmma_load_matrix", "wmma_store"):
        dst, src = args
        frag = dst if dst.buffer.scope in TILE_SHAPE else src

        def copy(i: Var, j: Var) -> Stmt:
            el = _at(dst, i, j, new)
            return BufferStore(el.buffer, cast(_at(src, i, j, new), el.buffer.dtype), el.indices)

        return _nest(TILE_SHAPE[frag.buffer.scope], "ij", copy)
    raise LowerError(f"ExpandWarpTiles: no serial form for {op}")


class ExpandWarpTiles(FunctionPass):
    """Warp tile operations -> loop nests; fragment buffers -> ``local`` (module doc)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Expand the warp tile operations of ``func``."""
        out: PrimFunc = _Expand().visit(func)
        return out

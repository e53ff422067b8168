"""Find the GEMM a fused PrimFunc starts with, and split off the epilogue that follows it.

A function qualifies when its first block (under a plain serial loop nest covering its whole
domain) is, over spatial iterators ``(*batch, i, j)`` and one reduction iterator ``k``::

    C[*batch, i, j] = 0                                          # init
    C[*batch, i, j] = C[*batch, i, j] + A[.., i, k] * B[.., k, j]

where ``A`` is a parameter indexed ``(*batch, i, k)``, ``(i, k)`` or transposed (``k`` before
``i``), ``B`` likewise with ``j`` (a weight ``(N, K)`` is the transposed layout), both of the
result's float dtype (float32, float64), each dimension indexed by one iterator over the
buffer's whole extent. A library may also take narrower operands read through a cast to the
accumulator's dtype (``float16`` products summed in ``float32``: ``dtypes`` of
:func:`match_gemm`). Then either ``C`` is the output parameter and the block is all there is
(a plain matmul, batched matmul or linear layer without bias), or ``C`` is an intermediate
buffer that only the later blocks read: those blocks are the *epilogue* (bias, activation),
returned as a PrimFunc of their own taking ``(C, *inputs it reads, out)``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..ir import (
    Add,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    Expr,
    FloatImm,
    For,
    ForKind,
    IntImm,
    IterKind,
    Mul,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    from_json,
    post_order_visit,
    to_json,
)
from ..ir.stmt import Block, BlockRealize

BLAS_DTYPES = frozenset({("float32", "float32"), ("float64", "float64")})
"""(operand dtype, accumulator dtype) pairs cblas GEMMs take."""


@dataclass(frozen=True)
class GemmMatch:
    """A GEMM found at the head of a PrimFunc (see the module docstring).

    ``a`` and ``b`` are parameter indices; ``epilogue`` is None for a plain GEMM, else the
    remaining blocks as a PrimFunc taking ``(C, *params[epilogue_inputs], out)``.
    """

    a: int
    b: int
    trans_a: bool
    trans_b: bool
    epilogue: PrimFunc | None
    epilogue_inputs: tuple[int, ...]
    dtype: str  # of the GEMM's result: its accumulator's


def _same_extent(a: Expr, b: Expr) -> bool:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    return a is b


def _stmts(body: Stmt) -> list[Stmt]:
    return list(body.stmts) if isinstance(body, SeqStmt) else [body]


def _nest(stmt: Stmt) -> tuple[list[For], BlockRealize] | None:
    """The serial loops from 0 above a block, and the block (None for anything else)."""
    loops: list[For] = []
    while isinstance(stmt, For):
        if stmt.kind is not ForKind.SERIAL or not (
            isinstance(stmt.min, IntImm) and stmt.min.value == 0
        ):
            return None
        loops.append(stmt)
        stmt = stmt.body
    return (loops, stmt) if isinstance(stmt, BlockRealize) else None


def _whole_domain(loops: list[For], realize: BlockRealize) -> bool:
    """Each block iterator is bound to its own loop, which covers its whole domain."""
    blk = realize.block
    if len(loops) != len(blk.iter_vars) or len(realize.iter_values) != len(loops):
        return False
    for loop, iv, value in zip(loops, blk.iter_vars, realize.iter_values, strict=True):
        dom_min = iv.dom.min
        if value is not loop.loop_var or not (isinstance(dom_min, IntImm) and dom_min.value == 0):
            return False
        if not _same_extent(loop.extent, iv.dom.extent):
            return False
    return True


def _update(blk: Block) -> tuple[Buffer, BufferLoad, BufferLoad] | str:
    """``C`` and the two loads of ``C = C + X * Y`` with ``C = 0`` as init."""
    body, init = blk.body, blk.init
    if not isinstance(body, BufferStore) or not isinstance(init, BufferStore):
        return "the first block is not a reduction with an init"
    c = body.buffer
    zero = init.value
    if init.buffer is not c or not (isinstance(zero, (FloatImm, IntImm)) and zero.value == 0):
        return "the reduction does not start from zero"
    v = body.value
    if not isinstance(v, Add):
        return "the reduction is not a sum"
    acc, prod = (v.a, v.b) if isinstance(v.a, BufferLoad) and v.a.buffer is c else (v.b, v.a)
    if not (isinstance(acc, BufferLoad) and acc.buffer is c and isinstance(prod, Mul)):
        return "the reduction is not C += X * Y"
    x, y = _uncast(prod.a, c), _uncast(prod.b, c)
    if not (isinstance(x, BufferLoad) and isinstance(y, BufferLoad)):
        return "the product does not multiply two buffer loads (a cast or a scalar in between)"
    idx = list(body.indices)
    if [*acc.indices] != idx or [*init.indices] != idx:  # identity on the same Var objects
        return "the accumulator is not indexed like the result"
    return c, x, y


def _uncast(e: Expr, c: Buffer) -> Expr:
    """``e`` without a cast to the accumulator's dtype."""
    return e.value if isinstance(e, Cast) and e.dtype == c.dtype else e


def _operand(
    load: BufferLoad, batch: list[Var], row: Var, k: Var, extents: dict[int, Expr]
) -> bool | None:
    """Whether ``load`` reads ``(.., row, k)`` (k last), or None when it is not an operand."""
    idx = list(load.indices)
    if not all(isinstance(e, Var) for e in idx) or len(load.buffer.shape) != len(idx):
        return None
    if idx[:-2] not in ([], batch):
        return None
    tail = idx[-2:]
    if tail not in ([row, k], [k, row]):
        return None
    shape = load.buffer.shape
    if not all(_same_extent(s, extents[id(v)]) for s, v in zip(shape, idx, strict=True)):
        return None
    return tail == [row, k]


def match_gemm(
    func: PrimFunc, dtypes: Collection[tuple[str, str]] = BLAS_DTYPES
) -> GemmMatch | str:
    """The GEMM at the head of ``func``, or why there is none (see the module docstring).

    ``dtypes`` lists the (operand dtype, accumulator dtype) pairs the library takes.
    """
    root = func.body
    if not isinstance(root, BlockRealize) or not all(isinstance(p, Buffer) for p in func.params):
        return "not a function of buffers under a root block"
    stmts = _stmts(root.block.body)
    nest = _nest(stmts[0])
    if nest is None or not _whole_domain(*nest):
        return "the first block is not under a plain loop nest over its domain"
    blk = nest[1].block
    kinds = [iv.kind for iv in blk.iter_vars]
    if (
        kinds[-1:] != [IterKind.REDUCE]
        or kinds[:-1].count(IterKind.SPATIAL) < 2
        or (IterKind.REDUCE in kinds[:-1] or len(kinds) - 1 != kinds.count(IterKind.SPATIAL))
    ):
        return "the first block is not spatial iterators then one reduction"
    update = _update(blk)
    if isinstance(update, str):
        return update
    c, x, y = update
    ivars = [iv.var for iv in blk.iter_vars]
    pairs = {(str(ld.buffer.dtype), str(c.dtype)) for ld in (x, y)}
    if len(pairs) != 1 or not pairs <= set(dtypes):
        operands = " and ".join(sorted({k for k, _ in pairs}))
        takes = ", ".join(f"{a} -> {b}" for a, b in sorted(dtypes))
        return (
            f"the library takes no {operands} operands accumulated in {c.dtype} (it takes {takes})"
        )
    store = blk.body
    assert isinstance(store, BufferStore)  # _update checked
    if list(store.indices) != ivars[:-1]:
        return "the result is not indexed by the spatial iterators in order"
    extents = {id(iv.var): iv.dom.extent for iv in blk.iter_vars}
    batch, i, j, k = ivars[:-3], ivars[-3], ivars[-2], ivars[-1]
    params = list(func.params)
    roles = _roles(x, y, batch, i, j, k, extents) or _roles(y, x, batch, i, j, k, extents)
    if roles is None:
        return "the operands are not A[.., i, k] and B[.., k, j] (or transposed) parameters"
    (a, trans_a), (b, trans_b) = roles
    if a.buffer not in params or b.buffer not in params or c in (a.buffer, b.buffer):
        return "an operand is computed inside the function (a fused prologue)"
    ia, ib = params.index(a.buffer), params.index(b.buffer)
    if c is params[-1] and len(stmts) == 1:
        return GemmMatch(ia, ib, trans_a, trans_b, None, (), str(c.dtype))
    return _split(func, root, stmts[1:], c, ia, ib, trans_a, trans_b)


def _roles(
    x: BufferLoad, y: BufferLoad, batch: list[Var], i: Var, j: Var, k: Var,
    extents: dict[int, Expr],
) -> tuple[tuple[BufferLoad, bool], tuple[BufferLoad, bool]] | None:  # fmt: skip
    a_k_last, b_k_last = _operand(x, batch, i, k, extents), _operand(y, batch, j, k, extents)
    if a_k_last is None or b_k_last is None:
        return None
    return (x, not a_k_last), (y, b_k_last)  # A is (M, K) untransposed, B is (K, N)


def _split(
    func: PrimFunc, root: BlockRealize, rest: list[Stmt], c: Buffer,
    ia: int, ib: int, trans_a: bool, trans_b: bool,
) -> GemmMatch | str:  # fmt: skip
    """The match with the blocks after the GEMM as an epilogue function."""
    allocs = list(root.block.alloc_buffers)
    if c not in allocs or not rest:
        return "the GEMM result is neither the output nor an intermediate the epilogue reads"
    read: list[Buffer] = []
    written: list[Buffer] = []

    def visit(n: Node) -> None:
        if isinstance(n, BufferLoad) and n.buffer not in read:
            read.append(n.buffer)
        if isinstance(n, BufferStore) and n.buffer not in written:
            written.append(n.buffer)

    for s in rest:
        post_order_visit(s, visit)
    inputs = list(func.params[:-1])
    if c in written or any(p in written for p in inputs):
        return "the epilogue writes the GEMM result or an input"
    used = tuple(n for n, p in enumerate(inputs) if p in read)
    body = rest[0] if len(rest) == 1 else SeqStmt(tuple(rest))
    new_root = root.update(
        block=root.block.update(body=body, alloc_buffers=tuple(b for b in allocs if b is not c))
    )
    params = (c, *(inputs[n] for n in used), func.params[-1])
    attrs = func.attrs.without("op_pattern")  # the graph-level pattern of the whole group
    shared = PrimFunc(params, new_root, attrs, f"{func.name}_epilogue")
    # its own variables and buffers: a module's functions share no definitions
    epilogue = from_json(to_json(shared))
    assert isinstance(epilogue, PrimFunc)
    return GemmMatch(ia, ib, trans_a, trans_b, epilogue, used, str(c.dtype))

"""Let an intermediate buffer live in the storage of the buffer its last stage writes.

Before: blocks are lowered to loops and allocations compacted
(:class:`~tilecraft.lower.CompactBufferAllocation`); buffers keep their logical (not yet
flattened) shapes.
After:  an ``Allocate``d buffer ``B`` whose last use is an element-wise stage ``C`` writing
``O`` is gone, and every access ``B[idx]`` under its allocation became ``O[idx + off]``. Softmax
thus writes its exponentials straight into the output row and scales that row in place,
instead of filling a row buffer and copying it out scaled.

The rewrite is made only when it provably keeps the meaning; otherwise nothing changes:

- ``C`` is a statement of the allocation's body (looking through nested allocations and
  sequences), the last one that mentions ``B``; it is a perfect loop nest (loops from 0) around
  one store ``O[e] = value`` where every load of ``B`` in ``value`` reads ``B[b]`` with the same
  indices ``b``, and nothing else in ``C`` (indices, loop bounds) mentions ``B`` or ``O``;
- ``B`` holds more than one element (a scalar stays in a register);
- ``O`` and ``B`` have the same dtype and rank, ``B``'s box is one contiguous run of ``O``
  laid out as in ``B`` (dimensions of extent 1, then one dimension, then ``O``'s whole
  dimensions: a row, a plane), ``off = e - b`` does not change inside the
  allocation (no loop or ``let`` variable bound there, no buffer load), and ``b`` is a bijective
  map of ``C``'s loops onto ``B``'s whole box: ``C`` reads each element of ``B`` once, at the
  iteration that writes the element of ``O`` it now lives in, and writes all of ``B``'s region
  ``off + box`` of ``O``;
- no statement of the allocation before ``C`` mentions ``O`` (``O`` is not read or written
  while it holds ``B``'s values);
- ``O`` is a parameter the function writes and never reads (an output, never an input: the
  runtime rejects outputs that share memory with another argument), or a buffer allocated
  around ``B``'s allocation; both have ``global`` scope (a ``local`` buffer is a register or
  scratch tile a schedule chose: it stays), and ``B`` is not named by a device intrinsic.

``PassContext(config={"lower.share_output_storage": False})`` turns the pass off.

Each iteration of a loop around the allocation (a parallel row loop included) gets its own
``off``: the region of ``O`` it borrows is the one that iteration's ``C`` writes, which no
other iteration touches unless the function already races.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..arith import Analyzer, detect_iter_map
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    ForKind,
    IntImm,
    LetStmt,
    Mutator,
    Node,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    seq,
    walk,
)
from ..ir.expr import DEVICE_INTRINSICS, Call
from ..ir.transform import FunctionPass, PassContext, register_pass_config

SHARE_OUTPUT_STORAGE = register_pass_config(
    "lower.share_output_storage",
    bool,
    True,
    "let an intermediate buffer live in the storage of the buffer its last stage writes",
)
"""Configuration key: ``PassContext(config={"lower.share_output_storage": False})`` keeps every
allocation."""


def _mentions(node: Node, buf: Buffer) -> bool:
    """True if ``node`` loads, stores or allocates ``buf``."""
    for n in walk(node):
        if isinstance(n, (BufferLoad, BufferStore, Allocate)) and n.buffer is buf:
            return True
    return False


def _loads(node: Node, buf: Buffer) -> list[BufferLoad]:
    return [n for n in walk(node) if isinstance(n, BufferLoad) and n.buffer is buf]


def _in_device_call(node: Node, buf: Buffer) -> bool:
    """True if a device intrinsic call under ``node`` names ``buf`` (an element address)."""
    for n in walk(node):
        if isinstance(n, Call) and n.op in DEVICE_INTRINSICS and _mentions(n, buf):
            return True
    return False


def _pure_outputs(func: PrimFunc) -> list[Buffer]:
    """Buffer parameters the function stores to and never loads from."""
    stored: set[int] = set()
    loaded: set[int] = set()
    for n in walk(func.body):
        if isinstance(n, BufferStore):
            stored.add(id(n.buffer))
        elif isinstance(n, BufferLoad):
            loaded.add(id(n.buffer))
    return [
        p for p in func.params if isinstance(p, Buffer) and id(p) in stored and id(p) not in loaded
    ]


def _statements(body: Stmt) -> list[Stmt]:
    """The statements run in order under an allocation: sequences and nested allocations
    are looked through."""
    out: list[Stmt] = []
    stack = [body]
    while stack:
        s = stack.pop()
        if isinstance(s, SeqStmt):
            stack.extend(reversed(s.stmts))
        elif isinstance(s, Allocate):
            stack.append(s.body)
        else:
            out.append(s)
    return out


def _bound_vars(body: Stmt) -> set[int]:
    """``id``s of the loop and ``let`` variables bound under ``body``."""
    out: set[int] = set()
    for n in walk(body):
        if isinstance(n, For):
            out.add(id(n.loop_var))
        elif isinstance(n, LetStmt):
            out.add(id(n.var))
    return out


def _loop_nest(stage: Stmt) -> tuple[list[For], BufferStore] | None:
    """The loops of a perfect nest around one store, or None."""
    loops: list[For] = []
    s = stage
    while isinstance(s, For):
        if s.kind is ForKind.THREAD_BINDING or not (isinstance(s.min, IntImm) and s.min.value == 0):
            return None
        loops.append(s)
        s = s.body
    if not isinstance(s, BufferStore):
        return None
    return loops, s


@dataclass(frozen=True)
class _Share:
    """``B[idx]`` becomes ``target[idx + offset]``."""

    target: Buffer
    offset: tuple[Expr, ...]


def _equal(a: Expr, b: Expr, ana: Analyzer) -> bool:
    """True if ``a == b`` provably (integers of one dtype)."""
    return a.dtype == b.dtype and ana.can_prove_equal(a, b)


def _same_indices(a: Sequence[Expr], b: Sequence[Expr], ana: Analyzer) -> bool:
    return all(_equal(x, y, ana) for x, y in zip(a, b, strict=True))


def _covers_box(b: Sequence[Expr], loops: list[For], buf: Buffer, ana: Analyzer) -> bool:
    """True if ``b`` maps the loops one to one onto the whole box of ``buf``."""
    iters = {lp.loop_var: Range(lp.min, lp.extent) for lp in loops}
    res = detect_iter_map(list(b), iters, check_level="bijective", analyzer=ana)
    if not res:
        return False
    for total, dim in zip(res.indices, buf.shape, strict=True):
        if not ana.can_prove_equal(total.base, 0):
            return False
        extent: Expr = IntImm(dim.dtype, 1)
        for split in total.args:
            if not (_equal(split.scale, extent, ana) and split.extent.dtype == dim.dtype):
                return False
            extent = extent * split.extent
        if not _equal(extent, dim, ana):
            return False
    return True


def _offset(
    store: BufferStore, b: Sequence[Expr], inner: set[int], ana: Analyzer
) -> tuple[Expr, ...] | None:
    """``store.indices - b`` when it is the same for every iteration under the allocation."""
    out = []
    for e, i in zip(store.indices, b, strict=True):
        if e.dtype != i.dtype:
            return None
        off = ana.simplify(e - i)
        for n in walk(off):
            if isinstance(n, BufferLoad) or (isinstance(n, Var) and id(n) in inner):
                return None
        out.append(off)
    return tuple(out)


def _one_element(buf: Buffer) -> bool:
    """True if ``buf`` holds one element: a scalar the C compiler keeps in a register, which
    would become a memory access (a reduction's accumulator read and written each step)."""
    return all(isinstance(d, IntImm) and d.value == 1 for d in buf.shape)


def _contiguous_part(buf: Buffer, out: Buffer, ana: Analyzer) -> bool:
    """True if a box of ``buf``'s shape is one contiguous run of ``out`` (unit dimensions,
    then one partial dimension, then whole ones), laid out as in ``buf``."""
    if len(out.shape) != len(buf.shape):
        return False
    dims = list(zip(buf.shape, out.shape, strict=True))
    k = 0
    while k < len(dims) and _equal(dims[k][0], IntImm(dims[k][0].dtype, 1), ana):
        k += 1
    return all(_equal(b, o, ana) for b, o in dims[k + 1 :])


def _stage_reads(stage: Stmt, loops: list[For], store: BufferStore, buf: Buffer) -> bool:
    """True if ``stage`` reads ``buf`` only in its stored value, at one index tuple, and
    reads nothing of the buffer it writes."""
    for lp in loops:
        if _mentions(lp.min, buf) or _mentions(lp.extent, buf):
            return False
        if _mentions(lp.min, store.buffer) or _mentions(lp.extent, store.buffer):
            return False
    if any(_mentions(i, buf) or _mentions(i, store.buffer) for i in store.indices):
        return False
    return bool(_loads(store.value, buf)) and not _loads(store.value, store.buffer)


def _plan(alloc: Allocate, targets: Sequence[Buffer]) -> _Share | None:
    """How ``alloc``'s buffer can share a target's storage, or None when unproven."""
    buf = alloc.buffer
    if buf.scope != "global" or _in_device_call(alloc.body, buf) or _one_element(buf):
        return None
    stmts = _statements(alloc.body)
    users = [k for k, s in enumerate(stmts) if _mentions(s, buf)]
    if not users:
        return None
    stage = stmts[users[-1]]
    nest = _loop_nest(stage)
    if nest is None:
        return None
    loops, store = nest
    out = store.buffer
    ana = Analyzer()
    if (
        not any(out is t for t in targets)
        or out.scope != "global"
        or out.dtype != buf.dtype
        or not _contiguous_part(buf, out, ana)
        or not _stage_reads(stage, loops, store, buf)
        or _in_device_call(alloc.body, out)
        or any(_mentions(s, out) for s in stmts[: users[-1]])
    ):
        return None
    reads = _loads(store.value, buf)
    b = reads[0].indices
    if not all(_same_indices(r.indices, b, ana) for r in reads[1:]):
        return None
    if not _covers_box(b, loops, buf, ana):
        return None
    offset = _offset(store, b, _bound_vars(alloc.body), ana)
    return None if offset is None else _Share(out, offset)


class _Redirect(Mutator):
    """Rewrite every access ``buf[idx]`` to ``share.target[idx + share.offset]``."""

    def __init__(self, buf: Buffer, share: _Share) -> None:
        super().__init__()
        self.buf = buf
        self.share = share
        self.ana = Analyzer()

    def _indices(self, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return tuple(
            i if isinstance(o, IntImm) and o.value == 0 else self.ana.simplify(i + o)
            for i, o in zip(indices, self.share.offset, strict=True)
        )

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:  # noqa: N802
        node = self.generic_visit(node)
        if node.buffer is not self.buf:
            return node
        return BufferLoad(self.share.target, self._indices(node.indices))

    def visit_BufferStore(self, node: BufferStore) -> Stmt:  # noqa: N802
        node = self.generic_visit(node)
        if node.buffer is not self.buf:
            return node
        return node.update(buffer=self.share.target, indices=self._indices(node.indices))


class _Sharer(Mutator):
    """Visit allocations innermost first; drop each one that can share a target's storage."""

    def __init__(self, outputs: Sequence[Buffer]) -> None:
        super().__init__()
        self.targets = list(outputs)

    def visit_Allocate(self, node: Allocate) -> Stmt:  # noqa: N802
        self.targets.append(node.buffer)
        body = self.visit(node.body)
        self.targets.pop()
        node = node.update(body=body)
        share = _plan(node, self.targets)
        if share is None:
            return node
        return _Redirect(node.buffer, share).visit(node.body)  # type: ignore[no-any-return]

    def visit_SeqStmt(self, node: SeqStmt) -> Stmt:  # noqa: N802
        new = self.generic_visit(node)
        return new if new is node else seq(*new.stmts)


class ShareOutputStorage(FunctionPass):
    """Let intermediate buffers live in the storage of the buffer their last stage writes
    element-wise (see the module docstring for when it applies)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Drop each ``Allocate`` of ``func`` that can borrow its consumer's storage."""
        if not PassContext.current().get_config(SHARE_OUTPUT_STORAGE.name):
            return func
        return func.update(body=_Sharer(_pure_outputs(func)).visit(func.body))

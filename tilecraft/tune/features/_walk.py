"""Collect the stores of a (lowered) function with the loops, guards and loads around them.

The walk sees flat code after lowering and, as a fallback, a function that still has blocks
(a block's iterator is bound to its value like a ``let``). Statements it does not know are
searched for children, so no node kind makes it fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import (
    Add,
    Allocate,
    And,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    CmpOp,
    Div,
    Expr,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    LetStmt,
    Max,
    Min,
    Mul,
    Node,
    Not,
    Or,
    PrimFunc,
    Select,
    SeqStmt,
    Sub,
    Var,
)
from ...ir.visitor import iter_children
from ...lower import AUTO_UNROLL
from ._layout import ARITH

_INDEX = {name: i for i, name in enumerate(ARITH)}


@dataclass(frozen=True, slots=True)
class Loop:
    """One loop around a store."""

    var: Var
    extent: int
    kind: ForKind
    thread: str | None
    auto_unroll: int


@dataclass(frozen=True, slots=True)
class Access:
    """One access of a buffer by a store (its write, or one of its loads)."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    write: bool


@dataclass(frozen=True, slots=True)
class Store:
    """A store, its enclosing loops (outer first), guards, operation counts and accesses."""

    loops: tuple[Loop, ...]
    guards: int
    counts: tuple[int, ...]
    accesses: tuple[Access, ...]
    lets: dict[int, Expr]


@dataclass
class Program:
    """What a walk found: the stores, and the allocations as (buffer, bytes)."""

    stores: list[Store] = field(default_factory=list)
    allocs: list[tuple[Buffer, int]] = field(default_factory=list)


def const_int(e: Expr | int, default: int = 1) -> int:
    """The value of a constant integer expression, else ``default``."""
    if isinstance(e, int):
        return e
    return e.value if isinstance(e, IntImm) else default


def buffer_bytes(buf: Buffer) -> int:
    """Bytes of ``buf`` (symbolic extents count as 1)."""
    n = buf.dtype.itemsize
    for s in buf.shape:
        n *= max(const_int(s), 0)
    return n


def _binary_slot(e: Expr) -> str | None:
    fl = e.dtype.is_float
    if isinstance(e, Add | Sub):
        return "float_add_sub" if fl else "int_add_sub"
    if isinstance(e, Mul):
        return "float_mul" if fl else "int_mul"
    if isinstance(e, Div | FloorDiv | FloorMod):
        return "float_div_mod" if fl else "int_div_mod"
    if isinstance(e, Min | Max):
        return "float_min_max" if fl else "int_cmp_min_max"
    return None


def _slot(e: Node) -> str | None:
    """Which operation count ``e`` adds to (None: it adds to none)."""
    if isinstance(e, CmpOp):
        return "float_cmp" if e.a.dtype.is_float else "int_cmp_min_max"
    if isinstance(e, And | Or | Not):
        return "bool_op"
    if isinstance(e, Select):
        return "select"
    if isinstance(e, Cast):
        return "cast"
    if isinstance(e, Call):
        return "float_math_call"
    if isinstance(e, Expr):
        return _binary_slot(e)
    return None


def count_ops(exprs: list[Expr], counts: list[int], loads: list[BufferLoad]) -> None:
    """Add the operations of ``exprs`` to ``counts`` and their loads to ``loads``."""
    stack: list[Node] = list(exprs)
    while stack:
        e = stack.pop()
        slot = _slot(e)
        if slot is not None:
            counts[_INDEX[slot]] += 1
        if isinstance(e, BufferLoad):
            loads.append(e)
        stack.extend(iter_children(e))


class _Walker:
    """Depth-first walk keeping the loops, guards and bindings above the current statement."""

    def __init__(self) -> None:
        self.loops: list[Loop] = []
        self.guards = 0
        self.lets: dict[int, Expr] = {}
        self.program = Program()

    def walk(self, node: Node) -> None:
        if isinstance(node, For):
            self._for(node)
        elif isinstance(node, BufferStore):
            self._store(node)
        elif isinstance(node, IfThenElse):
            self.guards += 1
            self.walk(node.then_case)
            if node.else_case is not None:
                self.walk(node.else_case)
            self.guards -= 1
        elif isinstance(node, LetStmt):
            self.lets[id(node.var)] = node.value
            self.walk(node.body)
        elif isinstance(node, Allocate):
            self.program.allocs.append((node.buffer, buffer_bytes(node.buffer)))
            self.walk(node.body)
        elif isinstance(node, BlockRealize):
            self._block(node)
        elif isinstance(node, SeqStmt):
            for s in node.stmts:
                self.walk(s)
        else:
            for child in iter_children(node):
                if not isinstance(child, Expr):
                    self.walk(child)

    def _for(self, node: For) -> None:
        unroll = node.annotations.get(AUTO_UNROLL, 0)
        extent = max(const_int(node.extent), 0)
        auto = int(unroll) if isinstance(unroll, int) else 0
        self.loops.append(Loop(node.loop_var, extent, node.kind, node.thread, auto))
        self.walk(node.body)
        self.loops.pop()

    def _block(self, node: BlockRealize) -> None:
        block = node.block
        for iv, value in zip(block.iter_vars, node.iter_values, strict=False):
            self.lets[id(iv.var)] = value
        for buf in block.alloc_buffers:
            self.program.allocs.append((buf, buffer_bytes(buf)))
        if block.init is not None:
            self.walk(block.init)
        self.walk(block.body)

    def _store(self, node: BufferStore) -> None:
        counts = [0] * len(ARITH)
        loads: list[BufferLoad] = []
        count_ops([node.value, *node.indices], counts, loads)
        accesses = [Access(node.buffer, node.indices, True)]
        accesses += [Access(ld.buffer, ld.indices, False) for ld in loads]
        store = Store(tuple(self.loops), self.guards, tuple(counts), tuple(accesses), self.lets)
        self.program.stores.append(store)


def collect(func: PrimFunc) -> Program:
    """The stores and allocations of ``func``."""
    walker = _Walker()
    walker.walk(func.body)
    return walker.program

"""The numbers the vectorizing CPU rules share, and read-only questions about a schedule's IR.

:class:`VectorConfig` is the base of the ``Config`` of ``Reduction``, ``GeneralReduction``,
``Injective`` and ``Fallback``: SIMD width and core count from the target, the work below which
a kernel stays on one thread, how many vectors of partial sums a reduction keeps, the unroll
limit. The helpers below only read ``sch.func``; nothing here changes a schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from ...ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    Call,
    DataType,
    Expr,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IterKind,
    LetStmt,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    uses_var,
)
from ...ir.visitor import iter_children
from ...schedule import BlockRV, LoopRV, Schedule
from ...target import Target

_C = TypeVar("_C", bound="VectorConfig")


@dataclass(frozen=True)
class VectorConfig:
    """Per-target numbers of the vectorizing CPU rules.

    Attributes
    ----------
    vector_bits
        Width of one SIMD register (``Target.simd_bits``): 512 on AVX-512, 256 on AVX2.
    num_cores
        Cores a kernel may use (``Target.num_cores``); 1 disables ``parallel``.
    min_parallel_work
        Elements a kernel must touch before its outer loop runs in parallel: below this the
        OpenMP fork/join (a few microseconds) costs more than the work. Symbolic extents
        count as enough work.
    reduce_vectors
        Vectors of independent partial results a vectorized reduction keeps (more hide the
        latency of the add; the reduction length must be a multiple of their total width).
    unroll_max
        Longest loop the rules unroll (the fold of the partial results).
    chunk_vectors
        Vectors per iteration of a single loop cut into parallel chunks.
    """

    vector_bits: int = 256
    num_cores: int = 1
    min_parallel_work: int = 1 << 15
    reduce_vectors: int = 2
    unroll_max: int = 32
    chunk_vectors: int = 4

    @classmethod
    def for_target(cls: type[_C], target: Target) -> _C:
        """The defaults with the SIMD width and core count of ``target``."""
        return cls(vector_bits=max(128, target.simd_bits), num_cores=max(1, target.num_cores))

    def lanes(self, dtype: DataType) -> int:
        """Elements of ``dtype`` in one vector register (between 4 and 64)."""
        bits = max(8, dtype.bits * dtype.lanes)
        return max(4, min(64, self.vector_bits // bits))

    def worth_parallel(self, work: int | None, extent: int | None) -> bool:
        """Whether a loop of ``extent`` iterations over ``work`` elements should be parallel."""
        if self.num_cores < 2 or (extent is not None and extent < 2):
            return False
        return work is None or work >= self.min_parallel_work


def const_int(e: int | Expr) -> int | None:
    """The value of a constant extent, None for a symbolic one."""
    if isinstance(e, int):
        return e
    return e.value if isinstance(e, IntImm) else None


def product(values: Sequence[int | None]) -> int | None:
    """The product of extents; None when one is symbolic."""
    total = 1
    for v in values:
        if v is None:
            return None
        total *= v
    return total


def loop_extent(sch: Schedule, loop: LoopRV) -> int | None:
    """The constant extent of ``loop``; None when symbolic."""
    node = sch.get(loop)
    return const_int(node.extent) if isinstance(node, For) else None


def find_realize(func: PrimFunc, name: str) -> BlockRealize | None:
    """The BlockRealize of block ``name`` in ``func`` (iterative walk)."""
    stack: list[Stmt] = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            if s.block.name == name:
                return s
            stack.append(s.block)
        elif isinstance(s, Block):
            stack.append(s.body)
            if s.init is not None:
                stack.append(s.init)
        elif isinstance(s, For | LetStmt | Allocate):
            stack.append(s.body)
        elif isinstance(s, SeqStmt):
            stack.extend(s.stmts)
        elif isinstance(s, IfThenElse):
            stack.append(s.then_case)
            if s.else_case is not None:
                stack.append(s.else_case)
    return None


def scheduled_loop(func: PrimFunc) -> str | None:
    """The name of a loop of ``func`` that is not serial (already scheduled), if any."""
    stack: list[Stmt] = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, For) and s.kind is not ForKind.SERIAL:
            return s.loop_var.name
        if isinstance(s, BlockRealize):
            stack.append(s.block)
        elif isinstance(s, Block):
            stack.extend([s.body] if s.init is None else [s.body, s.init])
        elif isinstance(s, For | LetStmt | Allocate):
            stack.append(s.body)
        elif isinstance(s, SeqStmt):
            stack.extend(s.stmts)
        elif isinstance(s, IfThenElse):
            stack.extend([s.then_case] if s.else_case is None else [s.then_case, s.else_case])
    return None


def loop_kinds(sch: Schedule, block: BlockRV, loops: Sequence[LoopRV]) -> list[set[IterKind]]:
    """For each loop, the kinds of ``block``'s iterators whose binding uses the loop."""
    realize = find_realize(sch.func, block.name)
    if realize is None:
        return [set() for _ in loops]
    out: list[set[IterKind]] = []
    for loop in loops:
        var = loop.var
        kinds = {
            iv.kind
            for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
            if var is not None and uses_var(value, var)
        }
        out.append(kinds)
    return out


def loops_below(sch: Schedule, block: BlockRV, loop: LoopRV) -> list[LoopRV]:
    """The loops of ``block`` inside ``loop`` (empty when ``block`` is not under it)."""
    loops = sch.get_loops(block)
    at = next((n for n, lp in enumerate(loops) if lp.var is loop.var), None)
    return loops[at + 1 :] if at is not None else []


def bound_alone(sch: Schedule, block: BlockRV, loop: LoopRV) -> bool:
    """Whether some iterator of ``block`` is bound to exactly ``loop``'s variable."""
    realize = find_realize(sch.func, block.name)
    return realize is not None and any(value is loop.var for value in realize.iter_values)


def block_node(sch: Schedule, block: BlockRV) -> Block | None:
    """The Block a handle names (None for a stale handle)."""
    realize = find_realize(sch.func, block.name)
    return realize.block if realize is not None else None


def has_call(expr: Stmt | Expr) -> bool:
    """Whether ``expr`` calls an intrinsic (exp, cos, ...): costly to recompute."""
    stack: list[Node] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Call):
            return True
        if not isinstance(node, Buffer):
            stack.extend(iter_children(node))
    return False


def store_dtype(block: Block) -> DataType | None:
    """The dtype of the first buffer ``block`` writes."""
    return block.writes[0].buffer.dtype if block.writes else None


def iter_var_of_loop(sch: Schedule, block: BlockRV, loop: LoopRV) -> Var | None:
    """The iterator of ``block`` bound to exactly ``loop``'s variable, if any."""
    realize = find_realize(sch.func, block.name)
    if realize is None:
        return None
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if value is loop.var:
            return iv.var
    return None

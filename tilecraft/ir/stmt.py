"""Statements: stores, loops, sequences, conditionals, bindings, allocations and blocks.

A *block* is the unit schedules work on: it names iterators (``IterVar``: spatial, reduce or
opaque, each with a domain), the buffer regions it reads and writes, an optional ``init``
statement run before the first reduction step, buffers it allocates, and a body. A
``BlockRealize`` places a block in the loop nest by binding each iterator to an expression
of the enclosing loop variables, under a predicate.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import IRError
from .buffer import Buffer
from .expr import Expr, ExprLike, IntImm, Range, Var, as_expr, check_indices
from .node import Attrs, Node, as_attrs


class Stmt(Node):
    """Base of all statements."""

    __slots__ = ()
    __hash__ = object.__hash__


class ForKind(enum.Enum):
    """How a loop executes."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"


THREAD_TAGS = (
    "blockIdx.x", "blockIdx.y", "blockIdx.z",
    "threadIdx.x", "threadIdx.y", "threadIdx.z",
    "vthread", "vthread.x", "vthread.y", "vthread.z",
)  # fmt: skip


class IterKind(enum.Enum):
    """The role of a block iterator."""

    SPATIAL = "spatial"
    REDUCE = "reduce"
    OPAQUE = "opaque"


def _check_stmt(where: str, value: Any) -> None:
    if not isinstance(value, Stmt):
        raise IRError(f"{where}: expected a statement, got {type(value).__name__}")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferStore(Stmt):
    """``buffer[indices] = value``; ``value`` must have the buffer's dtype."""

    buffer: Buffer
    value: Expr
    indices: tuple[Expr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", tuple(as_expr(i) for i in self.indices))
        check_indices("BufferStore", self.buffer, self.indices)
        if not isinstance(self.value, Expr):
            raise IRError(f"BufferStore {self.buffer.name}: value must be an expression")
        if self.value.dtype != self.buffer.dtype:
            raise IRError(
                f"BufferStore {self.buffer.name}: dtype mismatch: storing {self.value.dtype} "
                f"into a {self.buffer.dtype} buffer"
            )

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class For(Stmt):
    """``for loop_var in range(min, min + extent)`` executed as ``kind``.

    ``thread`` names the hardware index (``"threadIdx.x"``) and is set iff ``kind`` is
    ``THREAD_BINDING``. ``annotations`` carry hints such as unroll pragmas.
    """

    loop_var: Var
    min: Expr
    extent: Expr
    kind: ForKind
    body: Stmt
    thread: str | None = None
    annotations: Attrs = field(default_factory=Attrs)

    def __post_init__(self) -> None:
        if not isinstance(self.loop_var, Var) or not self.loop_var.dtype.is_integer:
            raise IRError(f"For: loop variable must be an integer Var, got {self.loop_var!r}")
        dt = self.loop_var.dtype
        object.__setattr__(self, "min", as_expr(self.min, dt))
        object.__setattr__(self, "extent", as_expr(self.extent, dt))
        object.__setattr__(self, "annotations", as_attrs(self.annotations))
        name = self.loop_var.name
        if self.min.dtype != dt or self.extent.dtype != dt:
            raise IRError(
                f"For {name}: min/extent dtypes ({self.min.dtype}, {self.extent.dtype}) must "
                f"match the loop variable's {dt}"
            )
        if not isinstance(self.kind, ForKind):
            raise IRError(f"For {name}: kind must be a ForKind, got {self.kind!r}")
        if (self.kind is ForKind.THREAD_BINDING) != (self.thread is not None):
            raise IRError(
                f"For {name}: thread= is set iff kind is THREAD_BINDING "
                f"(kind={self.kind.value}, thread={self.thread!r})"
            )
        if self.thread is not None and self.thread not in THREAD_TAGS:
            raise IRError(
                f"For {name}: unknown thread tag {self.thread!r}; expected one of {THREAD_TAGS}"
            )
        if isinstance(self.extent, IntImm) and self.extent.value < 0:
            raise IRError(f"For {name}: negative extent {self.extent.value}")
        _check_stmt(f"For {name}", self.body)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SeqStmt(Stmt):
    """Statements executed in order (at least one)."""

    stmts: tuple[Stmt, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "stmts", tuple(self.stmts))
        if not self.stmts:
            raise IRError("SeqStmt: needs at least one statement")
        for s in self.stmts:
            _check_stmt("SeqStmt", s)

    __hash__ = object.__hash__


def seq(*stmts: Stmt) -> Stmt:
    """Sequence ``stmts``, flattening nested SeqStmts; a single statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IfThenElse(Stmt):
    """``if condition: then_case else: else_case``."""

    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.condition, Expr) or not self.condition.dtype.is_bool:
            raise IRError(
                f"IfThenElse: condition must be a bool expression, got {self.condition!r}"
            )
        _check_stmt("IfThenElse", self.then_case)
        if self.else_case is not None:
            _check_stmt("IfThenElse", self.else_case)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Evaluate(Stmt):
    """Evaluate an expression for its side effects."""

    value: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", as_expr(self.value))

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LetStmt(Stmt):
    """Bind ``var`` to ``value`` within ``body``."""

    var: Var
    value: Expr
    body: Stmt

    def __post_init__(self) -> None:
        if not isinstance(self.var, Var):
            raise IRError(f"LetStmt: expected a Var, got {self.var!r}")
        object.__setattr__(self, "value", as_expr(self.value, self.var.dtype))
        if self.value.dtype != self.var.dtype:
            raise IRError(
                f"LetStmt {self.var.name}: value dtype {self.value.dtype} differs from the "
                f"variable's {self.var.dtype}"
            )
        _check_stmt(f"LetStmt {self.var.name}", self.body)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Allocate(Stmt):
    """Allocate storage for ``buffer`` (in its scope) for the duration of ``body``."""

    buffer: Buffer
    body: Stmt

    def __post_init__(self) -> None:
        if not isinstance(self.buffer, Buffer):
            raise IRError(f"Allocate: expected a Buffer, got {self.buffer!r}")
        _check_stmt(f"Allocate {self.buffer.name}", self.body)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferRegion(Node):
    """A rectangular region of a buffer: one :class:`Range` per dimension."""

    buffer: Buffer
    region: tuple[Range, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "region", tuple(self.region))
        if not isinstance(self.buffer, Buffer):
            raise IRError(f"BufferRegion: expected a Buffer, got {self.buffer!r}")
        if len(self.region) != self.buffer.ndim:
            raise IRError(
                f"BufferRegion {self.buffer.name}: {len(self.region)} ranges for a buffer of "
                f"rank {self.buffer.ndim}"
            )
        for r in self.region:
            if not isinstance(r, Range):
                raise IRError(f"BufferRegion {self.buffer.name}: expected Range, got {r!r}")

    @staticmethod
    def full(buffer: Buffer) -> BufferRegion:
        """The whole of ``buffer``."""
        return BufferRegion(buffer, tuple(Range(as_expr(0, s.dtype), s) for s in buffer.shape))

    @staticmethod
    def point(buffer: Buffer, indices: Sequence[ExprLike]) -> BufferRegion:
        """The single element ``buffer[indices]``."""
        idx = [as_expr(i) for i in indices]
        return BufferRegion(buffer, tuple(Range(i, as_expr(1, i.dtype)) for i in idx))

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IterVar(Node):
    """A block iterator: a variable, its domain and its role."""

    var: Var
    dom: Range
    kind: IterKind

    def __post_init__(self) -> None:
        if not isinstance(self.var, Var):
            raise IRError(f"IterVar: expected a Var, got {self.var!r}")
        if not isinstance(self.dom, Range):
            raise IRError(
                f"IterVar {self.var.name}: a block iterator needs a domain Range, got {self.dom!r}"
            )
        if not isinstance(self.kind, IterKind):
            raise IRError(f"IterVar {self.var.name}: kind must be an IterKind, got {self.kind!r}")
        if self.dom.extent.dtype != self.var.dtype:
            raise IRError(
                f"IterVar {self.var.name}: domain dtype {self.dom.extent.dtype} differs from "
                f"the variable's {self.var.dtype}"
            )

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Block(Stmt):
    """A named unit of computation with declared iterators and accessed regions."""

    name: str
    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    annotations: Attrs = field(default_factory=Attrs)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise IRError(f"Block: name must be a non-empty string, got {self.name!r}")
        for attr in ("iter_vars", "reads", "writes", "alloc_buffers"):
            object.__setattr__(self, attr, tuple(getattr(self, attr)))
        object.__setattr__(self, "annotations", as_attrs(self.annotations))
        where = f"Block {self.name!r}"
        for iv in self.iter_vars:
            if not isinstance(iv, IterVar):
                raise IRError(f"{where}: iter_vars must be IterVars, got {iv!r}")
        if len({id(iv.var) for iv in self.iter_vars}) != len(self.iter_vars):
            raise IRError(f"{where}: the same variable is used by two block iterators")
        for r in (*self.reads, *self.writes):
            if not isinstance(r, BufferRegion):
                raise IRError(f"{where}: reads/writes must be BufferRegions, got {r!r}")
        for b in self.alloc_buffers:
            if not isinstance(b, Buffer):
                raise IRError(f"{where}: alloc_buffers must be Buffers, got {b!r}")
        _check_stmt(where, self.body)
        if self.init is not None:
            _check_stmt(f"{where} init", self.init)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BlockRealize(Stmt):
    """Execute ``block`` with its iterators bound to ``iter_values`` when ``predicate`` holds."""

    iter_values: tuple[Expr, ...]
    predicate: Expr
    block: Block

    def __post_init__(self) -> None:
        if not isinstance(self.block, Block):
            raise IRError(f"BlockRealize: expected a Block, got {self.block!r}")
        where = f"BlockRealize of {self.block.name!r}"
        vals = tuple(as_expr(v) for v in self.iter_values)
        object.__setattr__(self, "iter_values", vals)
        object.__setattr__(self, "predicate", as_expr(self.predicate))
        if len(vals) != len(self.block.iter_vars):
            raise IRError(f"{where}: {len(vals)} values for {len(self.block.iter_vars)} iterators")
        for v, iv in zip(vals, self.block.iter_vars, strict=True):
            if v.dtype != iv.var.dtype:
                raise IRError(
                    f"{where}: value for {iv.var.name} has dtype {v.dtype}, expected {iv.var.dtype}"
                )
        if not self.predicate.dtype.is_bool:
            raise IRError(f"{where}: predicate must be bool, got {self.predicate.dtype}")

    __hash__ = object.__hash__


def block_realize(
    block: Block,
    iter_values: Sequence[ExprLike] = (),
    predicate: ExprLike = True,
) -> BlockRealize:
    """Convenience: a BlockRealize with a default ``True`` predicate."""
    return BlockRealize(tuple(as_expr(v) for v in iter_values), as_expr(predicate), block)


def make_annotations(value: Mapping[str, Any] | None) -> Attrs:
    """Coerce a dict of annotations to :class:`Attrs`."""
    return as_attrs(value)

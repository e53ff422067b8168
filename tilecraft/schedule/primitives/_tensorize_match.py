"""Structural matching of a block's body against a tensor intrinsic's description.

Package-private. :func:`match_description` walks the description's root-block body and the
block's body in parallel. Loops must agree in constant extents (their kinds may differ, the
loops disappear), blocks in iterator kinds and constant domains, expressions in node class,
dtype and constants; variables are paired where they are defined. Each description buffer is
bound to one buffer of the block (same dtype and storage scope) the first time it is met.
Buffer indices are compared only after the walk: the block's region of the bound buffer
gives the *offset* of the tile (its minimum per dimension; leading dimensions beyond the
description's rank must have extent 1), and every access must satisfy
``actual_index == offset + description_index`` (with the paired variables substituted),
proved by the analyzer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...arith import Analyzer
from ...ir import (
    Add,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Expr,
    FloatImm,
    For,
    IntImm,
    Mul,
    Node,
    Range,
    SeqStmt,
    Stmt,
    Var,
    substitute,
)
from ...ir.visitor import iter_children
from .index_map import const_value

_SCOPE_MATCH = {"shared.dyn": "shared"}
"""A block buffer of a key scope matches an intrinsic's buffer of the value scope: shared
memory sized at launch is shared memory."""


class MismatchError(Exception):
    """The block does not have the description's form; ``args[0]`` says where."""


@dataclass(frozen=True)
class BufferBinding:
    """A description buffer bound to a block buffer, with the tile's offset."""

    actual: Buffer
    offset: tuple[Expr, ...]


@dataclass
class _Matcher:
    vars: dict[int, tuple[Var, Expr]] = field(default_factory=dict)
    bufs: dict[int, Buffer] = field(default_factory=dict)
    accesses: list[tuple[Buffer, tuple[Expr, ...], tuple[Expr, ...]]] = field(default_factory=list)

    # statements ---------------------------------------------------------------------------
    def stmt(self, d: Stmt, a: Stmt) -> None:
        if isinstance(d, SeqStmt) and isinstance(a, SeqStmt):
            if len(d.stmts) != len(a.stmts):
                raise MismatchError("sequences of different lengths")
            for x, y in zip(d.stmts, a.stmts, strict=True):
                self.stmt(x, y)
        elif isinstance(d, For) and isinstance(a, For):
            self.loop(d, a)
        elif isinstance(d, BlockRealize) and isinstance(a, BlockRealize):
            self.block(d.block, a.block)
            for dv, av in zip(d.iter_values, a.iter_values, strict=True):
                self.expr(dv, av)
            self.expr(d.predicate, a.predicate)
        elif isinstance(d, BufferStore) and isinstance(a, BufferStore):
            self.buffer(d.buffer, a.buffer)
            self.accesses.append((d.buffer, d.indices, a.indices))
            self.expr(d.value, a.value)
        else:
            raise MismatchError(
                f"expected {type(d).__name__} where the block has {type(a).__name__}"
            )

    def loop(self, d: For, a: For) -> None:
        if const_value(d.min) != const_value(a.min) or const_value(d.extent) is None:
            raise MismatchError(f'loop "{a.loop_var.name}" starts elsewhere')
        if const_value(d.extent) != const_value(a.extent):
            raise MismatchError(
                f'loop "{a.loop_var.name}" has extent {a.extent}, the intrinsic {d.extent}'
            )
        if a.thread is not None:
            raise MismatchError(f'loop "{a.loop_var.name}" is thread-bound')
        self.vars[id(d.loop_var)] = (d.loop_var, a.loop_var)
        self.stmt(d.body, a.body)

    def block(self, d: Block, a: Block) -> None:
        if len(d.iter_vars) != len(a.iter_vars):
            raise MismatchError(f'block "{a.name}" has {len(a.iter_vars)} iterators')
        for x, y in zip(d.iter_vars, a.iter_vars, strict=True):
            if x.kind is not y.kind or const_value(x.dom.extent) != const_value(y.dom.extent):
                raise MismatchError(f'iterator "{y.var.name}" of "{a.name}" differs')
            self.vars[id(x.var)] = (x.var, y.var)
        if (d.init is None) != (a.init is None):
            raise MismatchError(f'block "{a.name}" has an init where the intrinsic has none')
        if d.alloc_buffers or a.alloc_buffers:
            raise MismatchError(f'block "{a.name}" allocates buffers')
        if d.init is not None and a.init is not None:
            self.stmt(d.init, a.init)
        self.stmt(d.body, a.body)

    def buffer(self, d: Buffer, a: Buffer) -> None:
        bound = self.bufs.get(id(d))
        if bound is None:
            if d.dtype != a.dtype or _SCOPE_MATCH.get(d.scope, d.scope) != _SCOPE_MATCH.get(
                a.scope, a.scope
            ):
                raise MismatchError(
                    f'buffer "{a.name}" is {a.dtype} in scope "{a.scope}", the intrinsic '
                    f'expects {d.dtype} in scope "{d.scope}"'
                )
            if any(b is a for b in self.bufs.values()):
                raise MismatchError(f'buffer "{a.name}" stands for two intrinsic buffers')
            self.bufs[id(d)] = a
        elif bound is not a:
            raise MismatchError(f'"{a.name}" where the intrinsic uses "{bound.name}"')

    # expressions --------------------------------------------------------------------------
    def expr(self, d: Expr, a: Expr) -> None:
        if isinstance(d, Var):
            pair = self.vars.get(id(d))
            if pair is None or pair[1] is not a:
                raise MismatchError(f"variable {a!r} where the intrinsic uses {d.name}")
            return
        if isinstance(d, BufferLoad) and isinstance(a, BufferLoad):
            self.buffer(d.buffer, a.buffer)
            self.accesses.append((d.buffer, d.indices, a.indices))
            return
        if type(d) is not type(a) or d.dtype != a.dtype:
            raise MismatchError(f"{a!r} where the intrinsic computes {d!r}")
        if isinstance(d, IntImm | FloatImm):
            if d.value != getattr(a, "value", None):
                raise MismatchError(f"constant {a!r} where the intrinsic uses {d!r}")
            return
        if isinstance(d, Call) and d.op != a.op:  # type: ignore[attr-defined]
            raise MismatchError(f"{a!r} where the intrinsic calls {d.op}")
        if isinstance(d, Add | Mul):
            self.commutative(d, a)
            return
        self.children(d, a)

    def commutative(self, d: Expr, a: Expr) -> None:
        """``a`` matches ``d`` with its operands in either order."""
        saved = (dict(self.vars), dict(self.bufs), list(self.accesses))
        try:
            self.children(d, a)
        except MismatchError as first:
            self.vars, self.bufs, self.accesses = dict(saved[0]), dict(saved[1]), list(saved[2])
            try:
                self.expr(d.a, a.b)  # type: ignore[attr-defined]
                self.expr(d.b, a.a)  # type: ignore[attr-defined]
            except MismatchError:
                raise first from None

    def children(self, d: Node, a: Node) -> None:
        dc, ac = list(iter_children(d)), list(iter_children(a))
        if len(dc) != len(ac):
            raise MismatchError(f"{a!r} where the intrinsic computes {d!r}")
        for x, y in zip(dc, ac, strict=True):
            if not (isinstance(x, Expr) and isinstance(y, Expr)):
                raise MismatchError(f"{a!r} where the intrinsic computes {d!r}")
            self.expr(x, y)


def _offset(d: Buffer, region: Sequence[Range]) -> tuple[Expr, ...]:
    """The tile offset of a block region matching description buffer ``d``."""
    shape = d.static_shape() or ()
    lead = len(region) - len(shape)
    if lead < 0:
        raise MismatchError(f"a region of rank {len(region)} for a rank-{len(shape)} tile")
    for k, r in enumerate(region):
        want = 1 if k < lead else shape[k - lead]
        if const_value(r.extent) != want:
            raise MismatchError(
                f"the block's region of dimension {k} has extent {r.extent}, the tile {want}"
            )
    return tuple(r.min for r in region)


def _region_of(block: Block, buf: Buffer) -> Sequence[Range]:
    regions: list[BufferRegion] = [r for r in (*block.writes, *block.reads) if r.buffer is buf]
    if not regions:
        raise MismatchError(f'block "{block.name}" does not declare its access of "{buf.name}"')
    first = regions[0].region
    ana = Analyzer()
    for other in regions[1:]:
        for x, y in zip(first, other.region, strict=True):
            if not (ana.can_prove_equal(x.min, y.min) and ana.can_prove_equal(x.extent, y.extent)):
                raise MismatchError(f'block "{block.name}" reads and writes different tiles')
    return first


def match_description(desc_root: Block, block: Block) -> dict[int, BufferBinding]:
    """Bind the description's buffers (by ``id``) to the block's buffers with offsets.

    Raises
    ------
    MismatchError
        Naming the first difference.
    """
    m = _Matcher()
    m.stmt(desc_root.body, block.body)
    out: dict[int, BufferBinding] = {}
    descs = {id(r.buffer): r.buffer for r in (*desc_root.reads, *desc_root.writes)}
    for key, actual in m.bufs.items():
        d = descs.get(key)
        if d is None:
            raise MismatchError(f'"{actual.name}" matches a buffer the intrinsic does not declare')
        out[key] = BufferBinding(actual, _offset(d, _region_of(block, actual)))
    ana = Analyzer()
    vmap = dict(m.vars.values())
    for d_buf, d_idx, a_idx in m.accesses:
        binding = out[id(d_buf)]
        lead = len(a_idx) - len(d_idx)
        for k, a_i in enumerate(a_idx):
            want = binding.offset[k]
            if k >= lead:
                want = want + substitute(d_idx[k - lead], vmap)
            if not ana.can_prove_equal(a_i, want):
                raise MismatchError(
                    f'"{binding.actual.name}" is indexed at {a_i!r} where the intrinsic reads '
                    f"{want!r}"
                )
    return out

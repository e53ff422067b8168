"""``verify(func)``: check that a PrimFunc (block-level, scheduled or lowered) is well formed.

Checks, each raising :class:`~tilecraft.errors.IRError` that names the function, the block and
the access:

* every variable is defined before use: parameters and the variables of parameter buffer
  shapes at entry; loop, block-iterator and ``LetStmt`` variables inside their statement;
  buffers are parameters, ``alloc_buffers`` of an enclosing block or an enclosing ``Allocate``;
* block names are unique;
* block ``reads``/``writes`` agree with the body: a buffer loaded directly in a block (not in
  a nested block) is in its reads, or in its writes (a reduction's ``C[i] = C[i] + ...``); a
  buffer stored is in its writes; buffers the block allocates are exempt. The root block
  (the function body's iterator-free block without reads or writes) declares nothing;
* provable out-of-bounds accesses, accesses outside the declared region, and block iterator
  bindings outside their domains. These need arithmetic and live in
  :mod:`tilecraft.arith.verify_bounds`, a layer above, reached through ``importlib`` at call
  time (the one hook from ``ir`` into ``arith``; ``tests/test_layering.py`` documents it).

Zero false positives is the rule: a check that cannot decide says nothing. Bounds errors are
reported only with a witness, an iteration that provably runs and goes out of range for every
size that runs it (see :mod:`tilecraft.arith.verify_bounds`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import IRError
from .buffer import Buffer
from .expr import BufferLoad, Expr, Var
from .function import PrimFunc
from .module import IRModule
from .node import Node
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)
from .visitor import iter_children, node_fields

_BOUNDS_MODULE = "tilecraft.arith.verify_bounds"


def verify(node: PrimFunc | IRModule) -> None:
    """Raise :class:`~tilecraft.errors.IRError` if ``node`` (or a PrimFunc of it) is malformed.

    Parameters
    ----------
    node
        A PrimFunc, or an IRModule whose PrimFuncs are all checked (other functions are
        skipped).

    Raises
    ------
    IRError
        ``verify: function 'f', block 'b': <what is wrong, with the access>``.
    """
    if isinstance(node, IRModule):
        for _, func in node.prim_funcs():
            _verify_function(func)
        return
    if isinstance(node, PrimFunc):
        _verify_function(node)
        return
    raise IRError(f"verify: expected a PrimFunc or IRModule, got {type(node).__name__}")


def _verify_function(func: PrimFunc) -> None:
    _Structure(func).run()
    # arith is a layer above ir: looked up at call time, never imported at module level
    bounds = importlib.import_module(_BOUNDS_MODULE)
    bounds.check_bounds(func)


def verify_error(func: PrimFunc, block: Block | None, message: str) -> IRError:
    """The error ``verify: function 'f', block 'b': message``."""
    where = f"function {func.name!r}" + (f", block {block.name!r}" if block is not None else "")
    return IRError(f"verify: {where}: {message}")


def access_text(buffer: Buffer, indices: Sequence[Expr]) -> str:
    """``A[vi, vk + 1]`` for an access of ``buffer``."""
    return f"{buffer.name}[{', '.join(repr(i) for i in indices)}]"


def region_text(region: BufferRegion) -> str:
    """``A[vi, 0:4]`` for a declared region."""
    parts = []
    for r in region.region:
        if _is_one(r.extent):
            parts.append(repr(r.min))
            continue
        lo, ext = getattr(r.min, "value", None), getattr(r.extent, "value", None)
        static = isinstance(lo, int) and isinstance(ext, int)
        end = str(lo + ext) if static else repr(r.min + r.extent)  # type: ignore[operator]
        parts.append(f"{r.min!r}:{end}")
    return f"{region.buffer.name}[{', '.join(parts)}]"


def _is_one(e: Expr) -> bool:
    return getattr(e, "value", None) == 1 and e.dtype.is_integer


def is_root_block(func: PrimFunc, realize: BlockRealize) -> bool:
    """True for the function body's iterator-free block that declares no reads or writes."""
    b = realize.block
    return func.body is realize and not b.iter_vars and not b.reads and not b.writes


@dataclass
class _Frame:
    """The innermost block around the statements being checked."""

    block: Block
    exempt: bool
    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)
    local: set[int] = field(default_factory=set)


_Task = Callable[[], object]


class _Structure:
    """Definitions before use, unique block names and reads/writes membership."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.vars: dict[int, int] = {}
        self.bufs: dict[int, int] = {}
        self.names: set[str] = set()
        self.frames: list[_Frame] = []
        self.todo: list[Stmt | _Task] = []

    def fail(self, message: str) -> IRError:
        return verify_error(self.func, self.frames[-1].block if self.frames else None, message)

    # scopes ------------------------------------------------------------------------------
    def define(self, table: dict[int, int], key: int) -> None:
        table[key] = table.get(key, 0) + 1

    def undefine(self, table: dict[int, int], key: int) -> None:
        left = table[key] - 1
        if left:
            table[key] = left
        else:
            del table[key]

    def scoped(self, var: Var | None = None, buf: Buffer | None = None) -> None:
        """Define ``var``/``buf`` until the statements pushed after this call are done."""
        if var is not None:
            self.define(self.vars, id(var))
            self.todo.append(lambda: self.undefine(self.vars, id(var)))
        if buf is not None:
            self.define(self.bufs, id(buf))
            if self.frames:
                self.frames[-1].local.add(id(buf))
            self.todo.append(lambda: self.undefine(self.bufs, id(buf)))

    # walk --------------------------------------------------------------------------------
    def run(self) -> None:
        for p in self.func.params:
            if isinstance(p, Var):
                self.define(self.vars, id(p))
        for p in self.func.buffer_params:
            self.define(self.bufs, id(p))
            for s in p.shape:
                for v in _vars_in(s):
                    self.define(self.vars, id(v))
        self.todo.append(self.func.body)
        while self.todo:
            item = self.todo.pop()
            if isinstance(item, Stmt):
                self.visit(item)
            else:
                item()

    def visit(self, s: Stmt) -> None:
        if isinstance(s, BufferStore):
            self.access(s.buffer, s.indices, store=True)
            self.use_exprs(
                (*s.indices, s.value), lambda: "store " + access_text(s.buffer, s.indices)
            )
        elif isinstance(s, For):
            self.use_exprs((s.min, s.extent), lambda: f"the range of loop {s.loop_var.name!r}")
            self.scoped(var=s.loop_var)
            self.todo.append(s.body)
        elif isinstance(s, SeqStmt):
            self.todo.extend(reversed(s.stmts))
        elif isinstance(s, IfThenElse):
            self.use_exprs((s.condition,), lambda: "an if condition")
            if s.else_case is not None:
                self.todo.append(s.else_case)
            self.todo.append(s.then_case)
        elif isinstance(s, LetStmt):
            self.use_exprs((s.value,), lambda: f"the value of let {s.var.name!r}")
            self.scoped(var=s.var)
            self.todo.append(s.body)
        elif isinstance(s, Allocate):
            self.use_exprs(s.buffer.shape, lambda: f"the shape of allocation {s.buffer.name!r}")
            self.scoped(buf=s.buffer)
            self.todo.append(s.body)
        elif isinstance(s, BlockRealize):
            self.realize(s)
        elif isinstance(s, Block):
            self.block(s, exempt=False)
        else:
            self.generic(s)

    def realize(self, s: BlockRealize) -> None:
        name = s.block.name
        self.use_exprs((*s.iter_values, s.predicate), lambda: f"the binding of block {name!r}")
        self.block(s.block, exempt=is_root_block(self.func, s))

    def block(self, b: Block, exempt: bool) -> None:
        if b.name in self.names:
            raise self.fail(f"block name {b.name!r} is used twice (block names must be unique)")
        self.names.add(b.name)
        for iv in b.iter_vars:
            self.use_exprs((iv.dom.min, iv.dom.extent), lambda: f"the domain of block {b.name!r}")
        frame = _Frame(b, exempt)
        frame.reads = {id(r.buffer) for r in b.reads}
        frame.writes = {id(r.buffer) for r in b.writes}
        self.todo.append(self.frames.pop)
        self.frames.append(frame)
        for iv in b.iter_vars:
            self.scoped(var=iv.var)
        for buf in b.alloc_buffers:
            what = f"the shape of alloc_buffer {buf.name!r}"
            self.use_exprs(buf.shape, lambda what=what: what)  # type: ignore[misc]
            self.scoped(buf=buf)
        for kind, regions in (("reads", b.reads), ("writes", b.writes)):
            for r in regions:
                what = f"T.{kind} region {region_text(r)}"
                self.use_buffer(r.buffer, lambda what=what: what)  # type: ignore[misc]
                exprs = [e for rng in r.region for e in (rng.min, rng.extent)]
                self.use_exprs(exprs, lambda what=what: what)  # type: ignore[misc]
        self.todo.append(b.body)
        if b.init is not None:
            self.todo.append(b.init)

    def generic(self, s: Stmt) -> None:
        """A statement kind this module does not know (lowering-only nodes): check its uses."""
        kind = type(s).__name__
        children: list[Stmt] = []
        for name in node_fields(type(s)):
            for value in _flatten(getattr(s, name)):
                if isinstance(value, Stmt):
                    children.append(value)
                elif isinstance(value, Buffer):
                    self.use_buffer(value, lambda: f"a {kind} statement")
                elif isinstance(value, Expr):
                    self.use_exprs((value,), lambda: f"a {kind} statement")
        self.todo.extend(reversed(children))

    # uses --------------------------------------------------------------------------------
    def use_buffer(self, buf: Buffer, where: Callable[[], str]) -> None:
        if id(buf) not in self.bufs:
            raise self.fail(
                f"buffer {buf.name!r} is used in {where()} but is not defined here (not a "
                "parameter, an alloc_buffer of an enclosing block or an enclosing allocation)"
            )

    def access(self, buf: Buffer, indices: Sequence[Expr], store: bool) -> None:
        """Check a load or store: its buffer is defined and declared by the innermost block."""
        kind = "store" if store else "load"
        self.use_buffer(buf, lambda: f"{kind} {access_text(buf, indices)}")
        if not self.frames:
            return
        f = self.frames[-1]
        key = id(buf)
        if f.exempt or key in f.local or key in f.writes or (not store and key in f.reads):
            return
        text = access_text(buf, indices)
        if store:
            raise self.fail(f"store {text} writes {buf.name!r}, which is not in T.writes")
        raise self.fail(f"load {text} reads {buf.name!r}, which is in neither T.reads nor T.writes")

    def use_exprs(self, exprs: Iterable[Expr], where: Callable[[], str]) -> None:
        stack: list[Node] = list(exprs)
        while stack:
            e = stack.pop()
            if isinstance(e, Var):
                if id(e) not in self.vars:
                    raise self.fail(
                        f"variable {e.name!r} is used in {where()} but is not defined there "
                        "(not a parameter, a shape variable, or a loop, block-iterator or let "
                        "variable in scope)"
                    )
            elif isinstance(e, BufferLoad):
                self.access(e.buffer, e.indices, store=False)
                stack.extend(e.indices)
            else:
                stack.extend(iter_children(e))


def _flatten(value: object) -> Iterable[object]:
    if isinstance(value, tuple):
        return value
    return (value,)


def _vars_in(e: Expr) -> list[Var]:
    out: list[Var] = []
    stack: list[Node] = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Var):
            out.append(n)
        elif isinstance(n, BufferLoad):
            stack.extend(n.indices)
        else:
            stack.extend(iter_children(n))
    return out

"""Render IR as tilecraft script: Python-syntax text that :func:`tilecraft.script.parse` reads back.

The printed form (every rule below is what makes the round trip exact):

- ``@T.prim_func`` / ``def name(A: T.Buffer((128, n), "float32"), n: T.int32):``; scalar
  parameters are annotated with their dtype, buffer parameters with ``T.Buffer(shape, dtype,
  scope=...)``. Variables used but bound nowhere (symbolic extents that are not parameters) are
  declared as the first statements of the body, ``m = T.int32()``; buffers used but declared
  nowhere as ``X = T.Buffer(...)``; then ``T.func_attr({...})``.
- Loops: ``for i in range(ext)`` / ``range(lo, hi)`` for plain serial loops, ``T.grid`` for
  nests of them, ``T.serial/parallel/vectorized/unroll/thread_binding(..., thread=...,
  annotations={...})`` otherwise. A non-zero symbolic ``min`` prints as ``(lo, lo + ext)``
  and the parser reads ``ext`` back from the right operand, so ``(min, extent)`` is exact; the
  same holds for slices ``A[lo:lo + ext]`` in ``T.reads``/``T.writes`` and axis domains.
- Blocks: ``with T.block("C"):`` then ``vi = T.axis.spatial(dom, value)`` (one line per
  iterator, so each domain is stated; the parser also reads ``T.axis.remap``), ``T.where``,
  ``T.reads``/``T.writes``, ``T.block_attr``, ``X = T.alloc_buffer(...)``, ``with T.init():``,
  body. ``T.reads``/``T.writes`` are printed unless both are empty and the body implies no
  access either (an omitted pair is inferred by the parser; see
  :mod:`tilecraft.script._regions`), so a root block prints without them. The root block is
  printed like any other block.
- A ``LetStmt`` or ``Allocate`` that ends its statement list prints flat
  (``x: T.int32 = v`` / ``X = T.allocate(...)``; the rest of the list is its body); elsewhere
  it prints scoped (``with T.let(v) as x:`` / ``with T.allocate(...) as X:``). A ``SeqStmt``
  nested in a ``SeqStmt``, or holding one statement, prints as ``with T.seq():``.
- Constants: int32 as plain ints, other integer types as ``T.int64(5)``, bool as
  ``True``/``False``, floats as ``T.float32(0.5)`` (``repr``, shortest exact form;
  ``T.float32("nan")``, ``T.float32("inf")``). ``//`` and ``%`` are floordiv/floormod.
- ``Select`` prints as Python's conditional expression ``t if c else f`` (lazy, like Select;
  the parser also reads ``T.Select(c, t, f)``); ``0 - x`` with a non-constant ``x`` prints as
  ``-x``. Both keep the brackets of the printed text no deeper than those of parsed text.
- Strings (block names, attributes) are ASCII-only Python literals (``"\\U0001d465"``).
- Names are hints: a variable or buffer gets its name folded to what Python reads back (NFKC:
  ``𝑥`` prints as ``x``); one that is not an identifier, is reserved (``T``, ``range``,
  keywords), or collides with a different visible variable/buffer gets a suffix (``i_1``).

Printing keeps its own stacks instead of recursing, so IR of any depth prints (deeply nested
statements print with deep indentation, which Python itself reads back only up to 100 levels).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..errors import IRError
from ..ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Evaluate,
    Expr,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRModule,
    IterVar,
    LetStmt,
    Node,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
)
from ..ir.visitor import iter_children
from ._expr_printer import ADD, ExprPrinter, Namer, attrs_text, quote
from ._regions import infer_regions

_LOOP_FUNC = {
    ForKind.SERIAL: "serial",
    ForKind.PARALLEL: "parallel",
    ForKind.VECTORIZED: "vectorized",
    ForKind.UNROLLED: "unroll",
    ForKind.THREAD_BINDING: "thread_binding",
}
_INDENT = "    "


FunctionPrinter = Callable[[Any, str], list[str]]
_FUNCTION_PRINTERS: dict[type, FunctionPrinter] = {}


def register_function_printer(cls: type, printer: FunctionPrinter) -> None:
    """Print module functions of class ``cls`` (defined by a higher layer) with ``printer``.

    ``printer(func, name)`` returns the function's lines, unindented, as they appear inside an
    ``@T.ir_module`` class.
    """
    _FUNCTION_PRINTERS[cls] = printer


def to_script(node: Any) -> str:
    """Render ``node`` (a module, function, statement, expression, ...) as script text.

    Modules and functions print in the form :func:`tilecraft.script.parse` reads back exactly.
    Other nodes print as the fragment they would be inside a function, for reading only.
    """
    return _Printer().render(node)


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(iter_children(n))))


def free_symbols(func: PrimFunc) -> tuple[list[Var], list[Buffer]]:
    """Variables and buffers ``func`` uses but neither binds nor declares, in order of use."""
    bound: set[int] = {id(p) for p in func.params}
    for p in func.buffer_params:
        bound.add(id(p))
    used_vars: dict[int, Var] = {}
    used_bufs: dict[int, Buffer] = {}
    for n in _walk(func.body):
        if isinstance(n, For):
            bound.add(id(n.loop_var))
        elif isinstance(n, (IterVar, LetStmt)):
            bound.add(id(n.var))
        elif isinstance(n, Block):
            bound.update(id(b) for b in n.alloc_buffers)
        elif isinstance(n, Allocate):
            bound.add(id(n.buffer))
        elif isinstance(n, Var):
            used_vars.setdefault(id(n), n)
        elif isinstance(n, Buffer):
            used_bufs.setdefault(id(n), n)
    for p in func.buffer_params:  # shapes of parameters
        for s in p.shape:
            for n in _walk(s):
                if isinstance(n, Var):
                    used_vars.setdefault(id(n), n)
    free_vars = [v for k, v in used_vars.items() if k not in bound]
    free_bufs = [b for k, b in used_bufs.items() if k not in bound]
    return free_vars, free_bufs


# An action prints something and returns the actions that follow it, in order; the printer
# runs them depth first from its own stack.
_Action = Callable[[], "list[_Action]"]


class _Printer:
    def __init__(self) -> None:
        self.names = Namer()
        self.ex = ExprPrinter(self.names)
        self.lines: list[str] = []

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(_INDENT * depth + text)

    def expr(self, e: Expr, minimum: int = 0) -> str:
        return self.ex.expr(e, minimum)

    def run(self, actions: list[_Action]) -> None:
        stack = list(reversed(actions))
        while stack:
            stack.extend(reversed(stack.pop()()))

    def pop_scope(self) -> list[_Action]:
        self.names.pop()
        return []

    # entry ----------------------------------------------------------------------------------
    def render(self, node: Any) -> str:
        if isinstance(node, IRModule):
            self.module(node)
        elif isinstance(node, PrimFunc):
            self.run(self.func(node, 0))
        elif isinstance(node, Stmt):
            self.run(self.body(node, 0))
        elif isinstance(node, Expr):
            return self.expr(node)
        elif isinstance(node, Buffer):
            return f"{self.names.get(node)}: {self.buffer_decl('T.Buffer', node)}"
        elif isinstance(node, Range):
            return f"T.Range({self.expr(node.min)}, {self.expr(node.extent)})"
        elif isinstance(node, BufferRegion):
            return self.region(node)
        elif isinstance(node, IterVar):
            return f"{self.names.get(node.var)} = T.axis.{node.kind.value}({self.dom(node.dom)})"
        else:
            return f"<{type(node).__name__}>"
        return "\n".join(self.lines)

    def module(self, mod: IRModule) -> None:
        self.emit(0, "@T.ir_module")
        self.emit(0, "class Module:")
        if mod.attrs:
            self.emit(1, f"T.module_attr({attrs_text(mod.attrs)})")
        for name, f in mod.items():
            if self.lines[-1] != "class Module:":
                self.emit(0, "")
            printer = _FUNCTION_PRINTERS.get(type(f))
            if isinstance(f, PrimFunc):
                self.run(self.func(f.update(name=name), 1))
            elif printer is not None:
                for line in printer(f, name):
                    self.emit(1, line) if line else self.lines.append("")
            else:
                self.emit(1, f"# {name}: a {type(f).__name__} has no script form")
        if len(self.lines) == 2:
            self.emit(1, "pass")

    def func(self, f: PrimFunc, depth: int) -> list[_Action]:
        free_vars, free_bufs = free_symbols(f)
        self.names.push()
        for p in f.params:
            self.names.define(p)
        for v in free_vars:
            self.names.define(v)
        for b in free_bufs:
            self.names.define(b)
        params = []
        for p in f.params:
            if isinstance(p, Var):
                params.append(f"{self.names.get(p)}: T.{p.dtype}")
            else:
                params.append(f"{self.names.get(p)}: {self.buffer_decl('T.Buffer', p)}")
        self.emit(depth, "@T.prim_func")
        self.emit(depth, f"def {f.name}({', '.join(params)}):")
        for v in free_vars:
            self.emit(depth + 1, f"{self.names.get(v)} = T.{v.dtype}()")
        for b in free_bufs:
            self.emit(depth + 1, f"{self.names.get(b)} = {self.buffer_decl('T.Buffer', b)}")
        if f.attrs:
            self.emit(depth + 1, f"T.func_attr({attrs_text(f.attrs)})")
        return [*self.body(f.body, depth + 1), self.pop_scope]

    # statements -----------------------------------------------------------------------------
    def body(self, s: Stmt, depth: int) -> list[_Action]:
        if not isinstance(s, SeqStmt):
            return [lambda: self.stmt(s, depth, True)]
        if len(s.stmts) == 1:
            self.emit(depth, "with T.seq():")
            return self.seq_items(s.stmts, depth + 1)
        return self.seq_items(s.stmts, depth)

    def seq_items(self, stmts: tuple[Stmt, ...], depth: int) -> list[_Action]:
        last = len(stmts) - 1
        return [self.seq_item(s, depth, k == last) for k, s in enumerate(stmts)]

    def seq_item(self, s: Stmt, depth: int, tail: bool) -> _Action:
        if not isinstance(s, SeqStmt):
            return lambda: self.stmt(s, depth, tail)

        def nested() -> list[_Action]:
            self.emit(depth, "with T.seq():")
            return self.seq_items(s.stmts, depth + 1)

        return nested

    def stmt(self, s: Stmt, depth: int, tail: bool) -> list[_Action]:
        if isinstance(s, BufferStore):
            self.emit(depth, f"{self.indexed(s.buffer, s.indices)} = {self.expr(s.value)}")
        elif isinstance(s, Evaluate):
            self.emit(depth, f"T.evaluate({self.expr(s.value)})")
        elif isinstance(s, IfThenElse):
            self.emit(depth, f"if {self.expr(s.condition)}:")
            out = [lambda: self.scoped_body(s.then_case, depth + 1)]
            if s.else_case is not None:
                other = s.else_case

                def orelse() -> list[_Action]:
                    self.emit(depth, "else:")
                    return self.scoped_body(other, depth + 1)

                out.append(orelse)
            return out
        elif isinstance(s, For):
            return self.loop(s, depth)
        elif isinstance(s, (LetStmt, Allocate)):
            return self.binding(s, depth, tail)
        elif isinstance(s, BlockRealize):
            return self.block(s.block, s, depth)
        elif isinstance(s, Block):
            return self.block(s, None, depth)
        elif isinstance(s, SeqStmt):
            return self.body(s, depth)
        else:
            self.emit(depth, f"# {type(s).__name__} has no script form")
        return []

    def scoped_body(self, s: Stmt, depth: int) -> list[_Action]:
        self.names.push()
        return [*self.body(s, depth), self.pop_scope]

    def binding(self, s: LetStmt | Allocate, depth: int, tail: bool) -> list[_Action]:
        if isinstance(s, LetStmt):
            value = self.expr(s.value)
            self.names.push()
            name = self.names.define(s.var)
            flat, scoped = f"{name}: T.{s.var.dtype} = {value}", f"with T.let({value}) as {name}:"
        else:
            decl = self.buffer_decl("T.allocate", s.buffer)
            self.names.push()
            name = self.names.define(s.buffer)
            flat, scoped = f"{name} = {decl}", f"with {decl} as {name}:"
        self.emit(depth, flat if tail else scoped)
        return [*self.body(s.body, depth if tail else depth + 1), self.pop_scope]

    def loop(self, s: For, depth: int) -> list[_Action]:
        nest = [s]
        if _is_grid_loop(s):
            while isinstance(nest[-1].body, For) and _is_grid_loop(nest[-1].body):
                inner = nest[-1].body
                outer_vars = {id(x.loop_var) for x in nest}
                if any(isinstance(n, Var) and id(n) in outer_vars for n in _walk(inner.extent)):
                    break
                nest.append(inner)
        if len(nest) > 1:
            extents = ", ".join(self.expr(x.extent) for x in nest)
            self.names.push()
            names = ", ".join(self.names.define(x.loop_var) for x in nest)
            self.emit(depth, f"for {names} in T.grid({extents}):")
        else:
            args = self.range_args(s.min, s.extent)
            if s.kind is ForKind.SERIAL and not s.annotations:
                head = f"range({args})"
            else:
                extra = f", thread={quote(s.thread)}" if s.thread is not None else ""
                if s.annotations:
                    extra += f", annotations={attrs_text(s.annotations)}"
                head = f"T.{_LOOP_FUNC[s.kind]}({args}{extra})"
            self.names.push()
            self.emit(depth, f"for {self.names.define(s.loop_var)} in {head}:")
        return [*self.body(nest[-1].body, depth + 1), self.pop_scope]

    def block(self, blk: Block, realize: BlockRealize | None, depth: int) -> list[_Action]:
        axes = []
        for k, iv in enumerate(blk.iter_vars):
            args = self.dom(iv.dom)
            if realize is not None:
                args += f", {self.expr(realize.iter_values[k])}"
            axes.append((iv, args))
        pred = None
        if realize is not None and not _is_true(realize.predicate):
            pred = self.expr(realize.predicate)
        bare = ", realize=False" if realize is None else ""
        self.emit(depth, f"with T.block({quote(blk.name)}{bare}):")
        self.names.push()
        inner = depth + 1
        for iv, args in axes:
            self.emit(inner, f"{self.names.define(iv.var)} = T.axis.{iv.kind.value}({args})")
        for b in blk.alloc_buffers:
            self.names.define(b)
        if pred is not None:
            self.emit(inner, f"T.where({pred})")
        if blk.reads or blk.writes or infer_regions(blk) != ((), ()):
            self.emit(inner, f"T.reads({', '.join(self.region(r) for r in blk.reads)})")
            self.emit(inner, f"T.writes({', '.join(self.region(r) for r in blk.writes)})")
        if blk.annotations:
            self.emit(inner, f"T.block_attr({attrs_text(blk.annotations)})")
        for b in blk.alloc_buffers:
            self.emit(inner, f"{self.names.get(b)} = {self.buffer_decl('T.alloc_buffer', b)}")
        out: list[_Action] = []
        if blk.init is not None:
            init = blk.init

            def print_init() -> list[_Action]:
                self.emit(inner, "with T.init():")
                return self.scoped_body(init, inner + 1)

            out.append(print_init)
        return [*out, *self.body(blk.body, inner), self.pop_scope]

    # pieces ---------------------------------------------------------------------------------
    def buffer_decl(self, func: str, b: Buffer) -> str:
        shape = ", ".join(self.expr(s) for s in b.shape)
        if len(b.shape) == 1:
            shape += ","
        scope = "" if b.scope == "global" else f", scope={quote(b.scope)}"
        return f'{func}(({shape}), "{b.dtype}"{scope})'

    def indexed(self, b: Buffer, items: tuple[Expr, ...] | list[str]) -> str:
        parts = [x if isinstance(x, str) else self.expr(x) for x in items]
        inside = ", ".join(parts) if parts else "()"
        return f"{self.names.get(b)}[{inside}]"

    def range_bounds(self, r_min: Expr, extent: Expr) -> tuple[str | None, str]:
        """(lo, hi) texts; lo is None for a zero min. The parser inverts each case."""
        if isinstance(r_min, IntImm) and r_min.value == 0:
            return None, self.expr(extent)
        lo = self.expr(r_min)
        if isinstance(r_min, IntImm) and isinstance(extent, IntImm):
            try:
                return lo, self.expr(IntImm(r_min.dtype, r_min.value + extent.value))
            except IRError:  # the end is past the dtype's range: keep "lo + ext"
                pass
        return lo, f"{self.expr(r_min, ADD)} + {self.expr(extent, ADD + 1)}"

    def range_args(self, r_min: Expr, extent: Expr) -> str:
        lo, hi = self.range_bounds(r_min, extent)
        return hi if lo is None else f"{lo}, {hi}"

    def dom(self, r: Range) -> str:
        lo, hi = self.range_bounds(r.min, r.extent)
        return hi if lo is None else f"({lo}, {hi})"

    def region(self, r: BufferRegion) -> str:
        parts = []
        for rng in r.region:
            if isinstance(rng.extent, IntImm) and rng.extent.value == 1:
                parts.append(self.expr(rng.min))
            else:
                lo, hi = self.range_bounds(rng.min, rng.extent)
                parts.append(f"{self.expr(rng.min) if lo is None else lo}:{hi}")
        return self.indexed(r.buffer, parts)


def _is_grid_loop(s: For) -> bool:
    return (
        s.kind is ForKind.SERIAL
        and isinstance(s.min, IntImm)
        and s.min.value == 0
        and not s.annotations
    )


def _is_true(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.dtype.is_bool and e.value == 1

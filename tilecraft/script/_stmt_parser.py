"""Statement half of the script parser: bodies, stores, loops, bindings and ``with`` forms.

Package-private. Flat bindings (``x: T.int32 = v`` whose body is the rest of the statement
list) are read in a loop rather than by recursion, so a long chain of them parses; indented
statements recurse once per indentation level, which Python itself limits to 100.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from ..errors import IRError
from ..ir import (
    Allocate,
    Attrs,
    Buffer,
    BufferStore,
    DataType,
    Evaluate,
    Expr,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Range,
    SeqStmt,
    Stmt,
    Var,
    as_expr,
    dtype,
)
from ._block_parser import parse_block
from ._expr_parser import ExprParser
from ._names import LOOP_KINDS, dtype_of_name

_KINDS = {
    "serial": ForKind.SERIAL,
    "parallel": ForKind.PARALLEL,
    "vectorized": ForKind.VECTORIZED,
    "unroll": ForKind.UNROLLED,
    "thread_binding": ForKind.THREAD_BINDING,
}
_IN_BLOCK = "at the start of a T.block body"
HEADER_ONLY = {
    "axis.spatial": _IN_BLOCK,
    "axis.reduce": _IN_BLOCK,
    "axis.opaque": _IN_BLOCK,
    "axis.remap": _IN_BLOCK,
    "reads": _IN_BLOCK,
    "writes": _IN_BLOCK,
    "where": _IN_BLOCK,
    "block_attr": _IN_BLOCK,
    "alloc_buffer": "at the start of a T.block body or of a function body",
    "init": "at the start of a T.block body, before its statements",
    "func_attr": "among the first statements of a function",
    "Buffer": "as a parameter annotation or among the first statements of a function",
    "module_attr": "in an @T.ir_module class body",
}
"""Script functions allowed only in a header, and where."""

_Binding = tuple[str, Var | Buffer, Callable[[Stmt], Stmt]]  # name, object, build(body)


class StmtParser(ExprParser):
    """Statements, on top of the expression parser."""

    def __init__(self, lines: list[str], line_offset: int, col_offset: int) -> None:
        super().__init__(lines, line_offset, col_offset)
        self.block_names: set[str] = set()
        self.loop_doms: dict[int, Range] = {}  # loop variable -> its range (T.axis.remap)

    def call_name(self, node: ast.AST) -> str | None:
        """The T-function name of ``node`` if it is a call ``T.<name>(...)``."""
        if isinstance(node, ast.Call):
            return self.t_name(node.func)
        return None

    def attrs_arg(self, node: ast.Call, name: str) -> Attrs:
        """The dict literal of ``T.func_attr({...})`` and similar."""
        self.check_args(node, name, 1, 1)
        value = self.literal(node.args[0])
        if not isinstance(value, dict):
            self.fail(node.args[0], f"T.{name} expects a dict literal")
        try:
            return Attrs(value)
        except IRError as e:
            self.fail(node, str(e))

    def target_name(self, s: ast.Assign) -> str:
        """The single name assigned by ``s``."""
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
            self.fail(s, "expected a single name on the left of '='")
        return s.targets[0].id

    def scalar_annotation(self, node: ast.expr) -> DataType | None:
        """The dtype of an annotation ``T.int32`` / ``T.int32()``; None otherwise."""
        if isinstance(node, ast.Call):
            name = self.t_name(node.func)
            if name is not None and dtype_of_name(name) is not None and not node.args:
                return dtype_of_name(name)
            return None
        name = self.t_name(node)
        return dtype_of_name(name) if name is not None else None

    def buffer_decl(self, node: ast.Call, func: str, name: str) -> Buffer:
        """``T.Buffer(shape, dtype="float32", scope="global")`` and alloc forms."""
        self.check_args(node, func, 1, 2, ("dtype", "scope"))
        shape_node = node.args[0]
        items = shape_node.elts if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
        shape = []
        for item in items:
            if isinstance(item, ast.Constant) and not isinstance(item.value, int):
                self.fail(item, f"T.{func}: shape entries must be integers or integer expressions")
            shape.append(self.expr(item))
        dt_node = node.args[1] if len(node.args) > 1 else self.keyword(node, "dtype")
        dt = self.dtype_arg(dt_node) if dt_node is not None else dtype("float32")
        scope_node = self.keyword(node, "scope")
        scope = "global" if scope_node is None else self.string(scope_node, "scope")
        try:
            return Buffer(name, tuple(shape), dt, scope)
        except IRError as e:
            self.fail(node, str(e))

    # statement lists ------------------------------------------------------------------------
    def body(self, stmts: list[ast.stmt], owner: ast.AST) -> Stmt:
        """One statement, or a SeqStmt of several."""
        items = self.stmt_list(stmts, owner)
        return items[0] if len(items) == 1 else SeqStmt(tuple(items))

    def stmt_list(self, stmts: list[ast.stmt], owner: ast.AST) -> list[Stmt]:
        """The statements of a body; a flat binding takes the rest of the list as its body."""
        if not stmts:
            self.fail(owner, "expected at least one statement in this body")
        pending: list[tuple[list[Stmt], ast.stmt, Callable[[Stmt], Stmt]]] = []
        while True:
            items, found = self.until_binding(stmts)
            if found is None:
                break
            k, (name, obj, make) = found
            s, stmts = stmts[k], stmts[k + 1 :]
            if not stmts:
                self.fail(
                    s, f"the binding of {name!r} must be followed by the statements that use it"
                )
            self.push()
            self.define(s, name, obj)
            pending.append((items, s, make))
        for before, s, make in reversed(pending):
            self.pop()
            try:
                built = make(items[0] if len(items) == 1 else SeqStmt(tuple(items)))
            except IRError as e:
                self.fail(s, str(e))
            items = [*before, built]
        return items

    def until_binding(
        self, stmts: list[ast.stmt]
    ) -> tuple[list[Stmt], tuple[int, _Binding] | None]:
        """Statements up to the first flat binding, and that binding (index, parts)."""
        out: list[Stmt] = []
        for k, s in enumerate(stmts):
            try:
                found = self.flat_binding(s)
                if found is not None:
                    return out, (k, found)
                out.append(self.stmt(s))
            except (IRError, OverflowError) as e:
                self.fail(s, str(e))
            except RecursionError:
                self.fail(s, "statements nested too deeply")
        return out, None

    def flat_binding(self, s: ast.stmt) -> _Binding | None:
        """``x: T.int32 = v`` / ``x = v`` / ``X = T.allocate(...)``: the rest is the body."""
        if isinstance(s, ast.AnnAssign):
            if not isinstance(s.target, ast.Name) or s.value is None:
                self.fail(s, "a let binding is written 'x: T.int32 = value'")
            dt = self.scalar_annotation(s.annotation)
            if dt is None:
                self.fail(
                    s.annotation, "a let binding's annotation must be a dtype such as T.int32"
                )
            return self.let(s.target.id, self.expr(s.value, dt))
        if not isinstance(s, ast.Assign) or not isinstance(s.targets[0], ast.Name):
            return None
        name = self.call_name(s.value)
        if name == "allocate":
            assert isinstance(s.value, ast.Call)
            buf = self.buffer_decl(s.value, "allocate", self.target_name(s))
            return buf.name, buf, lambda b: Allocate(buf, b)
        if name in HEADER_ONLY or (
            name is not None
            and dtype_of_name(name) is not None
            and isinstance(s.value, ast.Call)
            and not s.value.args
        ):
            where = HEADER_ONLY.get(name, "among the first statements of a function")
            self.fail(s, f"T.{name} is only allowed {where}")
        return self.let(self.target_name(s), self.expr(s.value))

    @staticmethod
    def let(name: str, value: Expr) -> _Binding:
        """The parts of a let binding of ``name`` to ``value``."""
        var = Var(name, value.dtype)
        return name, var, lambda b: LetStmt(var, value, b)

    def scoped(self, s: ast.stmt, binding: _Binding, rest: list[ast.stmt]) -> Stmt:
        """A binding whose body is the indented block ``rest``."""
        name, obj, make = binding
        if not rest:
            self.fail(s, f"the binding of {name!r} must be followed by the statements that use it")
        self.push()
        self.define(s, name, obj)
        body = self.body(rest, s)
        self.pop()
        try:
            return make(body)
        except IRError as e:
            self.fail(s, str(e))

    def nested_body(self, stmts: list[ast.stmt], owner: ast.AST) -> Stmt:
        """A body in its own scope."""
        self.push()
        out = self.body(stmts, owner)
        self.pop()
        return out

    # single statements ----------------------------------------------------------------------
    def stmt(self, s: ast.stmt) -> Stmt:
        """One statement that is not a flat binding."""
        if isinstance(s, ast.Assign):
            return self.store(s, s.targets[0] if len(s.targets) == 1 else None, s.value, None)
        if isinstance(s, ast.AugAssign):
            return self.store(s, s.target, s.value, s.op)
        if isinstance(s, ast.For):
            return self.loop(s)
        if isinstance(s, ast.With):
            return self.with_stmt(s)
        if isinstance(s, ast.If):
            cond = self.expr(s.test, dtype("bool"))
            then = self.nested_body(s.body, s)
            other = self.nested_body(s.orelse, s) if s.orelse else None
            return IfThenElse(cond, then, other)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            name = self.call_name(s.value)
            if name == "evaluate":
                self.check_args(s.value, "evaluate", 1, 1)
                return Evaluate(self.expr(s.value.args[0]))
            if name in HEADER_ONLY:
                self.fail(s, f"T.{name} is only allowed {HEADER_ONLY[name]}")
        if isinstance(s, ast.Pass):
            self.fail(s, "'pass' has no IR form; a body needs at least one statement")
        self.fail(
            s,
            f"unsupported statement {ast.unparse(s).splitlines()[0]!r}; expected a store, "
            "for, if, with, let binding or T.evaluate(...)",
        )

    def store(
        self, s: ast.stmt, target: ast.expr | None, value_node: ast.expr, op: ast.operator | None
    ) -> Stmt:
        """``A[i, j] = value`` or ``A[i, j] += value``."""
        if not isinstance(target, ast.Subscript):
            self.fail(s, "expected a buffer store 'A[i, j] = value' or a let binding 'x = value'")
        buf = self.buffer(target.value)
        indices = self.indices(target)
        if op is None:
            return BufferStore(buf, self.expr(value_node, buf.dtype), tuple(indices))
        fake = ast.BinOp(left=target, op=op, right=value_node)
        ast.copy_location(fake, s)
        return BufferStore(buf, self.expr(fake, buf.dtype), tuple(indices))

    # loops ----------------------------------------------------------------------------------
    def loop(self, s: ast.For) -> Stmt:
        """A ``for`` over range, a T loop kind or T.grid."""
        if s.orelse:
            self.fail(s.orelse[0], "for-else is not supported")
        if not isinstance(s.iter, ast.Call):
            self.fail(
                s.iter,
                "a loop iterates over range(...), T.grid(...) or "
                "T.serial/parallel/vectorized/unroll/thread_binding(...)",
            )
        name = (
            "range"
            if isinstance(s.iter.func, ast.Name)
            and s.iter.func.id == "range"
            and self.lookup("range") is None
            else self.callee(s.iter)
        )
        if name == "grid":
            return self.grid(s, s.iter)
        if name != "range" and name not in LOOP_KINDS:
            self.fail(
                s.iter, f"T.{name} is not a loop iterator; expected range, T.grid or T.serial/..."
            )
        kw = ("annotations",) + (("thread",) if name == "thread_binding" else ())
        self.check_args(s.iter, name, 1, 2, () if name == "range" else kw)
        rng = (
            self.extent_range(s.iter.args[0])
            if len(s.iter.args) == 1
            else self.range_from(*s.iter.args)
        )
        thread_node = self.keyword(s.iter, "thread")
        thread = None if thread_node is None else self.string(thread_node, "thread")
        if name == "thread_binding" and thread is None:
            self.fail(s.iter, 'T.thread_binding needs thread="threadIdx.x" (or another tag)')
        ann = self.loop_annotations(s.iter)
        if not isinstance(s.target, ast.Name):
            self.fail(s.target, "expected one loop variable name")
        var = Var(s.target.id, rng.extent.dtype)
        self.push()
        self.define(s.target, s.target.id, var)
        self.loop_doms[id(var)] = rng
        body = self.body(s.body, s)
        self.pop()
        kind = ForKind.SERIAL if name == "range" else _KINDS[name]
        return For(var, rng.min, rng.extent, kind, body, thread, ann)

    def loop_annotations(self, it: ast.Call) -> Attrs:
        """The ``annotations={...}`` of a loop iterator call."""
        node = self.keyword(it, "annotations")
        if node is None:
            return Attrs()
        value = self.literal(node)
        if not isinstance(value, dict):
            self.fail(node, "annotations must be a dict literal")
        return Attrs(value)

    def grid(self, s: ast.For, it: ast.Call) -> Stmt:
        """``for i, j in T.grid(m, n)``: nested serial loops."""
        self.check_args(it, "grid", 1, 64)
        targets = s.target.elts if isinstance(s.target, ast.Tuple) else [s.target]
        if len(targets) != len(it.args):
            self.fail(
                s.target, f"T.grid has {len(it.args)} extents but {len(targets)} loop variables"
            )
        exts = [self.expr(a) for a in it.args]
        self.push()
        loop_vars = []
        for t, ext in zip(targets, exts, strict=True):
            if not isinstance(t, ast.Name):
                self.fail(t, "expected a loop variable name")
            v = Var(t.id, ext.dtype)
            self.define(t, t.id, v)
            self.loop_doms[id(v)] = Range(as_expr(0, ext.dtype), ext)
            loop_vars.append(v)
        body = self.body(s.body, s)
        self.pop()
        for v, ext in reversed(list(zip(loop_vars, exts, strict=True))):
            body = For(v, as_expr(0, ext.dtype), ext, ForKind.SERIAL, body)
        return body

    # with -----------------------------------------------------------------------------------
    def with_stmt(self, s: ast.With) -> Stmt:
        """``with T.block/seq/let/allocate(...)``."""
        if len(s.items) != 1:
            self.fail(s, "a with statement takes exactly one T.<...>() item")
        item = s.items[0]
        ctx = item.context_expr
        if not isinstance(ctx, ast.Call):
            self.fail(ctx, "expected with T.block(...), T.seq(), T.let(...) or T.allocate(...)")
        name = self.callee(ctx)
        if name == "block":
            return parse_block(self, s, ctx)
        if name == "seq":
            self.check_args(ctx, "seq", 0, 0)
            self.push()
            items = self.stmt_list(s.body, s)
            self.pop()
            return SeqStmt(tuple(items))
        if name in ("let", "allocate"):
            if not isinstance(item.optional_vars, ast.Name):
                self.fail(ctx, f"write 'with T.{name}(...) as name:'")
            var_name = item.optional_vars.id
            if name == "let":
                self.check_args(ctx, "let", 1, 1)
                value = self.expr(ctx.args[0])
                return self.scoped(s, self.let(var_name, value), s.body)
            buf = self.buffer_decl(ctx, "allocate", var_name)
            return self.scoped(s, (var_name, buf, lambda b: Allocate(buf, b)), s.body)
        if name in HEADER_ONLY:
            self.fail(s, f"T.{name} is only allowed {HEADER_ONLY[name]}")
        self.fail(ctx, f"T.{name} cannot open a with statement")

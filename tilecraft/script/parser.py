"""Parse tilecraft script text (see :mod:`tilecraft.script.printer`) back into IR.

The text is read with Python's :mod:`ast` module only: nothing in it is executed. Every
problem raises :class:`~tilecraft.errors.ScriptParseError` with the line, column, offending
line and what was expected; ``IRError`` from node constructors is re-raised with the position.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import warnings
from collections.abc import Callable
from typing import Any

from ..errors import IRError, ScriptParseError
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
    IRModule,
    IterKind,
    LetStmt,
    PrimFunc,
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
_AXES = {
    "axis.spatial": IterKind.SPATIAL,
    "axis.reduce": IterKind.REDUCE,
    "axis.opaque": IterKind.OPAQUE,
}
_HEADER_ONLY = {
    "axis.spatial": "at the start of a T.block body",
    "axis.reduce": "at the start of a T.block body",
    "axis.opaque": "at the start of a T.block body",
    "reads": "at the start of a T.block body",
    "writes": "at the start of a T.block body",
    "where": "at the start of a T.block body",
    "block_attr": "at the start of a T.block body",
    "alloc_buffer": "at the start of a T.block body",
    "init": "at the start of a T.block body, before its statements",
    "func_attr": "among the first statements of a function",
    "Buffer": "as a parameter annotation or among the first statements of a function",
    "module_attr": "in an @T.ir_module class body",
}


TextParser = Callable[[str], Any]
_TEXT_PARSERS: dict[str, TextParser] = {}
# decorator -> module that registers a parser for it when imported (a hook, not an import)
_PROVIDERS = {"R.function": "tilecraft.graph"}


def register_text_parser(decorator: str, parser: TextParser) -> None:
    """Hand script text using ``@<decorator>`` functions (e.g. ``"R.function"``) to ``parser``.

    Higher layers register their function kinds here; ``parse`` delegates the whole text to
    the parser of the first such decorator it finds at the top level or inside the module
    class.
    """
    _TEXT_PARSERS[decorator] = parser


def _foreign_decorator(top: ast.stmt) -> str | None:
    defs = [top] if isinstance(top, ast.FunctionDef) else []
    if isinstance(top, ast.ClassDef):
        defs = [s for s in top.body if isinstance(s, ast.FunctionDef)]
    for d in defs:
        for dec in d.decorator_list:
            name = ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)
            if name in _PROVIDERS or name in _TEXT_PARSERS:
                return name
    return None


def parse(source: str) -> PrimFunc | IRModule:
    """Parse script text holding one ``@T.prim_func`` function or one ``@T.ir_module`` class.

    Parameters
    ----------
    source
        The script text (common indentation is ignored; ``import`` lines are skipped).

    Returns
    -------
    PrimFunc or IRModule
        The function or module the text describes.

    Raises
    ------
    ScriptParseError
        With line, column and source line when the text is not valid script.
    """
    return _parse_text(source, 0)


def parse_object(obj: Callable[..., Any] | type) -> PrimFunc | IRModule:
    """Parse the source of a decorated Python function or class (never running its body)."""
    try:
        src_lines, start = inspect.getsourcelines(obj)
    except (OSError, TypeError) as e:
        raise ScriptParseError(f"cannot read the source of {obj!r}: {e}") from e
    return _parse_text("".join(src_lines), max(start - 1, 0))


def _parse_text(source: str, line_offset: int) -> PrimFunc | IRModule:
    if not isinstance(source, str):
        raise ScriptParseError(f"expected script text (str), got {type(source).__name__}")
    lines = source.splitlines()
    indents = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    indent = min(indents, default=0)
    text = "\n".join(ln[indent:] if ln.strip() else "" for ln in lines)
    try:
        with warnings.catch_warnings():  # e.g. "invalid escape sequence": report errors only
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text)
    except SyntaxError as e:
        line = e.lineno or 0
        src = lines[line - 1].rstrip() if 0 < line <= len(lines) else ""
        col = (e.offset or 0) + indent
        raise ScriptParseError(
            f"invalid Python syntax: {e.msg}", line + line_offset, col, src
        ) from None
    parser = _Parser(lines, line_offset, indent)
    defs = [
        s
        for s in tree.body
        if not isinstance(s, (ast.Import, ast.ImportFrom)) and not _is_docstring(s)
    ]
    if len(defs) != 1 or not isinstance(defs[0], (ast.FunctionDef, ast.ClassDef)):
        where = defs[1] if len(defs) > 1 else (defs[0] if defs else None)
        raise parser.error(
            where, "expected exactly one @T.prim_func function or one @T.ir_module class"
        )
    top = defs[0]
    foreign = _foreign_decorator(top)
    if foreign is not None:
        if foreign not in _TEXT_PARSERS:
            importlib.import_module(_PROVIDERS[foreign])  # registers its parser
        result: PrimFunc | IRModule = _TEXT_PARSERS[foreign](text)
        return result
    if isinstance(top, ast.ClassDef):
        return parser.module(top)
    return parser.function(top)


def _is_docstring(s: ast.stmt) -> bool:
    return (
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Constant)
        and isinstance(s.value.value, str)
    )


class _Parser(ExprParser):
    def __init__(self, lines: list[str], line_offset: int, col_offset: int) -> None:
        super().__init__(lines, line_offset, col_offset)
        self.block_names: set[str] = set()

    def call_name(self, node: ast.AST) -> str | None:
        """The T-function name of ``node`` if it is a call ``T.<name>(...)``."""
        if isinstance(node, ast.Call):
            return self.t_name(node.func)
        return None

    def attrs_arg(self, node: ast.Call, name: str) -> Attrs:
        self.check_args(node, name, 1, 1)
        value = self.literal(node.args[0])
        if not isinstance(value, dict):
            self.fail(node.args[0], f"T.{name} expects a dict literal")
        try:
            return Attrs(value)
        except IRError as e:
            self.fail(node, str(e))

    def check_decorators(self, node: ast.FunctionDef | ast.ClassDef, expected: str) -> None:
        for d in node.decorator_list:
            if self.t_name(d) != expected:
                self.fail(d, f"unexpected decorator {ast.unparse(d)!r}; expected @T.{expected}")

    # module ---------------------------------------------------------------------------------
    def module(self, node: ast.ClassDef) -> IRModule:
        self.check_decorators(node, "ir_module")
        funcs: dict[str, PrimFunc] = {}
        attrs = Attrs()
        for s in node.body:
            if _is_docstring(s) or isinstance(s, ast.Pass):
                continue
            if isinstance(s, ast.FunctionDef):
                if s.name in funcs:
                    self.fail(s, f"duplicate function name {s.name!r} in the module")
                funcs[s.name] = self.function(s)
            elif isinstance(s, ast.Expr) and self.call_name(s.value) == "module_attr":
                assert isinstance(s.value, ast.Call)
                attrs = self.attrs_arg(s.value, "module_attr")
            else:
                self.fail(
                    s, "an @T.ir_module class holds only @T.prim_func functions and T.module_attr"
                )
        try:
            return IRModule(funcs, attrs)
        except IRError as e:
            self.fail(node, str(e))

    # function -------------------------------------------------------------------------------
    def function(self, node: ast.FunctionDef) -> PrimFunc:
        self.check_decorators(node, "prim_func")
        self.block_names = set()
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            self.fail(node, "parameters must be plain 'name: annotation' entries")
        body = [s for k, s in enumerate(node.body) if not (k == 0 and _is_docstring(s))]
        header: list[ast.stmt] = []
        while body and self.is_header(body[0]):
            header.append(body.pop(0))
        self.push()
        for s in header:  # variable declarations first: the signature may use them
            if (
                isinstance(s, ast.Assign)
                and dtype_of_name(self.call_name(s.value) or "") is not None
            ):
                self.declare_var(s)
        params: list[Buffer | Var] = []
        for arg in a.args:  # scalars before buffers: shapes may use any scalar parameter
            if arg.annotation is None:
                self.fail(
                    arg, f"parameter {arg.arg!r} needs an annotation (T.Buffer(...) or T.int32)"
                )
            dt = self.scalar_annotation(arg.annotation)
            if dt is not None:
                var = Var(arg.arg, dt)
                self.define(arg, arg.arg, var)
                params.append(var)
        for arg in a.args:
            assert arg.annotation is not None
            if self.scalar_annotation(arg.annotation) is None:
                if self.call_name(arg.annotation) != "Buffer":
                    self.fail(
                        arg.annotation,
                        f"parameter {arg.arg!r}: expected T.Buffer(shape, dtype) or a dtype "
                        "such as T.int32",
                    )
                assert isinstance(arg.annotation, ast.Call)
                buf = self.buffer_decl(arg.annotation, "Buffer", arg.arg)
                self.define(arg, arg.arg, buf)
                params.append(buf)
        params.sort(key=lambda p: [x.arg for x in a.args].index(p.name))
        attrs = Attrs()
        for s in header:
            if isinstance(s, ast.Expr):
                assert isinstance(s.value, ast.Call)
                attrs = self.attrs_arg(s.value, "func_attr")
            elif isinstance(s, ast.Assign) and self.call_name(s.value) == "Buffer":
                target = self.target_name(s)
                assert isinstance(s.value, ast.Call)
                self.define(s, target, self.buffer_decl(s.value, "Buffer", target))
        if not body:
            self.fail(node, f"function {node.name!r} has no body statements")
        stmt = self.body(body, node)
        self.pop()
        try:
            return PrimFunc(tuple(params), stmt, attrs, name=node.name)
        except IRError as e:
            self.fail(node, str(e))

    def is_header(self, s: ast.stmt) -> bool:
        if isinstance(s, ast.Expr):
            return self.call_name(s.value) == "func_attr"
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
            name = self.call_name(s.value) or ""
            return name == "Buffer" or (dtype_of_name(name) is not None and not s.value.args)
        return False

    def target_name(self, s: ast.Assign) -> str:
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
            self.fail(s, "expected a single name on the left of '='")
        return s.targets[0].id

    def declare_var(self, s: ast.Assign) -> None:
        name = self.target_name(s)
        assert isinstance(s.value, ast.Call)
        dt = dtype_of_name(self.call_name(s.value) or "")
        assert dt is not None
        if s.value.keywords:
            self.fail(s.value, "a variable declaration takes no arguments: n = T.int32()")
        self.define(s, name, Var(name, dt))

    def scalar_annotation(self, node: ast.expr) -> DataType | None:
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

    # statements -----------------------------------------------------------------------------
    def body(self, stmts: list[ast.stmt], owner: ast.AST) -> Stmt:
        items = self.stmt_list(stmts, owner)
        return items[0] if len(items) == 1 else SeqStmt(tuple(items))

    def stmt_list(self, stmts: list[ast.stmt], owner: ast.AST) -> list[Stmt]:
        if not stmts:
            self.fail(owner, "expected at least one statement in this body")
        out: list[Stmt] = []
        for k, s in enumerate(stmts):
            try:
                flat = self.flat_binding(s, stmts[k + 1 :])
                if flat is not None:
                    out.append(flat)
                    return out
                out.append(self.stmt(s))
            except IRError as e:
                self.fail(s, str(e))
            except RecursionError:
                self.fail(s, "statements nested too deeply")
        return out

    def flat_binding(self, s: ast.stmt, rest: list[ast.stmt]) -> Stmt | None:
        """``x: T.int32 = v`` / ``x = v`` / ``X = T.allocate(...)``: the rest is the body."""
        if isinstance(s, ast.AnnAssign):
            if not isinstance(s.target, ast.Name) or s.value is None:
                self.fail(s, "a let binding is written 'x: T.int32 = value'")
            dt = self.scalar_annotation(s.annotation)
            if dt is None:
                self.fail(
                    s.annotation, "a let binding's annotation must be a dtype such as T.int32"
                )
            value = self.expr(s.value, dt)
            return self.let(s, s.target.id, value, rest)
        if not isinstance(s, ast.Assign) or not isinstance(s.targets[0], ast.Name):
            return None
        name = self.call_name(s.value)
        if name == "allocate":
            assert isinstance(s.value, ast.Call)
            buf = self.buffer_decl(s.value, "allocate", self.target_name(s))
            return self.scoped(s, buf.name, buf, rest, lambda b: Allocate(buf, b))
        if name in _HEADER_ONLY or (
            name is not None
            and dtype_of_name(name) is not None
            and isinstance(s.value, ast.Call)
            and not s.value.args
        ):
            where = _HEADER_ONLY.get(name, "among the first statements of a function")
            self.fail(s, f"T.{name} is only allowed {where}")
        target = self.target_name(s)
        return self.let(s, target, self.expr(s.value), rest)

    def let(self, s: ast.stmt, name: str, value: Expr, rest: list[ast.stmt]) -> Stmt:
        var = Var(name, value.dtype)
        return self.scoped(s, name, var, rest, lambda b: LetStmt(var, value, b))

    def scoped(
        self,
        s: ast.stmt,
        name: str,
        obj: Var | Buffer,
        rest: list[ast.stmt],
        make: Callable[[Stmt], Stmt],
    ) -> Stmt:
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

    def stmt(self, s: ast.stmt) -> Stmt:
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
            if name in _HEADER_ONLY:
                self.fail(s, f"T.{name} is only allowed {_HEADER_ONLY[name]}")
        if isinstance(s, ast.Pass):
            self.fail(s, "'pass' has no IR form; a body needs at least one statement")
        self.fail(
            s,
            f"unsupported statement {ast.unparse(s).splitlines()[0]!r}; expected a store, "
            "for, if, with, let binding or T.evaluate(...)",
        )

    def nested_body(self, stmts: list[ast.stmt], owner: ast.AST) -> Stmt:
        self.push()
        out = self.body(stmts, owner)
        self.pop()
        return out

    def store(
        self, s: ast.stmt, target: ast.expr | None, value_node: ast.expr, op: ast.operator | None
    ) -> Stmt:
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
        ann_node = self.keyword(s.iter, "annotations")
        ann = Attrs()
        if ann_node is not None:
            value = self.literal(ann_node)
            if not isinstance(value, dict):
                self.fail(ann_node, "annotations must be a dict literal")
            ann = Attrs(value)
        if not isinstance(s.target, ast.Name):
            self.fail(s.target, "expected one loop variable name")
        var = Var(s.target.id, rng.extent.dtype)
        self.push()
        self.define(s.target, s.target.id, var)
        body = self.body(s.body, s)
        self.pop()
        kind = ForKind.SERIAL if name == "range" else _KINDS[name]
        return For(var, rng.min, rng.extent, kind, body, thread, ann)

    def grid(self, s: ast.For, it: ast.Call) -> Stmt:
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
            loop_vars.append(v)
        body = self.body(s.body, s)
        self.pop()
        for v, ext in reversed(list(zip(loop_vars, exts, strict=True))):
            body = For(v, as_expr(0, ext.dtype), ext, ForKind.SERIAL, body)
        return body

    # with -----------------------------------------------------------------------------------
    def with_stmt(self, s: ast.With) -> Stmt:
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
                var = Var(var_name, value.dtype)
                return self.scoped(s, var_name, var, s.body, lambda b: LetStmt(var, value, b))
            buf = self.buffer_decl(ctx, "allocate", var_name)
            return self.scoped(s, var_name, buf, s.body, lambda b: Allocate(buf, b))
        if name in _HEADER_ONLY:
            self.fail(s, f"T.{name} is only allowed {_HEADER_ONLY[name]}")
        self.fail(ctx, f"T.{name} cannot open a with statement")

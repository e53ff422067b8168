"""Parse tilecraft script text (see :mod:`tilecraft.script.printer`) back into IR.

The text is read with Python's :mod:`ast` module only: nothing in it is executed. Every
problem raises :class:`~tilecraft.errors.ScriptParseError` with the line, column, offending
line and what was expected; ``IRError`` from node constructors is re-raised with the position.

Besides the printed form the parser reads two shorthands: ``T.reads``/``T.writes`` may be
omitted (each is then inferred from the block's body, see :mod:`tilecraft.script._regions`),
and ``X = T.alloc_buffer(...)`` lines at the top of a function body open an implicit
``T.block("root")`` around the rest of the body.

Limits: the text may hold at most :data:`MAX_SOURCE_CHARS` characters. Nesting is bounded by
Python's own parser (100 indentation levels, 200 nested brackets, and an expression depth of a
few thousand); text beyond these limits raises :class:`ScriptParseError`. Within them nothing
recurses per expression level or per flat binding, so any accepted text is translated.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from typing import Any

from ..errors import IRError, ScriptParseError
from ..ir import (
    Attrs,
    Block,
    BlockRealize,
    Buffer,
    IRModule,
    PrimFunc,
    Stmt,
    Var,
    as_expr,
)
from ..ir import verify as verify_ir
from ._names import dtype_of_name
from ._python import parse_python, source_lines
from ._regions import infer_regions
from ._stmt_parser import StmtParser

MAX_SOURCE_CHARS = 32 * 1024 * 1024
"""The longest script text :func:`parse` reads (32 Mi characters)."""


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


def parse(source: str, *, verify: bool = True) -> PrimFunc | IRModule:
    """Parse script text holding one ``@T.prim_func`` function or one ``@T.ir_module`` class.

    Parameters
    ----------
    source
        The script text (common indentation is ignored; ``import`` lines are skipped).
    verify
        Check every PrimFunc of the result with :func:`tilecraft.ir.verify` (regions agree
        with the body, no provable out-of-bounds access, bindings inside their domains, unique
        block names, variables defined before use). Turn it off only to build deliberately
        malformed IR, for example to test the verifier.

    Returns
    -------
    PrimFunc or IRModule
        The function or module the text describes.

    Raises
    ------
    ScriptParseError
        With line, column and source line when the text is not valid script.
    IRError
        When the text is valid script but the IR it describes fails verification.
    """
    return _checked(_parse_text(source, 0), verify)


def parse_object(obj: Callable[..., Any] | type, *, verify: bool = True) -> PrimFunc | IRModule:
    """Parse the source of a decorated Python function or class (never running its body).

    ``verify`` as for :func:`parse`.
    """
    try:
        src_lines, start = source_lines(obj)
    except (OSError, TypeError) as e:
        raise ScriptParseError(f"cannot read the source of {obj!r}: {e}") from e
    return _checked(_parse_text("".join(src_lines), max(start - 1, 0)), verify)


def _checked(result: PrimFunc | IRModule, verify: bool) -> PrimFunc | IRModule:
    if not isinstance(verify, bool):
        raise ScriptParseError(f"parse: verify must be True or False, got {verify!r}")
    if verify:
        verify_ir(result)
    return result


def _parse_text(source: str, line_offset: int) -> PrimFunc | IRModule:
    if not isinstance(source, str):
        raise ScriptParseError(f"expected script text (str), got {type(source).__name__}")
    if len(source) > MAX_SOURCE_CHARS:
        raise ScriptParseError(
            f"script text of {len(source)} characters exceeds the limit of {MAX_SOURCE_CHARS}"
        )
    lines = source.splitlines()
    indents = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    indent = min(indents, default=0)
    text = "\n".join(ln[indent:] if ln.strip() else "" for ln in lines)
    try:
        tree = parse_python(text)
    except SyntaxError as e:
        line = e.lineno or 0
        src = lines[line - 1].rstrip() if 0 < line <= len(lines) else ""
        col = (e.offset or 0) + indent
        raise ScriptParseError(
            f"invalid Python syntax: {e.msg}", line + line_offset, col, src
        ) from None
    except (RecursionError, MemoryError):  # Python's parser gave up on the nesting
        raise ScriptParseError(
            "the text nests too deeply for Python's parser (expressions or brackets)"
        ) from None
    except ValueError as e:  # e.g. a NUL character
        raise ScriptParseError(f"unreadable script text: {e}") from None
    try:
        return _translate(tree, lines, line_offset, indent, text)
    except RecursionError:
        raise ScriptParseError("the script nests too deeply to translate") from None


def _translate(
    tree: ast.Module, lines: list[str], line_offset: int, indent: int, text: str
) -> PrimFunc | IRModule:
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


class _Parser(StmtParser):
    """Functions and modules, on top of the statement parser."""

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
        params = self.signature(a.args)
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
        stmt = self.function_body(body, node)
        self.pop()
        try:
            return PrimFunc(tuple(params), stmt, attrs, name=node.name)
        except IRError as e:
            self.fail(node, str(e))

    def signature(self, args: list[ast.arg]) -> list[Buffer | Var]:
        """The parameters, scalars defined first: shapes may use any scalar parameter."""
        params: list[tuple[int, Buffer | Var]] = []  # (position, parameter)
        for pos, arg in enumerate(args):
            if arg.annotation is None:
                self.fail(
                    arg, f"parameter {arg.arg!r} needs an annotation (T.Buffer(...) or T.int32)"
                )
            dt = self.scalar_annotation(arg.annotation)
            if dt is not None:
                var = Var(arg.arg, dt)
                self.define(arg, arg.arg, var)
                params.append((pos, var))
        for pos, arg in enumerate(args):
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
                params.append((pos, buf))
        params.sort(key=lambda item: item[0])  # back to the written order (linear keys)
        return [p for _, p in params]

    def function_body(self, body: list[ast.stmt], node: ast.FunctionDef) -> Stmt:
        """The body; leading ``X = T.alloc_buffer(...)`` lines open an implicit root block."""
        allocs: list[ast.Assign] = []
        while (
            body
            and isinstance(body[0], ast.Assign)
            and self.call_name(body[0].value) == "alloc_buffer"
        ):
            allocs.append(body.pop(0))  # type: ignore[arg-type]
        if not allocs:
            return self.body(body, node)
        if not body:
            self.fail(allocs[-1], "the T.alloc_buffer declarations must be followed by statements")
        self.block_names.add("root")
        self.push()
        buffers = []
        for s in allocs:
            target = self.target_name(s)
            assert isinstance(s.value, ast.Call)
            buf = self.buffer_decl(s.value, "alloc_buffer", target)
            self.define(s, target, buf)
            buffers.append(buf)
        inner = self.body(body, node)
        self.pop()
        try:
            root = Block("root", (), (), (), inner, alloc_buffers=tuple(buffers))
            reads, writes = infer_regions(root)
            return BlockRealize((), as_expr(True), root.update(reads=reads, writes=writes))
        except IRError as e:
            self.fail(allocs[0], str(e))

    def is_header(self, s: ast.stmt) -> bool:
        if isinstance(s, ast.Expr):
            return self.call_name(s.value) == "func_attr"
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
            name = self.call_name(s.value) or ""
            return name == "Buffer" or (dtype_of_name(name) is not None and not s.value.args)
        return False

    def declare_var(self, s: ast.Assign) -> None:
        name = self.target_name(s)
        assert isinstance(s.value, ast.Call)
        dt = dtype_of_name(self.call_name(s.value) or "")
        assert dt is not None
        if s.value.keywords:
            self.fail(s.value, "a variable declaration takes no arguments: n = T.int32()")
        self.define(s, name, Var(name, dt))

"""Script form of graph functions and of modules mixing them with PrimFuncs.

A graph function prints as::

    @R.function
    def forward(x: R.Tensor((1, "n", 768), "float32"), w: R.Tensor((256, 768), "float32")
                ) -> R.Tensor((1, "n", 256), "float32"):
        R.func_attr({"num_input": 1})
        cls = Module
        with R.dataflow():
            lv = R.permute_dims(w, axes=None)
            gv = R.call_tir(cls.matmul, (x, lv), out_sinfo=R.Tensor((1, "n", 256), "float32"))
            R.output(gv)
        return gv

Symbolic extents are strings naming int32 shape variables (one Var per name and function;
``"n * 64"`` spells an expression). Operator calls print as ``R.<op>(args, attr=literal)``,
fused-group calls as ``cls.<name>(args)``, constants as ``R.const(R.Tensor(...), "<base64
of the little-endian bytes>")``, an extent read at run time as ``R.bind_symbol(count, "u0",
lower=0, upper="n")`` (its type, ``("u0", 0)``, implied). A module prints as one
``@T.ir_module`` class whose PrimFuncs use the PrimFunc printer. The printer is
:mod:`tilecraft.graph._script_printer`; parsing reads the Python AST (attribute values with
``ast.literal_eval``); nothing is executed.
"""

from __future__ import annotations

import ast
import textwrap
import unicodedata
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import IRError, ScriptParseError, TilecraftError
from ..ir import Add, Attrs, Expr, FloorDiv, IRModule, Mul, PrimFunc, Sub, Var, as_expr
from ..ir import dtype as to_dtype
from ..script._python import parse_python
from ._script_printer import function_lines as function_lines
from ._script_printer import to_script as to_script
from ._script_printer import type_text as type_text
from .ir import (
    Binding,
    CallExtern,
    CallFunc,
    CallTIR,
    Constant,
    Function,
    OpCall,
    TensorType,
    TensorVar,
)
from .ir_bind import BindSymbol, carrier_type
from .op import infer_type

_IND = "    "
_T = TypeVar("_T")
_AST_BINOPS: dict[type[ast.operator], type[Add | Sub | Mul | FloorDiv]] = {
    ast.Add: Add,
    ast.Sub: Sub,
    ast.Mult: Mul,
    ast.FloorDiv: FloorDiv,
}


MAX_SOURCE_CHARS = 32 * 1024 * 1024
"""The longest graph script text :func:`parse` reads (as for PrimFunc script)."""
_MAX_EXTENT_DEPTH = 64  # operators in one symbolic extent such as "(n * 64) // 2"
_LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)


def _is_name(text: str) -> bool:
    """An identifier Python reads back as itself (NFKC-stable)."""
    return text.isidentifier() and unicodedata.normalize("NFKC", text) == text


class _GraphParser:
    def __init__(self, lines: list[str], in_module: bool) -> None:
        self.lines = lines
        self.in_module = in_module

    def fail(self, node: ast.AST | None, msg: str) -> ScriptParseError:
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", -1) + 1
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return ScriptParseError(msg, line, col, src)

    def r_name(self, node: ast.AST) -> str | None:
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "R"
        ):
            return node.attr
        return None

    def literal(self, node: ast.AST) -> Any:
        try:
            return ast.literal_eval(node)
        except _LITERAL_ERRORS:
            raise self.fail(node, "expected a literal value") from None

    def attrs(self, call: ast.Call, what: str) -> Attrs:
        """The dict literal of ``R.func_attr({...})`` / ``T.module_attr({...})``."""
        if len(call.args) != 1 or call.keywords:
            raise self.fail(call, f"{what} takes one dict literal")
        value = self.literal(call.args[0])
        if not isinstance(value, dict):
            raise self.fail(call.args[0], f"{what} takes a dict literal")
        return self.checked(call, lambda: Attrs(value))

    def checked(self, node: ast.AST, build: Callable[[], _T]) -> _T:
        """``build()``, with an IRError from a node constructor located at ``node``."""
        try:
            return build()
        except IRError as e:
            raise self.fail(node, str(e)) from None

    def dim(self, node: ast.AST, svars: dict[str, Var]) -> Expr:
        value = self.literal(node)
        if isinstance(value, int) and not isinstance(value, bool):
            return self.checked(node, lambda: as_expr(value))
        if not isinstance(value, str):
            raise self.fail(node, "extents are ints or strings naming shape variables")
        try:
            tree = parse_python(value, mode="eval").body
        except (SyntaxError, *_LITERAL_ERRORS):
            raise self.fail(node, f"bad extent expression {value!r}") from None
        return self.dim_expr(tree, svars, node, 0)

    def dim_expr(self, e: ast.AST, svars: dict[str, Var], where: ast.AST, depth: int) -> Expr:
        if depth > _MAX_EXTENT_DEPTH:
            raise self.fail(where, f"extent expressions nest at most {_MAX_EXTENT_DEPTH} deep")
        if isinstance(e, ast.Name):
            return svars.setdefault(e.id, Var(e.id, to_dtype("int32")))
        if (
            isinstance(e, ast.Constant)
            and isinstance(e.value, int)
            and not isinstance(e.value, bool)
        ):
            value = e.value
            return self.checked(where, lambda: as_expr(value))
        if isinstance(e, ast.BinOp) and type(e.op) in _AST_BINOPS:
            a = self.dim_expr(e.left, svars, where, depth + 1)
            b = self.dim_expr(e.right, svars, where, depth + 1)
            op = _AST_BINOPS[type(e.op)]
            return self.checked(where, lambda: op(a, b))
        raise self.fail(where, "extent expressions use names, ints, + - * //")

    def tensor_type(self, node: ast.AST | None, svars: dict[str, Var]) -> TensorType:
        if not (
            isinstance(node, ast.Call)
            and self.r_name(node.func) == "Tensor"
            and len(node.args) == 2
            and not node.keywords
            and isinstance(node.args[0], ast.Tuple)
        ):
            raise self.fail(node, 'expected R.Tensor((extents...), "dtype")')
        dt = self.literal(node.args[1])
        if not isinstance(dt, str):
            raise self.fail(node.args[1], 'a tensor\'s dtype is a string such as "float32"')
        dims = tuple(self.dim(d, svars) for d in node.args[0].elts)
        return self.checked(node, lambda: TensorType(dims, to_dtype(dt)))

    def callee(self, node: ast.AST) -> str:
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "cls"
        ):
            return node.attr
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not _is_name(node.value):
                raise self.fail(node, f"{node.value!r} is not a function name")
            return node.value
        raise self.fail(node, "expected cls.<function> or a function name string")

    def function(self, node: ast.FunctionDef) -> Function:
        if len(node.decorator_list) != 1 or self.r_name(node.decorator_list[0]) != "function":
            raise self.fail(node, "a graph function is decorated with @R.function")
        svars: dict[str, Var] = {}
        env: dict[str, TensorVar] = {}
        params = self.params(node, env, svars)
        attrs: Attrs = Attrs()
        bindings: list[Binding] = []
        ret: TensorVar | tuple[TensorVar, ...] | None = None
        for s in node.body:
            if (
                isinstance(s, ast.Expr)
                and isinstance(s.value, ast.Call)
                and self.r_name(s.value.func) == "func_attr"
            ):
                attrs = self.attrs(s.value, "R.func_attr")
            elif isinstance(s, ast.Assign) and ast.unparse(s) == "cls = Module":
                continue
            elif (
                isinstance(s, ast.With)
                and len(s.items) == 1
                and isinstance(s.items[0].context_expr, ast.Call)
                and self.r_name(s.items[0].context_expr.func) == "dataflow"
            ):
                for inner in s.body:
                    if (
                        isinstance(inner, ast.Expr)
                        and isinstance(inner.value, ast.Call)
                        and self.r_name(inner.value.func) == "output"
                    ):
                        continue
                    bindings.append(self.binding(inner, env, svars))
            elif isinstance(s, ast.Return) and isinstance(s.value, ast.Name):
                ret = self.lookup(s.value, env)
            elif isinstance(s, ast.Return) and isinstance(s.value, ast.Tuple) and s.value.elts:
                ret = tuple(self.lookup(e, env) for e in s.value.elts)
            else:
                raise self.fail(s, "unexpected statement in a graph function")
        if ret is None:
            raise self.fail(node, "a graph function ends with `return <var>` or `return a, b`")
        result = ret
        return self.checked(
            node, lambda: Function(tuple(params), tuple(bindings), result, attrs, node.name)
        )

    def params(
        self, node: ast.FunctionDef, env: dict[str, TensorVar], svars: dict[str, Var]
    ) -> list[TensorVar]:
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise self.fail(node, "parameters must be plain 'name: R.Tensor(...)' entries")
        params = []
        for arg in a.args:
            if arg.arg in env:
                raise self.fail(arg, f"duplicate parameter {arg.arg!r}")
            v = TensorVar(arg.arg, self.tensor_type(arg.annotation, svars))
            env[arg.arg] = v
            params.append(v)
        return params

    def lookup(self, node: ast.AST, env: dict[str, TensorVar]) -> TensorVar:
        if not isinstance(node, ast.Name) or node.id not in env:
            raise self.fail(node, f"unknown tensor {ast.unparse(node)!r}")
        return env[node.id]

    def binding(self, s: ast.stmt, env: dict[str, TensorVar], svars: dict[str, Var]) -> Binding:
        ann: ast.expr | None = None
        if (
            isinstance(s, ast.AnnAssign)
            and isinstance(s.target, ast.Name)
            and isinstance(s.value, ast.Call)
        ):
            name, call, ann = s.target.id, s.value, s.annotation
        elif (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Call)
        ):
            name, call = s.targets[0].id, s.value
        else:
            raise self.fail(s, "expected `name = R.<op>(...)` in a dataflow block")
        op = self.r_name(call.func)
        value: OpCall | CallTIR | CallExtern | CallFunc | Constant | BindSymbol
        if op == "const" and ann is None:
            value = self.constant(call, svars)
            t = value.type
        elif op in ("call_func", None):
            if ann is None:
                raise self.fail(
                    s,
                    "a call of a graph function needs its type: write "
                    f"`{name}: R.Tensor(...) = cls.f(...)`",
                )
            t = self.tensor_type(ann, svars)
            if call.keywords or (op == "call_func" and not call.args):
                raise self.fail(call, "a graph function call takes the function and tensors")
            target = call.args[0] if op == "call_func" else call.func
            rest = call.args[1:] if op == "call_func" else call.args
            args = tuple(self.lookup(a, env) for a in rest)
            value = CallFunc(self.callee(target), args)
        elif ann is not None:
            raise self.fail(s, "only calls of graph functions carry a type annotation")
        elif op == "call_tir":
            value = self.call_tir(call, env, svars)
            t = value.out_type
        elif op == "call_extern":
            value = self.call_extern(call, env, svars)
            t = value.out_type
        elif op == "bind_symbol":
            value = self.bind_symbol(call, env, svars)
            t = carrier_type(value.symbol, value.source.type)
        else:
            value, t = self.op_call(op, call, env)
        var = TensorVar(name, t)
        env[name] = var
        return Binding(var, value)

    def constant(self, call: ast.Call, svars: dict[str, Var]) -> Constant:
        if len(call.args) != 2 or call.keywords:
            raise self.fail(call, 'expected R.const(R.Tensor(...), "base64 data")')
        payload = self.literal(call.args[1])
        if not isinstance(payload, str):
            raise self.fail(call.args[1], "constant data is a base64 string")
        try:
            return Constant.from_payload(self.tensor_type(call.args[0], svars), payload)
        except IRError as e:
            raise self.fail(call, str(e)) from None

    def op_call(
        self, op: str, call: ast.Call, env: dict[str, TensorVar]
    ) -> tuple[OpCall, TensorType]:
        if any(k.arg is None for k in call.keywords):
            raise self.fail(call, "operator attributes are keyword=literal")
        raw = {k.arg: self.literal(k.value) for k in call.keywords if k.arg}
        attrs = self.checked(call, lambda: Attrs(raw))
        args = tuple(self.lookup(a, env) for a in call.args)
        value = OpCall(op, args, attrs)
        try:
            return value, infer_type(op, [a.type for a in args], attrs)
        except TilecraftError:
            raise
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError,
                ZeroDivisionError, RecursionError) as e:  # fmt: skip
            # an attribute of the wrong kind tripped the operator's shape rule
            raise self.fail(call, f"R.{op}: invalid attributes {dict(attrs)!r} ({e})") from None

    def call_tir(self, call: ast.Call, env: dict[str, TensorVar], svars: dict[str, Var]) -> CallTIR:
        kw = {k.arg: k.value for k in call.keywords}
        if (
            len(call.args) != 2
            or not isinstance(call.args[1], ast.Tuple)
            or set(kw) != {"out_sinfo"}
        ):
            raise self.fail(call, "expected R.call_tir(func, (args,), out_sinfo=R.Tensor(...))")
        t = self.tensor_type(kw["out_sinfo"], svars)
        args = tuple(self.lookup(a, env) for a in call.args[1].elts)
        name = self.callee(call.args[0])
        return self.checked(call, lambda: CallTIR(name, args, t))

    def call_extern(
        self, call: ast.Call, env: dict[str, TensorVar], svars: dict[str, Var]
    ) -> CallExtern:
        kw = {k.arg: k.value for k in call.keywords}
        if (
            len(call.args) != 2
            or not isinstance(call.args[1], ast.Tuple)
            or "out_sinfo" not in kw
            or None in kw
        ):
            raise self.fail(
                call,
                'expected R.call_extern("lib.routine", (args,), out_sinfo=R.Tensor(...), '
                "attr=literal, ...)",
            )
        name = self.literal(call.args[0])
        if not isinstance(name, str):
            raise self.fail(call.args[0], "the external routine is named by a string")
        t = self.tensor_type(kw.pop("out_sinfo"), svars)
        raw = {k: self.literal(v) for k, v in kw.items() if k is not None}
        attrs = self.checked(call, lambda: Attrs(raw))
        args = tuple(self.lookup(a, env) for a in call.args[1].elts)
        return self.checked(call, lambda: CallExtern(name, args, t, attrs))

    def bind_symbol(
        self, call: ast.Call, env: dict[str, TensorVar], svars: dict[str, Var]
    ) -> BindSymbol:
        kw = {k.arg: k.value for k in call.keywords}
        name = self.literal(call.args[1]) if len(call.args) == 2 else None
        if set(kw) != {"lower", "upper"} or not isinstance(name, str) or not _is_name(name):
            raise self.fail(
                call,
                'expected R.bind_symbol(tensor, "name", lower=..., upper=...) (ints or extents)',
            )
        src = self.lookup(call.args[0], env)
        lower, upper = self.dim(kw["lower"], svars), self.dim(kw["upper"], svars)
        sym = svars.setdefault(name, Var(name, to_dtype("int32")))
        return self.checked(call, lambda: BindSymbol((src,), sym, lower, upper))


def parse(text: str) -> Function | IRModule:
    """Parse a graph function or a module (graph functions and PrimFuncs) from script text.

    Raises
    ------
    ScriptParseError
        When the text is not valid graph script (or is longer than :data:`MAX_SOURCE_CHARS`);
        errors of the operators' type rules surface as :class:`GraphError`.
    """
    if not isinstance(text, str):
        raise ScriptParseError(f"expected script text (str), got {type(text).__name__}")
    if len(text) > MAX_SOURCE_CHARS:
        raise ScriptParseError(
            f"script text of {len(text)} characters exceeds the limit of {MAX_SOURCE_CHARS}"
        )
    text = textwrap.dedent(text)
    lines = text.splitlines()
    try:
        tree = parse_python(text)
    except SyntaxError as e:
        raise ScriptParseError(f"invalid Python syntax: {e.msg}", e.lineno or 0) from None
    except (RecursionError, MemoryError):
        raise ScriptParseError("the text nests too deeply for Python's parser") from None
    except ValueError as e:  # e.g. a NUL character
        raise ScriptParseError(f"unreadable script text: {e}") from None
    try:
        return _translate(tree, lines)
    except RecursionError:
        raise ScriptParseError("the script nests too deeply to translate") from None


def _translate(tree: ast.Module, lines: list[str]) -> Function | IRModule:
    defs = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    if len(defs) != 1:
        raise ScriptParseError("expected one @R.function or one @T.ir_module class")
    top = defs[0]
    if isinstance(top, ast.FunctionDef):
        return _GraphParser(lines, False).function(top)
    if not isinstance(top, ast.ClassDef):
        raise ScriptParseError("expected one @R.function or one @T.ir_module class")
    from ..script import parse as parse_prim

    gp = _GraphParser(lines, True)
    funcs: dict[str, Any] = {}
    attrs: Attrs = Attrs()
    for s in top.body:
        if isinstance(s, ast.FunctionDef) and s.name in funcs:
            raise gp.fail(s, f"duplicate function name {s.name!r} in the module")
        if (
            isinstance(s, ast.FunctionDef)
            and s.decorator_list
            and gp.r_name(s.decorator_list[0]) == "function"
        ):
            funcs[s.name] = gp.function(s)
        elif isinstance(s, ast.FunctionDef):
            first = min([s.lineno, *(d.lineno for d in s.decorator_list)])
            segment = "\n".join(lines[first - 1 : s.end_lineno])
            func = parse_prim(textwrap.dedent(segment))
            if not isinstance(func, PrimFunc):
                raise gp.fail(s, "expected a @T.prim_func")
            funcs[s.name] = func
        elif (
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Call)
            and ast.unparse(s.value.func) == "T.module_attr"
        ):
            attrs = gp.attrs(s.value, "T.module_attr")
        elif not isinstance(s, ast.Pass):
            raise gp.fail(s, "a module holds @T.prim_func and @R.function definitions")
    return gp.checked(top, lambda: IRModule(funcs, attrs))

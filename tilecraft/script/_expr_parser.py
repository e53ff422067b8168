"""Expression half of the script parser: scopes, positions, literals and ``ast`` -> Expr."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Generator
from typing import Any, NoReturn

from ..errors import IRError, ScriptParseError
from ..ir import (
    DEVICE_INTRINSICS,
    EQ,
    GE,
    GT,
    INTRINSICS,
    LE,
    LT,
    NE,
    Add,
    And,
    Buffer,
    BufferLoad,
    Cast,
    DataType,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Range,
    Select,
    Sub,
    Var,
    as_expr,
    dtype,
    negate,
)
from ..ir.device_intrin import call_device
from ..ir.op import call_intrin
from ._names import EXPR_NAMES, dtype_of_name, is_known

Raw = int | float | bool
Value = Expr | Raw
_Step = Generator[ast.expr, Value, Value]  # yields sub-expressions, receives their values
_BOOL = dtype("bool")

_BINOPS: dict[type, Callable[[Expr, Expr], Expr]] = {
    ast.Add: Add, ast.Sub: Sub, ast.Mult: Mul, ast.Div: Div, ast.FloorDiv: FloorDiv,
    ast.Mod: FloorMod,
}  # fmt: skip
_CMPOPS: dict[type, Callable[[Expr, Expr], Expr]] = {
    ast.Eq: EQ, ast.NotEq: NE, ast.Lt: LT, ast.LtE: LE, ast.Gt: GT, ast.GtE: GE,
}  # fmt: skip
_SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class ExprParser:
    """Scopes of names and the translation of Python expressions to IR expressions."""

    def __init__(self, lines: list[str], line_offset: int, col_offset: int) -> None:
        self.lines = lines
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.scopes: list[dict[str, Var | Buffer]] = [{}]

    # errors ---------------------------------------------------------------------------------
    def error(self, node: ast.AST | None, message: str) -> ScriptParseError:
        """A ScriptParseError located at ``node`` (line/column of the original text)."""
        if node is None or not hasattr(node, "lineno"):
            return ScriptParseError(message)
        line = int(node.lineno)
        col = int(getattr(node, "col_offset", 0)) + 1 + self.col_offset
        text = self.lines[line - 1].rstrip() if 0 < line <= len(self.lines) else ""
        return ScriptParseError(message, line + self.line_offset, col, text)

    def fail(self, node: ast.AST | None, message: str) -> NoReturn:
        """Raise :meth:`error`."""
        raise self.error(node, message)

    # scopes ---------------------------------------------------------------------------------
    def push(self) -> None:
        """Open a nested scope."""
        self.scopes.append({})

    def pop(self) -> None:
        """Close the innermost scope."""
        self.scopes.pop()

    def define(self, node: ast.AST, name: str, obj: Var | Buffer) -> None:
        """Bind ``name`` in the innermost scope."""
        if name == "T":
            self.fail(node, "the name 'T' is reserved for the script namespace")
        self.scopes[-1][name] = obj

    def lookup(self, name: str) -> Var | Buffer | None:
        """The variable or buffer ``name`` refers to, innermost scope first."""
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def buffer(self, node: ast.expr) -> Buffer:
        """The buffer named by ``node``."""
        if not isinstance(node, ast.Name):
            self.fail(node, f"expected a buffer name, got {ast.unparse(node)!r}")
        obj = self.lookup(node.id)
        if obj is None:
            self.fail(node, f"undefined buffer {node.id!r} (buffers must be declared before use)")
        if not isinstance(obj, Buffer):
            self.fail(node, f"{node.id!r} is a variable, not a buffer")
        return obj

    def t_name(self, node: ast.expr) -> str | None:
        """``"axis.spatial"`` for ``T.axis.spatial``; a bare known name not shadowed; else None."""
        parts: list[str] = []
        cur = node
        while isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
        if not isinstance(cur, ast.Name):
            return None
        if cur.id == "T" and parts:
            return ".".join(reversed(parts))
        if not parts and self.lookup(cur.id) is None and is_known(cur.id):
            return cur.id
        return None

    def callee(self, node: ast.Call) -> str:
        """The ``T`` function a call names; unknown names are errors."""
        name = self.t_name(node.func)
        if name is None:
            what = ast.unparse(node.func)
            self.fail(node, f"unknown function {what!r}; expected a T.<name> script function")
        if not is_known(name):
            self.fail(node, f"unknown script function T.{name}")
        return name

    def check_args(
        self, node: ast.Call, name: str, low: int, high: int, kw: tuple[str, ...] = ()
    ) -> None:
        """Check the positional arity and keyword names of a call to ``T.<name>``."""
        n = len(node.args)
        if not low <= n <= high:
            want = str(low) if low == high else f"{low} to {high}"
            self.fail(node, f"T.{name} expects {want} positional argument(s), got {n}")
        for k in node.keywords:
            if k.arg not in kw:
                allowed = ", ".join(kw) or "none"
                self.fail(k, f"T.{name} got an unexpected keyword {k.arg!r} (allowed: {allowed})")
        if any(isinstance(a, ast.Starred) for a in node.args):
            self.fail(node, f"T.{name}: *args are not supported")

    def keyword(self, node: ast.Call, name: str) -> ast.expr | None:
        """The value of keyword ``name`` in ``node``, if given."""
        for k in node.keywords:
            if k.arg == name:
                return k.value
        return None

    def string(self, node: ast.expr, what: str) -> str:
        """A string literal."""
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            self.fail(node, f"{what} must be a string literal, got {ast.unparse(node)!r}")
        return node.value

    def dtype_arg(self, node: ast.expr) -> DataType:
        """A dtype: a string literal such as ``"float32"``, or numpy's spelling of one
        (``np.float32``, ``np.dtype("float16")``; the module name is not checked)."""
        text = _numpy_dtype_text(node)
        if text is None:
            text = self.string(node, "a dtype")
        try:
            return dtype(text)
        except IRError as e:
            self.fail(node, f"bad dtype {text!r}: {e}")

    # expressions ----------------------------------------------------------------------------
    def expr(self, node: ast.expr, like: DataType | None = None) -> Expr:
        """Translate ``node``; Python literals take dtype ``like`` (default int32/float32)."""
        return self.coerce(node, self.value(node), like)

    def pair(self, node: ast.AST, a: Value, b: Value) -> tuple[Expr, Expr]:
        """Give a literal operand the dtype of the other operand."""
        try:
            if isinstance(a, Expr):
                return a, as_expr(b, a.dtype)
            if isinstance(b, Expr):
                return as_expr(a, b.dtype), b
            return as_expr(a), as_expr(b)
        except (IRError, OverflowError) as e:
            self.fail(node, str(e))

    def value(self, root: ast.expr) -> Value:
        """Translate ``root`` to an Expr, or a Python scalar when it is a plain literal.

        Each node is translated by a generator that yields its sub-expressions and receives
        their values; this loop runs them from its own stack, so any depth Python's own parser
        accepts is translated without recursion.
        """
        stack: list[tuple[ast.expr, _Step]] = [(root, self._value(root))]
        result: Any = None  # what the top generator receives next (None to start it)
        while stack:
            node, step = stack[-1]
            try:
                child = step.send(result)
            except StopIteration as stop:
                stack.pop()
                result = stop.value
                continue
            except (IRError, OverflowError) as e:
                self.fail(node, str(e))
            stack.append((child, self._value(child)))
            result = None
        return result  # type: ignore[no-any-return]

    def coerce(self, node: ast.expr, value: Value, like: DataType | None = None) -> Expr:
        """``value`` (translated from ``node``) as an Expr; literals take dtype ``like``."""
        try:
            return as_expr(value, like)
        except (IRError, OverflowError) as e:
            self.fail(node, str(e))

    def _value(self, node: ast.expr) -> _Step:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)):
                return node.value
            self.fail(node, f"unexpected constant {node.value!r} in an expression")
        if isinstance(node, ast.Name):
            return self.name_value(node)
        if isinstance(node, (ast.UnaryOp, ast.BinOp, ast.BoolOp, ast.Compare)):
            return (yield from self.operator(node))
        if isinstance(node, ast.Call):
            return (yield from self.call(node))
        if isinstance(node, ast.Subscript):
            buf = self.buffer(node.value)
            indices: list[Expr] = []
            for index in self.index_items(node):
                indices.append(self.coerce(index, (yield index)))
            return BufferLoad(buf, tuple(indices))
        if isinstance(node, ast.IfExp):
            t = yield node.body
            f = yield node.orelse
            cond = self.coerce(node.test, (yield node.test), _BOOL)
            return Select(cond, *self.pair(node, t, f))
        self.fail(node, f"unsupported expression {ast.unparse(node)!r}")

    def operator(self, node: ast.UnaryOp | ast.BinOp | ast.BoolOp | ast.Compare) -> _Step:
        """Unary, binary, boolean and comparison operators."""
        if isinstance(node, ast.UnaryOp):
            operand = yield node.operand
            if isinstance(node.op, (ast.Not, ast.Invert)):
                return Not(self.coerce(node.operand, operand, _BOOL))
            if isinstance(node.op, ast.UAdd):
                return operand
            if isinstance(operand, Expr):
                return negate(operand)
            return -operand
        if isinstance(node, ast.BoolOp):
            items = []
            for v in node.values:
                items.append(self.coerce(v, (yield v), _BOOL))
            ctor = And if isinstance(node.op, ast.And) else Or
            out = items[0]
            for item in items[1:]:
                out = ctor(out, item)
            return out
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                self.fail(node, "chained comparisons are not supported; combine with 'and'")
            cmp = _CMPOPS.get(type(node.ops[0]))
            if cmp is None:
                self.fail(node, f"unsupported comparison {type(node.ops[0]).__name__}")
            a = yield node.left
            return cmp(*self.pair(node, a, (yield node.comparators[0])))
        a = yield node.left
        b = yield node.right
        if isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            x, y = self.coerce(node.left, a, _BOOL), self.coerce(node.right, b, _BOOL)
            return And(x, y) if isinstance(node.op, ast.BitAnd) else Or(x, y)
        op = _BINOPS.get(type(node.op))
        if op is None:
            sym = type(node.op).__name__
            self.fail(node, f"unsupported operator {sym}; expected + - * / // %")
        return op(*self.pair(node, a, b))

    def name_value(self, node: ast.Name) -> Value:
        """The variable ``node`` names."""
        obj = self.lookup(node.id)
        if obj is None:
            self.fail(node, f"undefined variable {node.id!r} (used before its definition)")
        if isinstance(obj, Buffer):
            self.fail(node, f"buffer {node.id!r} used as a value; index it: {node.id}[...]")
        return obj

    def index_items(self, node: ast.Subscript) -> list[ast.expr]:
        """The index nodes of ``A[i, j]`` (``A[()]`` has none); slices are rejected."""
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for item in items:
            if isinstance(item, ast.Slice):
                self.fail(item, "slices are only allowed in T.reads/T.writes regions")
        return items

    def indices(self, node: ast.Subscript) -> list[Expr]:
        """The index expressions of ``A[i, j]`` (``A[()]`` has none)."""
        return [self.expr(item) for item in self.index_items(node)]

    def call(self, node: ast.Call) -> _Step:
        """``T.int64(5)``, ``T.exp(x)``, ``T.max(a, b)``, ``T.Select(c, a, b)``, ``T.Cast(...)``."""
        name = self.callee(node)
        dt = dtype_of_name(name)
        if dt is not None:
            return (yield from self.constant(node, name, dt))
        if name not in EXPR_NAMES:
            self.fail(node, f"T.{name} is not an expression (it cannot be used as a value)")
        if name in ("min", "max"):
            self.check_args(node, name, 2, 2)
            a = yield node.args[0]
            b = yield node.args[1]
            x, y = self.pair(node, a, b)
            return Min(x, y) if name == "min" else Max(x, y)
        if name in ("Select", "if_then_else"):
            self.check_args(node, name, 3, 3)
            cond = self.coerce(node.args[0], (yield node.args[0]), _BOOL)
            t = yield node.args[1]
            f = yield node.args[2]
            return Select(cond, *self.pair(node, t, f))
        if name == "Cast":
            self.check_args(node, name, 2, 2)
            target = self.dtype_arg(node.args[0])
            return Cast(target, self.coerce(node.args[1], (yield node.args[1])))
        if name not in INTRINSICS:  # a device intrinsic: arguments keep their own dtypes
            return (yield from self.device_call(node, name))
        arity = INTRINSICS[name].arity
        self.check_args(node, name, arity, arity)
        args: list[Value] = []
        for arg in node.args:
            args.append((yield arg))
        return call_intrin(name, *args)

    def device_call(self, node: ast.Call, name: str) -> _Step:
        """``T.mma_fill(C[0, 0], T.float32(0.0))``: a device intrinsic (int32, for effect)."""
        n = len(DEVICE_INTRINSICS[name].signature)
        self.check_args(node, name, n, n)
        args: list[Value] = []
        for arg in node.args:
            args.append((yield arg))
        try:
            return call_device(name, *args)
        except IRError as e:
            self.fail(node, str(e))

    def constant(self, node: ast.Call, name: str, dt: DataType) -> _Step:
        """``T.int64(5)``, ``T.float32(0.5)``, ``T.float32("nan")``, ``T.bool(True)``."""
        self.check_args(node, name, 1, 1)
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            special = _SPECIAL_FLOATS.get(arg.value)
            if special is None or not dt.is_float:
                self.fail(
                    arg, f'T.{name}: expected a number or "nan"/"inf"/"-inf", got {arg.value!r}'
                )
            return FloatImm(dt, special)
        raw = yield arg
        if isinstance(raw, Expr):
            self.fail(
                arg, f"T.{name}(...) takes a literal number; convert an expression with T.Cast"
            )
        if dt.is_float:
            return FloatImm(dt, float(raw))
        if isinstance(raw, float):
            self.fail(arg, f"T.{name} expects an integer literal, got {raw!r}")
        return IntImm(dt, int(raw))

    def range_from(self, lo_node: ast.expr, hi_node: ast.expr) -> Range:
        """The Range printed as ``lo, hi`` (``hi`` is ``lo + extent`` unless both are constants)."""
        lo = self.value(lo_node)
        if isinstance(lo, (int, float)) and not isinstance(lo, bool) and lo == 0:
            lo_e, ext = self.pair(hi_node, lo, self.value(hi_node))
            return Range(lo_e, ext)
        if isinstance(lo, IntImm) and lo.value == 0:
            return Range(lo, self.expr(hi_node, lo.dtype))
        if (
            isinstance(hi_node, ast.BinOp)
            and isinstance(hi_node.op, ast.Add)
            and ast.dump(hi_node.left) == ast.dump(lo_node)
        ):
            return Range(*self.pair(hi_node, lo, self.value(hi_node.right)))
        lo_e, hi_e = self.pair(hi_node, lo, self.value(hi_node))
        if isinstance(lo_e, IntImm) and isinstance(hi_e, IntImm):
            return Range(lo_e, IntImm(lo_e.dtype, hi_e.value - lo_e.value))
        return Range(lo_e, Sub(hi_e, lo_e))

    def extent_range(self, node: ast.expr) -> Range:
        """``ext`` as ``Range(0, ext)`` or a ``(lo, hi)`` tuple as :meth:`range_from`."""
        if isinstance(node, ast.Tuple):
            if len(node.elts) != 2:
                self.fail(node, "a domain tuple must be (min, stop)")
            return self.range_from(node.elts[0], node.elts[1])
        ext = self.expr(node)
        return Range(as_expr(0, ext.dtype), ext)

    # literals for attributes ----------------------------------------------------------------
    def literal(self, node: ast.expr) -> object:
        """A literal attribute value: numbers, strings, bools, None, lists and dicts of those."""
        if isinstance(node, ast.Constant) and isinstance(
            node.value, (bool, int, float, str, type(None))
        ):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.literal(node.operand)
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.literal(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out: dict[str, object] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:
                    self.fail(v, "'**' is not allowed in attribute dicts")
                out[self.string(k, "an attribute key")] = self.literal(v)
            return out
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "float"
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in ("inf", "-inf")
        ):
            return float(node.args[0].value)
        self.fail(node, f"expected a literal attribute value, got {ast.unparse(node)!r}")


def _numpy_dtype_text(node: ast.expr) -> str | None:
    """``"float32"`` for ``np.float32`` or ``np.dtype("float32")``; None for other syntax."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return "bool" if node.attr == "bool_" else node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "dtype"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None

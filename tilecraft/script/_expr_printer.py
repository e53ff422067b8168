"""Expression half of the printer: names, literals and expressions (package-private).

Expressions print without recursion: a stack of pending pieces (text, or a sub-expression with
the loosest precedence it may have unparenthesized) is expanded left to right, so any depth
prints in time linear in the output.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

from ..ir import (
    And,
    Attrs,
    Buffer,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    Expr,
    FloatImm,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    Sub,
    Var,
)
from ..ir import BinaryOp as _BinaryOp
from ._names import RESERVED

# Python operator precedence, loosest first (COND: ``t if c else f``)
COND, OR, AND, NOT, CMP, ADD, MUL, UNARY, ATOM = range(9)
_BIN_PREC = {"+": ADD, "-": ADD, "*": MUL, "/": MUL, "//": MUL, "%": MUL}
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
            "\f": "\\f"}  # fmt: skip
_SUFFIXED = re.compile(r"(.+)_([1-9][0-9]*)")


def quote(text: str) -> str:
    """``text`` as a double-quoted, ASCII-only Python string literal.

    Characters outside the Basic Multilingual Plane become one ``\\U`` escape (not a JSON
    surrogate pair, which Python would read back as two characters); lone surrogates keep
    their ``\\u`` escape, so every string survives the round trip exactly.
    """
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _is_name(text: str) -> bool:
    """True when Python reads ``text`` back as exactly this identifier (NFKC-stable)."""
    return text.isidentifier() and unicodedata.normalize("NFKC", text) == text


def sanitize(hint: str) -> str:
    """A Python identifier close to ``hint`` that reads back as itself.

    Python folds identifiers to NFKC (``𝑥`` reads as ``x``), so the hint is folded first;
    characters that cannot continue an identifier become ``_``, and a ``v`` is prefixed when
    the first cannot start one.
    """
    folded = unicodedata.normalize("NFKC", hint)
    name = "".join(c if ("_" + c).isidentifier() else "_" for c in folded) or "v"
    if not name.isidentifier():
        name = "v" + name
    if not _is_name(name):
        name = re.sub(r"\W", "_", hint, flags=re.ASCII) or "v"
        name = "v" + name if name[0].isdigit() else name
    return name


class Namer:
    """Scoped names: a new binding avoids every name visible at that point.

    A name ``base_k`` takes the smallest free ``k``; a per-base lower bound on the free
    suffixes keeps long chains of same-named bindings linear.
    """

    def __init__(self) -> None:
        self._scopes: list[list[tuple[str, int]]] = [[]]
        self._visible: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._hint: dict[str, int] = {}

    def push(self) -> None:
        """Open a scope."""
        self._scopes.append([])

    def pop(self) -> None:
        """Close the innermost scope, freeing its names."""
        for name, key in self._scopes.pop():
            self._release(name, key)

    def _release(self, name: str, key: int) -> None:
        self._names.pop(key, None)
        self._visible[name] -= 1
        if self._visible[name]:
            return
        del self._visible[name]
        self._hint[name] = 0
        m = _SUFFIXED.fullmatch(name)
        if m is not None:
            base, k = m.group(1), int(m.group(2))
            self._hint[base] = min(self._hint.get(base, 0), k)

    def _taken(self, name: str) -> bool:
        return name in RESERVED or name in self._visible

    def define(self, obj: Var | Buffer) -> str:
        """Bind ``obj`` in the innermost scope; returns its printed name."""
        base = sanitize(obj.name)
        k = self._hint.get(base, 0)
        name = base if k == 0 else f"{base}_{k}"
        while self._taken(name):
            k += 1
            name = f"{base}_{k}"
        self._hint[base] = k + 1
        self._scopes[-1].append((name, id(obj)))
        self._visible[name] = self._visible.get(name, 0) + 1
        self._names[id(obj)] = name
        return name

    def get(self, obj: Var | Buffer) -> str:
        """The name of ``obj``; an unbound one (a fragment, or malformed IR) is named once in
        the outermost scope."""
        name = self._names.get(id(obj))
        if name is None:
            saved, self._scopes = self._scopes, self._scopes[:1]
            name = self.define(obj)
            self._scopes = [self._scopes[0], *saved[1:]]
        return name


def _is_negation(e: Expr) -> bool:
    """What :func:`negate` makes (``0 - x`` for integers, ``x * -1`` for floats) with a
    non-constant ``x``: printed ``-x``, which the parser reads back as is.

    (``0 - (0 - (0 - x))`` would nest brackets as deep as the unary chain it came from,
    beyond what Python reads back.) A float ``0.0 - x`` is not a negation (it gives ``+0.0``
    for ``x = +0.0``) and prints as the subtraction it is.
    """
    if isinstance(e, Sub) and not isinstance(e.b, (IntImm, FloatImm)):
        return isinstance(e.a, IntImm) and e.a.value == 0
    if isinstance(e, Mul) and not isinstance(e.a, (IntImm, FloatImm)):
        return isinstance(e.b, FloatImm) and e.b.value == -1.0
    return False


def _negated(e: Expr) -> Expr:
    """The operand of a negation (see :func:`_is_negation`)."""
    return e.b if isinstance(e, Sub) else e.a  # type: ignore[attr-defined]


def precedence(e: Expr) -> int:
    """How loosely the printed form of ``e`` binds (Python operator precedence)."""
    if isinstance(e, (Min, Max)):
        return ATOM
    if isinstance(e, Select):
        return COND
    if _is_negation(e):
        return UNARY
    if isinstance(e, _BinaryOp):
        return _BIN_PREC[e.symbol]
    if isinstance(e, CmpOp):
        return CMP
    if isinstance(e, And):
        return AND
    if isinstance(e, Or):
        return OR
    if isinstance(e, Not):
        return NOT
    if isinstance(e, IntImm) and str(e.dtype) == "int32" and e.value < 0:
        return UNARY
    return ATOM


_Piece = str | tuple[Expr, int]


class ExprPrinter:
    """Prints expressions with names from a shared :class:`Namer`."""

    def __init__(self, names: Namer) -> None:
        self.names = names

    def expr(self, e: Expr, minimum: int = 0) -> str:
        """``e`` as text, parenthesized when it binds looser than ``minimum``."""
        if isinstance(e, Var):  # the common leaves, without the stack
            return self.names.get(e)
        if isinstance(e, IntImm) and e.value >= 0:
            return int_text(e)
        out: list[str] = []
        stack: list[_Piece] = [(e, minimum)]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
                continue
            node, least = item
            parts = self.parts(node)
            if precedence(node) < least:
                parts = ["(", *parts, ")"]
            stack.extend(reversed(parts))
        return "".join(out)

    def parts(self, e: Expr) -> list[_Piece]:
        """The printed form of ``e`` one level deep: text and sub-expressions in order."""
        if isinstance(e, Var):
            return [self.names.get(e)]
        if isinstance(e, IntImm):
            return [int_text(e)]
        if isinstance(e, FloatImm):
            return [float_text(e)]
        if isinstance(e, (Min, Max)):
            return [f"T.{e.symbol}(", (e.a, 0), ", ", (e.b, 0), ")"]
        if _is_negation(e):
            return ["-", (_negated(e), UNARY)]
        if isinstance(e, _BinaryOp):
            p = _BIN_PREC[e.symbol]
            return [(e.a, p), f" {e.symbol} ", (e.b, p + 1)]
        if isinstance(e, CmpOp):
            return [(e.a, CMP + 1), f" {e.symbol} ", (e.b, CMP + 1)]
        if isinstance(e, And):
            return [(e.a, AND), " and ", (e.b, AND + 1)]
        if isinstance(e, Or):
            return [(e.a, OR), " or ", (e.b, OR + 1)]
        if isinstance(e, Not):
            return ["not ", (e.a, NOT)]
        if isinstance(e, Select):  # right-nested chains print without brackets
            return [(e.true_value, OR), " if ", (e.condition, OR), " else ", (e.false_value, COND)]
        if isinstance(e, Cast):
            return [f'T.Cast("{e.dtype}", ', (e.value, 0), ")"]
        if isinstance(e, Call):
            return self.call(f"T.{e.op}", e.args)
        if isinstance(e, BufferLoad):
            return [self.names.get(e.buffer), *self.call("", e.indices, "[]")]
        return [f"<{type(e).__name__}>"]

    @staticmethod
    def call(head: str, args: tuple[Expr, ...], brackets: str = "()") -> list[_Piece]:
        """``head(a, b, ...)``; ``X[()]`` for an empty subscript."""
        if not args and brackets == "[]":
            return ["[()]"]
        out: list[_Piece] = [head + brackets[0]]
        for k, a in enumerate(args):
            if k:
                out.append(", ")
            out.append((a, 0))
        out.append(brackets[1])
        return out


def int_text(e: IntImm) -> str:
    """int32 as a plain int, bool as True/False, other types as ``T.int64(5)``."""
    if e.dtype.is_bool:
        return "True" if e.value else "False"
    if str(e.dtype) == "int32":
        return str(e.value)
    return f"T.{e.dtype}({e.value})"


def float_text(e: FloatImm) -> str:
    """``T.float32(0.5)`` (shortest exact repr), ``T.float32("nan")``, ``T.float32("inf")``."""
    v = e.value
    if math.isnan(v):
        text = '"nan"'
    elif math.isinf(v):
        text = '"inf"' if v > 0 else '"-inf"'
    else:
        text = repr(v)
    return f"T.{e.dtype}({text})"


def attrs_text(attrs: Attrs) -> str:
    """An attribute dict literal the parser reads back exactly."""
    return "{" + ", ".join(f"{quote(k)}: {attr_value(v)}" for k, v in attrs.items()) + "}"


def attr_value(v: Any) -> str:
    """One attribute value as a literal."""
    if isinstance(v, Attrs):
        return attrs_text(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(attr_value(x) for x in v) + "]"
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, float) and math.isinf(v):
        return 'float("inf")' if v > 0 else 'float("-inf")'
    return repr(v)

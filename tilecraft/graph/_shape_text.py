"""Symbolic extents as attribute text: ``"n * 12"``, ``"n + 1"``, ``"n // 2"``.

Graph attributes hold only plain values (no expressions), so an operator whose result shape
holds a symbolic extent that its arguments do not give directly (a flattening reshape, a
slice up to ``n``, a ``full`` of ``(b, n)``) carries that extent as text over the names of
shape variables its arguments hold. The grammar is integers, names, ``+ - * //`` and
parentheses; the parser builds IR expressions, it never evaluates Python.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import GraphError
from ..ir import Add, Expr, FloorDiv, FloorMod, IntImm, Mul, Sub, Var, as_expr

_TOKEN = re.compile(r"\s*(\d+|[A-Za-z_]\w*|//|%|[-+*()])")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise GraphError(f"extent {text!r}: unexpected text at {text[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


class _Parser:
    """Recursive descent over the token list (sum of products of atoms)."""

    def __init__(self, text: str, names: Mapping[str, Var]) -> None:
        self.text, self.names, self.toks, self.pos = text, names, _tokens(text), 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise GraphError(f"extent {self.text!r}: ends early")
        self.pos += 1
        return tok

    def sum(self) -> Expr:
        e = self.product()
        while self.peek() in ("+", "-"):
            e = e + self.product() if self.take() == "+" else e - self.product()
        return e

    def product(self) -> Expr:
        e = self.atom()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            rhs = self.atom()
            e = e * rhs if op == "*" else e // rhs if op == "//" else e % rhs
        return e

    def atom(self) -> Expr:
        tok = self.take()
        if tok == "(":
            e = self.sum()
            if self.take() != ")":
                raise GraphError(f"extent {self.text!r}: unbalanced parentheses")
            return e
        if tok == "-":
            return as_expr(0) - self.atom()
        if tok.isdigit():
            return as_expr(int(tok))
        if tok in self.names:
            return self.names[tok]
        raise GraphError(
            f"extent {self.text!r}: {tok!r} is not a shape variable of the arguments "
            f"(known: {', '.join(sorted(self.names)) or 'none'})"
        )


def parse_extent(text: str, names: Mapping[str, Var]) -> Expr:
    """The extent that ``text`` describes over the shape variables ``names``."""
    p = _Parser(text, names)
    e = p.sum()
    if p.peek() is not None:
        raise GraphError(f"extent {text!r}: unexpected {p.peek()!r}")
    return e


_OPS: dict[type, str] = {Add: "+", Sub: "-", Mul: "*", FloorDiv: "//", FloorMod: "%"}


def extent_text(e: Expr) -> str | int:
    """``e`` as an int (constant) or as text :func:`parse_extent` reads back."""
    if isinstance(e, IntImm):
        return e.value
    return _text(e)


def _text(e: Expr) -> str:
    if isinstance(e, IntImm):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    sym = _OPS.get(type(e))
    if sym is None:
        raise GraphError(f"extent {e!r}: only + - * // % of integers and names have a text form")
    return f"({_text(e.a)} {sym} {_text(e.b)})"  # type: ignore[attr-defined]

"""Helpers shared by the passes: fresh function names and reuse of equal PrimFuncs."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from ...ir import (
    BaseFunc,
    Buffer,
    Expr,
    IntImm,
    PrimFunc,
    Var,
    collect_vars,
    structural_equal,
    structural_hash,
    substitute,
)
from .._shape_text import extent_text
from ..ir import TensorType, TensorVar


def fresh_name(taken: Container[str], base: str, sep: str = "") -> str:
    """``base`` if not taken, else ``base1``, ``base2``, ... (the tutorial's numbering).

    ``sep`` goes between the base and the number (``T_add_1`` for block names).
    """
    if base not in taken:
        return base
    n = 1
    while f"{base}{sep}{n}" in taken:
        n += 1
    return f"{base}{sep}{n}"


class PrimFuncIndex:
    """The PrimFuncs of a module by structural hash, to reuse one instead of adding its twin.

    Structural equality ignores function, buffer and variable names but not block names,
    shapes, dtypes, attributes or the computation.
    """

    def __init__(self, funcs: Mapping[str, BaseFunc]) -> None:
        self._by_hash: dict[str, list[tuple[str, PrimFunc]]] = {}
        for name, func in funcs.items():
            if isinstance(func, PrimFunc):
                self.add(name, func)

    def add(self, name: str, func: PrimFunc) -> None:
        """Record ``func`` under ``name``."""
        self._by_hash.setdefault(structural_hash(func), []).append((name, func))

    def find(self, func: PrimFunc) -> str | None:
        """The name of a recorded PrimFunc structurally equal to ``func``, if any."""
        for name, other in self._by_hash.get(structural_hash(func), ()):
            if structural_equal(other, func):
                return name
        return None


def detach_shape_vars(func: PrimFunc) -> PrimFunc:
    """``func`` with its own copies of the symbolic extents it shares with the graph.

    Each PrimFunc binds its shape variables from its arguments, so it must not share Var
    objects with the graph function or other PrimFuncs (the script form could not say so).
    """
    shape_vars = {
        id(v)
        for p in func.params
        if isinstance(p, Buffer)
        for s in p.shape
        for v in collect_vars(s)
    }
    vmap: dict[Var, Expr] = {
        v: Var(v.name, v.dtype) for v in collect_vars(func) if id(v) in shape_vars
    }
    if not vmap:
        return func
    out = substitute(func, vmap)
    assert isinstance(out, PrimFunc)
    return out


def unbound_extents(values: Sequence[TensorVar]) -> dict[str, Var]:
    """A fresh Var per compound extent of ``values``' shapes that a PrimFunc could not bind.

    A PrimFunc binds a shape variable from a buffer extent that is the variable itself. A
    compound extent (``s + 1``) using a variable that no shape of ``values`` holds alone is
    given a variable of its own (keyed by its text), so the kernel binds that instead.
    """
    bare = {id(e) for v in values for e in v.type.shape if isinstance(e, Var)}
    out: dict[str, Var] = {}
    for v in values:
        for e in v.type.shape:
            if isinstance(e, (IntImm, Var)) or all(id(x) in bare for x in collect_vars(e)):
                continue
            out.setdefault(str(extent_text(e)), Var(f"n{len(out)}", e.dtype))
    return out


def with_extents(t: TensorType, extents: Mapping[str, Var]) -> tuple[Expr, ...]:
    """``t``'s shape with each compound extent named in ``extents`` replaced by its Var."""
    if not extents:
        return t.shape
    return tuple(
        e if isinstance(e, (IntImm, Var)) else extents.get(str(extent_text(e)), e) for e in t.shape
    )

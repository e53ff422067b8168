"""Helpers shared by the passes: fresh function names and reuse of equal PrimFuncs."""

from __future__ import annotations

from collections.abc import Mapping

from ...ir import BaseFunc, PrimFunc


def fresh_name(funcs: Mapping[str, BaseFunc], base: str) -> str:
    """``base`` if unused, else ``base1``, ``base2``, ... (the tutorial's numbering)."""
    if base not in funcs:
        return base
    n = 1
    while f"{base}{n}" in funcs:
        n += 1
    return f"{base}{n}"


def same_prim_func(funcs: Mapping[str, BaseFunc], func: PrimFunc) -> str | None:
    """The name of a PrimFunc in ``funcs`` structurally equal to ``func``, if any.

    Returns None while structural equality is not available.
    """
    from ...ir import structural_equal

    for name, other in funcs.items():
        if isinstance(other, PrimFunc) and len(other.params) == len(func.params):
            try:
                if structural_equal(other, func):
                    return name
            except NotImplementedError:
                return None
    return None


def detach_shape_vars(func: PrimFunc) -> PrimFunc:
    """``func`` with its own copies of the symbolic extents it shares with the graph.

    Each PrimFunc binds its shape variables from its arguments, so it must not share Var
    objects with the graph function or other PrimFuncs (the script form could not say so).
    """
    from ...ir import Var, collect_vars, substitute

    fresh = {v: Var(v.name, v.dtype) for v in collect_vars(func) if isinstance(v, Var)}
    shape_vars = {id(v) for p in func.params if hasattr(p, "shape")
                  for s in p.shape for v in collect_vars(s)}  # type: ignore[union-attr]
    vmap = {v: nv for v, nv in fresh.items() if id(v) in shape_vars}
    return substitute(func, vmap) if vmap else func  # type: ignore[no-any-return]

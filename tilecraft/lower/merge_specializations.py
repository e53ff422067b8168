"""Fold the size-specialised variants of a function into one lowered function.

A function with a symbolic extent may carry specialised variants (made by
:class:`tilecraft.rules.SpecializeShapes` before scheduling): copies with one symbolic extent
fixed to a value, each scheduled on its own, so a rule saw a concrete extent. Its attribute
``tc.specializations`` lists them as ``(variable name, value, variant name)``; each variant
names its general function in ``tc.specialization_of``.

Before: lowered functions (flat buffers, shape variables as trailing scalar parameters),
        among them the variants.
After:  each general function's body is ``if n == 1: <variant body> else: <general body>``
        (one branch per variant, in order); the variants are gone. The variant's buffer
        parameters are the general function's, position by position: flattened, the variant
        indexes them with the fixed value folded in, which is what the general function's
        layout gives for that value. The exported symbol, its parameters and the artifact
        keep the general function's shape, so callers (the graph executor, exported
        libraries, the C entry) see one kernel that picks its schedule by the extent.

A variant whose general function is missing, or a general function whose variable is not
one of its scalar parameters, is left as it was (a variant is only ever an optimisation).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..ir import Buffer, IfThenElse, IntImm, Mutator, PrimFunc, Stmt, Var

SPECIALIZATIONS_ATTR = "tc.specializations"
"""Attribute of a general function: ``((variable name, value, variant name), ...)``."""
SPECIALIZATION_OF_ATTR = "tc.specialization_of"
"""Attribute of a variant: the name of its general function."""


def specializations(func: PrimFunc) -> list[tuple[str, int, str]]:
    """``func``'s variants as ``(variable name, value, variant name)``; malformed entries of
    ``tc.specializations`` are left out."""
    out = []
    listed = func.attrs.get(SPECIALIZATIONS_ATTR, ())
    for entry in listed if isinstance(listed, tuple) else ():
        if isinstance(entry, tuple) and len(entry) == 3:
            var, value, name = entry
            if isinstance(var, str) and isinstance(value, int) and isinstance(name, str):
                out.append((var, value, name))
    return out


class _Rebind(Mutator):
    """Replace buffers by identity (loads, stores, allocations)."""

    def __init__(self, mapping: Mapping[int, Buffer]) -> None:
        super().__init__()
        self.buffer_map.update(mapping)


def _variant_body(general: PrimFunc, variant: PrimFunc) -> Stmt | None:
    """``variant``'s body on ``general``'s buffer parameters; None when they do not pair."""
    ours, theirs = general.buffer_params, variant.buffer_params
    if len(ours) != len(theirs) or any(
        a.dtype != b.dtype for a, b in zip(ours, theirs, strict=True)
    ):
        return None
    mapping = {id(b): a for a, b in zip(ours, theirs, strict=True)}
    body: Stmt = _Rebind(mapping).visit(variant.body)
    return body


def _merge_one(general: PrimFunc, functions: Mapping[str, PrimFunc], used: set[str]) -> PrimFunc:
    """``general`` with its variants' bodies as branches on the fixed extents."""
    scalars = {p.name: p for p in general.params if isinstance(p, Var)}
    branches: list[tuple[Var, int, Stmt]] = []
    for var_name, value, name in specializations(general):
        var, variant = scalars.get(var_name), functions.get(name)
        if var is None or variant is None:
            continue
        body = _variant_body(general, variant)
        if body is not None:
            branches.append((var, value, body))
            used.add(name)
    out = general.body
    for var, value, body in reversed(branches):
        out = IfThenElse(var.eq(IntImm(var.dtype, value)), body, out)
    return general.update(body=out, attrs=general.attrs.without(SPECIALIZATIONS_ATTR))


def merge_specializations(functions: Mapping[str, PrimFunc]) -> dict[str, PrimFunc]:
    """The lowered ``functions`` with each variant folded into its general function.

    Parameters
    ----------
    functions
        Lowered functions by name.

    Returns
    -------
    dict
        The same functions, less the variants that were folded in; a general function's body
        branches on its fixed extents (module docstring).
    """
    used: set[str] = set()
    merged = {
        name: _merge_one(f, functions, used) if SPECIALIZATIONS_ATTR in f.attrs else f
        for name, f in functions.items()
    }
    return {name: f for name, f in merged.items() if name not in used}

"""Make the symbolic extents of buffer parameters explicit scalar parameters.

Before: buffer parameters may have symbolic extents (``Var``s that are not parameters).
After:  every variable used in a buffer parameter's shape is a parameter; those that were not
are appended after the existing parameters, in order of first appearance. The runtime binds
them from the arguments' shapes; the C function receives them as integer arguments.
"""

from __future__ import annotations

from ..ir import Buffer, PrimFunc, Var, collect_vars
from ..ir.transform import FunctionPass


def shape_vars(func: PrimFunc) -> list[Var]:
    """Variables in ``func``'s buffer parameter shapes that are not parameters, in order."""
    known = {id(p) for p in func.params if isinstance(p, Var)}
    out: list[Var] = []
    for p in func.params:
        if not isinstance(p, Buffer):
            continue
        for extent in p.shape:
            for v in collect_vars(extent):
                if id(v) not in known:
                    known.add(id(v))
                    out.append(v)
    return out


class ExposeShapeVars(FunctionPass):
    """Append the free shape variables of ``func``'s buffers to its parameters."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with its shape variables as trailing parameters."""
        extra = shape_vars(func)
        return func.update(params=(*func.params, *extra)) if extra else func

"""The base of tune's module passes (``ApplyDatabase``, ``TuneIRMod``, ``TuneTIR``).

They are :class:`~tilecraft.ir.transform.ModulePass` es (instruments and pass contexts see
them like any other pass) that also accept a single PrimFunc, wrapped in a module under its
own name.
"""

from __future__ import annotations

from ..errors import TuneError
from ..ir import IRModule, PrimFunc
from ..ir.transform import ModulePass


class TunePass(ModulePass):
    """An IRModule => IRModule pass; never modifies its input."""

    def __call__(self, mod: IRModule | PrimFunc) -> IRModule:
        """Run the pass (a PrimFunc is wrapped in a module under its own name)."""
        if isinstance(mod, PrimFunc):
            mod = IRModule({mod.name: mod})
        if not isinstance(mod, IRModule):
            raise TuneError(
                f"{type(self).__name__}: expected an IRModule, got {type(mod).__name__}"
            )
        return super().__call__(mod)

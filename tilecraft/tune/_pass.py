"""The base of tune's module passes (``ApplyDatabase``, ``TuneIRMod``, ``TuneTIR``).

Kept in one place so it can become a subclass of ``tilecraft.ir.transform.ModulePass`` when
that lands: the passes only implement :meth:`TunePass.transform_module`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..errors import TuneError
from ..ir import IRModule, PrimFunc


class TunePass(ABC):
    """An IRModule => IRModule pass; never modifies its input."""

    @abstractmethod
    def transform_module(self, mod: IRModule) -> IRModule:
        """The transformed module."""

    def __call__(self, mod: IRModule | PrimFunc) -> IRModule:
        """Run the pass (a PrimFunc is wrapped in a module under its own name)."""
        if isinstance(mod, PrimFunc):
            mod = IRModule({mod.name: mod})
        if not isinstance(mod, IRModule):
            raise TuneError(
                f"{type(self).__name__}: expected an IRModule, got {type(mod).__name__}"
            )
        return self.transform_module(mod)

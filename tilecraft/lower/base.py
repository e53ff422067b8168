"""The shape every lowering pass shares: a :class:`FunctionPass` maps PrimFunc -> PrimFunc.

A pass never writes into its input: it returns a new function (or the same object when nothing
changed). Applied to an :class:`~tilecraft.ir.IRModule` it transforms every PrimFunc and returns
a new module; other functions are kept as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import overload

from ..ir import IRModule, PrimFunc

PassHook = Callable[[str, PrimFunc, PrimFunc], None]
"""``hook(pass_name, before, after)`` called after each pass of a :class:`Sequential`."""


class FunctionPass:
    """Base of lowering passes: override :meth:`transform_function`."""

    @property
    def name(self) -> str:
        """The pass name (its class name)."""
        return type(self).__name__

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return the transformed ``func``; subclasses implement this."""
        raise NotImplementedError

    @overload
    def __call__(self, obj: PrimFunc) -> PrimFunc: ...

    @overload
    def __call__(self, obj: IRModule) -> IRModule: ...

    def __call__(self, obj: PrimFunc | IRModule) -> PrimFunc | IRModule:
        """Apply the pass to a PrimFunc, or to every PrimFunc of a module."""
        if isinstance(obj, PrimFunc):
            return self.transform_function(obj)
        if isinstance(obj, IRModule):
            mod = obj
            for name, func in obj.prim_funcs():
                new = self.transform_function(func)
                if new is not func:
                    mod = mod.with_function(name, new)
            return mod
        raise TypeError(f"{self.name}: expected a PrimFunc or IRModule, got {type(obj).__name__}")


class Sequential(FunctionPass):
    """Run ``passes`` in order; ``hooks`` see each pass's before/after functions."""

    def __init__(self, passes: Sequence[FunctionPass], hooks: Sequence[PassHook] = ()) -> None:
        self.passes = tuple(passes)
        self.hooks = tuple(hooks)

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Apply each pass in turn."""
        for p in self.passes:
            new = p.transform_function(func)
            for hook in self.hooks:
                hook(p.name, func, new)
            func = new
        return func

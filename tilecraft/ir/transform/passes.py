"""Passes: IRModule => IRModule transforms run under the current :class:`~.PassContext`.

A pass never writes into its input: it returns a new module (or the same object when nothing
changed), so the caller's module stays valid. Subclass :class:`ModulePass` (override
``transform_module``) or :class:`FunctionPass` (override ``transform_function``, applied to
every PrimFunc of a module); chain passes with :class:`Sequential`; or make a pass from a
function with :func:`module_pass` / :func:`function_pass`. Calling a pass runs the current
context's instruments before and after it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TypeVar, overload

from ...errors import IRError
from ..function import PrimFunc
from ..module import IRModule
from .context import PassContext

_T = TypeVar("_T", IRModule, PrimFunc)


def _as_module(obj: IRModule | PrimFunc) -> IRModule:
    return obj if isinstance(obj, IRModule) else IRModule({obj.name: obj})


def _instrumented(pass_: Pass, obj: _T, transform: Callable[[_T], _T]) -> _T:
    """Run ``transform(obj)`` between the current context's before/after instruments."""
    instruments = PassContext.current().instruments
    if not instruments:
        return transform(obj)
    before = _as_module(obj)
    for ins in instruments:
        ins.run_before_pass(before, pass_)
    try:
        out = transform(obj)
    except BaseException as error:
        for ins in instruments:
            ins.pass_failed(before, pass_, error)
        raise
    after = _as_module(out)
    for ins in instruments:
        ins.run_after_pass(after, pass_)
    return out


class Pass(abc.ABC):
    """An IRModule => IRModule transform; call it on a module to run it.

    Subclasses implement :meth:`transform_module` (through :class:`ModulePass` or
    :class:`FunctionPass`). ``name`` defaults to the class name.
    """

    @property
    def name(self) -> str:
        """The pass name shown by instruments (default: the class name)."""
        return type(self).__name__

    @abc.abstractmethod
    def transform_module(self, mod: IRModule) -> IRModule:
        """Return the transformed module; never modify ``mod``."""

    def __call__(self, mod: IRModule) -> IRModule:
        """Run the pass on ``mod`` with the current context's instruments."""
        if not isinstance(mod, IRModule):
            raise IRError(f"{self.name}: expected an IRModule, got {type(mod).__name__}")
        return _instrumented(self, mod, self._checked_module)

    def _checked_module(self, mod: IRModule) -> IRModule:
        out = self.transform_module(mod)
        if not isinstance(out, IRModule):
            raise IRError(f"{self.name}: transform_module returned a {type(out).__name__}")
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class ModulePass(Pass):
    """A pass over a whole module: override :meth:`transform_module`."""


class FunctionPass(Pass):
    """A pass applied to every PrimFunc of a module: override :meth:`transform_function`.

    Other functions (graph functions) are kept as they are. Called on a PrimFunc it returns
    the transformed PrimFunc (instruments see a one-function module).
    """

    @abc.abstractmethod
    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return the transformed ``func`` (``func`` itself when nothing changes)."""

    def transform_module(self, mod: IRModule) -> IRModule:
        """Apply :meth:`transform_function` to every PrimFunc of ``mod``."""
        funcs = {}
        changed = False
        for name, func in mod.items():
            if isinstance(func, PrimFunc):
                new = self._checked_function(func)
                changed = changed or new is not func
                func = new
            funcs[name] = func
        return IRModule(funcs, mod.attrs) if changed else mod

    def _checked_function(self, func: PrimFunc) -> PrimFunc:
        out = self.transform_function(func)
        if not isinstance(out, PrimFunc):
            raise IRError(f"{self.name}: transform_function returned a {type(out).__name__}")
        return out

    @overload
    def __call__(self, mod: IRModule) -> IRModule: ...

    @overload
    def __call__(self, mod: PrimFunc) -> PrimFunc: ...

    def __call__(self, mod: IRModule | PrimFunc) -> IRModule | PrimFunc:
        """Run the pass on a module, or on one PrimFunc (returning a PrimFunc)."""
        if isinstance(mod, PrimFunc):
            return _instrumented(self, mod, self._checked_function)
        return super().__call__(mod)


class Sequential(Pass):
    """Run ``passes`` in order, each on the previous one's output.

    Instruments see the sequence itself and each pass inside it. When every pass is a
    :class:`FunctionPass` (or a Sequential of them) it may also be called on a PrimFunc.
    """

    def __init__(self, passes: Sequence[Pass], name: str = "Sequential") -> None:
        items = tuple(passes)
        for i, p in enumerate(items):
            if not isinstance(p, Pass):
                raise IRError(
                    f"Sequential {name}: item {i} is not a Pass, got {type(p).__name__} "
                    "(wrap a function with module_pass or function_pass)"
                )
        if not isinstance(name, str) or not name:
            raise IRError(f"Sequential: name must be a non-empty string, got {name!r}")
        self.passes = items
        self._name = name

    @property
    def name(self) -> str:
        """The name given at construction."""
        return self._name

    @property
    def function_level(self) -> bool:
        """True if every pass inside is a FunctionPass or a function-level Sequential."""
        return all(
            isinstance(p, FunctionPass) or (isinstance(p, Sequential) and p.function_level)
            for p in self.passes
        )

    def transform_module(self, mod: IRModule) -> IRModule:
        """Apply each pass in turn."""
        for p in self.passes:
            mod = p(mod)
        return mod

    def _transform_function(self, func: PrimFunc) -> PrimFunc:
        for p in self.passes:
            assert isinstance(p, (FunctionPass, Sequential))
            func = p(func)
        return func

    @overload
    def __call__(self, mod: IRModule) -> IRModule: ...

    @overload
    def __call__(self, mod: PrimFunc) -> PrimFunc: ...

    def __call__(self, mod: IRModule | PrimFunc) -> IRModule | PrimFunc:
        """Run the sequence on a module, or on a PrimFunc when it is function-level."""
        if isinstance(mod, PrimFunc):
            if not self.function_level:
                others = [p.name for p in self.passes if not isinstance(p, FunctionPass)]
                raise IRError(
                    f"Sequential {self.name}: cannot run on a PrimFunc, {others} are not "
                    "function passes; call it on an IRModule"
                )
            return _instrumented(self, mod, self._transform_function)
        return super().__call__(mod)


class _ModuleFunctionPass(ModulePass):
    """A module pass made from a function by :func:`module_pass`."""

    def __init__(self, fn: Callable[[IRModule], IRModule], name: str) -> None:
        self.fn = fn
        self._name = name

    @property
    def name(self) -> str:
        """The decorated function's name, or the one given."""
        return self._name

    def transform_module(self, mod: IRModule) -> IRModule:
        """Call the function."""
        return self.fn(mod)


class _PrimFunctionPass(FunctionPass):
    """A function pass made from a function by :func:`function_pass`."""

    def __init__(self, fn: Callable[[PrimFunc], PrimFunc], name: str) -> None:
        self.fn = fn
        self._name = name

    @property
    def name(self) -> str:
        """The decorated function's name, or the one given."""
        return self._name

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Call the function."""
        return self.fn(func)


def _name_of(fn: object, default: str) -> str:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name != "<lambda>" else default


_ModFn = Callable[[IRModule], IRModule]
_FuncFn = Callable[[PrimFunc], PrimFunc]


@overload
def module_pass(arg: _ModFn, *, name: str | None = None) -> ModulePass: ...


@overload
def module_pass(
    arg: str | None = None, *, name: str | None = None
) -> Callable[[_ModFn], ModulePass]: ...


def module_pass(
    arg: _ModFn | str | None = None, *, name: str | None = None
) -> ModulePass | Callable[[_ModFn], ModulePass]:
    """Make a :class:`ModulePass` from a function ``IRModule -> IRModule``.

    Use as ``@module_pass``, ``@module_pass("Name")`` or ``module_pass(fn, name="Name")``;
    the pass is named after the function unless a name is given.
    """
    if callable(arg):
        return _ModuleFunctionPass(arg, name or _name_of(arg, "module_pass"))
    given = arg if arg is not None else name
    return lambda fn: _ModuleFunctionPass(fn, given or _name_of(fn, "module_pass"))


@overload
def function_pass(arg: _FuncFn, *, name: str | None = None) -> FunctionPass: ...


@overload
def function_pass(
    arg: str | None = None, *, name: str | None = None
) -> Callable[[_FuncFn], FunctionPass]: ...


def function_pass(
    arg: _FuncFn | str | None = None, *, name: str | None = None
) -> FunctionPass | Callable[[_FuncFn], FunctionPass]:
    """Make a :class:`FunctionPass` from a function ``PrimFunc -> PrimFunc``.

    Use as ``@function_pass``, ``@function_pass("Name")`` or ``function_pass(fn, name=...)``.
    """
    if callable(arg):
        return _PrimFunctionPass(arg, name or _name_of(arg, "function_pass"))
    given = arg if arg is not None else name
    return lambda fn: _PrimFunctionPass(fn, given or _name_of(fn, "function_pass"))

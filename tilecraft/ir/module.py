"""IRModule: an immutable collection of named functions plus module attributes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import IRError
from .function import BaseFunc, PrimFunc, is_symbol
from .node import Attrs, Node, as_attrs


class IRModule(Node):
    """Named functions (PrimFuncs and graph functions) and module-level attributes.

    Immutable: :meth:`with_function` and :meth:`without_function` return new modules. Each
    function's ``name`` equals its key (functions are renamed on insertion).
    """

    __slots__ = ("_attrs", "_functions")

    def __init__(
        self,
        functions: Mapping[str, BaseFunc] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        funcs: dict[str, BaseFunc] = {}
        for name, func in (functions or {}).items():
            if not is_symbol(name):
                raise IRError(
                    "IRModule: function names must be identifiers in NFKC normal form, got "
                    f"{name!r}"
                )
            if not isinstance(func, BaseFunc):
                raise IRError(f"IRModule: {name!r} is not a function: {type(func).__name__}")
            funcs[name] = func if func.name == name else func.update(name=name)
        self._functions = funcs
        self._attrs = as_attrs(attrs)

    @staticmethod
    def from_func(func: PrimFunc, name: str | None = None) -> IRModule:
        """A module holding ``func`` under ``name`` (default: the function's own name)."""
        return IRModule({name or func.name: func})

    @property
    def functions(self) -> Mapping[str, BaseFunc]:
        """Name -> function, in insertion order (a read-only view)."""
        return dict(self._functions)

    @property
    def attrs(self) -> Attrs:
        """Module attributes."""
        return self._attrs

    def __getitem__(self, name: str) -> BaseFunc:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(
                f"IRModule has no function {name!r}; it has {sorted(self._functions)}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def items(self) -> list[tuple[str, BaseFunc]]:
        """(name, function) pairs in insertion order."""
        return list(self._functions.items())

    def prim_funcs(self) -> list[tuple[str, PrimFunc]]:
        """The (name, PrimFunc) pairs."""
        return [(n, f) for n, f in self._functions.items() if isinstance(f, PrimFunc)]

    def with_function(self, name: str, func: BaseFunc) -> IRModule:
        """A new module with ``name`` bound to ``func`` (added or replaced)."""
        funcs = dict(self._functions)
        funcs[name] = func
        return IRModule(funcs, self._attrs)

    def without_function(self, name: str) -> IRModule:
        """A new module without ``name``."""
        funcs = {k: v for k, v in self._functions.items() if k != name}
        return IRModule(funcs, self._attrs)

    def with_attr(self, key: str, value: Any) -> IRModule:
        """A new module with module attribute ``key`` set."""
        return IRModule(self._functions, self._attrs.with_item(key, value))

    def update(self, **changes: Any) -> IRModule:
        """A copy with ``functions`` and/or ``attrs`` replaced."""
        functions = changes.pop("functions", self._functions)
        attrs = changes.pop("attrs", self._attrs)
        if changes:
            raise IRError(f"IRModule.update: unknown fields {sorted(changes)}")
        if functions is self._functions and attrs is self._attrs:
            return self
        return IRModule(functions, attrs)

    def show(self) -> None:
        """Print the script form."""
        print(self.script())  # noqa: T201

    __hash__ = object.__hash__

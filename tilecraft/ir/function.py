"""Functions: :class:`PrimFunc` (a loop-level kernel) and the base of module functions."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import IRError
from .buffer import Buffer
from .expr import Var
from .node import Attrs, Node, as_attrs
from .stmt import Stmt


def is_symbol(name: object) -> bool:
    """True for an identifier that Python source reads back unchanged (NFKC-normal).

    Function names are printed as ``def name`` and Python folds identifiers to NFKC, so
    ``f𝑥`` would come back as ``fx``.
    """
    return (
        isinstance(name, str)
        and name.isidentifier()
        and unicodedata.normalize("NFKC", name) == name
    )


class BaseFunc(Node):
    """Base of functions stored in an :class:`~tilecraft.ir.IRModule`."""

    __slots__ = ()
    name: str
    attrs: Attrs

    def show(self) -> None:
        """Print the script form."""
        print(self.script())  # noqa: T201

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class PrimFunc(BaseFunc):
    """A loop-level function: buffer and scalar parameters and a statement body.

    Symbolic extents in the buffers' shapes (``Var``) are bound from the arguments' shapes at
    call time. ``name`` is the function's symbol; it is not part of structural equality.
    """

    params: tuple[Buffer | Var, ...]
    body: Stmt
    attrs: Attrs = field(default_factory=Attrs)
    name: str = "main"

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "attrs", as_attrs(self.attrs))
        if not is_symbol(self.name):
            raise IRError(
                f"PrimFunc: name must be an identifier in NFKC normal form, got {self.name!r}"
            )
        for p in self.params:
            if not isinstance(p, (Buffer, Var)):
                raise IRError(
                    f"PrimFunc {self.name}: parameters must be Buffers or Vars, got {p!r}"
                )
        if len({id(p) for p in self.params}) != len(self.params):
            raise IRError(f"PrimFunc {self.name}: a parameter appears twice")
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise IRError(f"PrimFunc {self.name}: duplicate parameter names {dup}")
        if not isinstance(self.body, Stmt):
            raise IRError(f"PrimFunc {self.name}: body must be a statement, got {self.body!r}")

    @property
    def buffer_params(self) -> tuple[Buffer, ...]:
        """The parameters that are buffers, in order."""
        return tuple(p for p in self.params if isinstance(p, Buffer))

    def with_attr(self, key: str, value: Any) -> PrimFunc:
        """A copy with ``attrs[key] = value``."""
        return self.update(attrs=self.attrs.with_item(key, value))

    def with_attrs(self, attrs: Mapping[str, Any]) -> PrimFunc:
        """A copy with ``attrs`` merged in."""
        merged = dict(self.attrs.items_tuple())
        merged.update(attrs)
        return self.update(attrs=Attrs(merged))

    __hash__ = object.__hash__

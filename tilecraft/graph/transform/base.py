"""Pass infrastructure: module passes, sequences and a context with before/after instruments."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ...ir import IRModule

_CTX = threading.local()


class PassInstrument:
    """Hooks called around every pass run inside a :class:`PassContext`."""

    def run_before_pass(self, mod: IRModule, name: str) -> None:
        """Called with the input module before pass ``name`` runs."""

    def run_after_pass(self, mod: IRModule, name: str) -> None:
        """Called with the output module after pass ``name`` ran."""


class PassContext:
    """``with PassContext(instruments=[...]):`` installs instruments for the passes run inside."""

    def __init__(self, instruments: Sequence[PassInstrument] = ()) -> None:
        self.instruments = list(instruments)

    def __enter__(self) -> PassContext:
        stack = getattr(_CTX, "stack", None)
        if stack is None:
            stack = _CTX.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _CTX.stack.pop()

    @staticmethod
    def current() -> PassContext | None:
        """The innermost active context, or None."""
        stack = getattr(_CTX, "stack", None)
        return stack[-1] if stack else None


class ModulePass:
    """Base of IRModule => IRModule passes; subclasses implement :meth:`transform`."""

    name = "ModulePass"

    def transform(self, mod: IRModule) -> IRModule:
        """Return the transformed module (never modify ``mod``)."""
        raise NotImplementedError

    def __call__(self, mod: IRModule) -> IRModule:
        """Run the pass with the current context's instruments."""
        ctx = PassContext.current()
        for ins in ctx.instruments if ctx else ():
            ins.run_before_pass(mod, self.name)
        out = self.transform(mod)
        for ins in ctx.instruments if ctx else ():
            ins.run_after_pass(out, self.name)
        return out


class Sequential(ModulePass):
    """Run ``passes`` in order."""

    name = "Sequential"

    def __init__(self, passes: Sequence[Callable[[IRModule], IRModule]]) -> None:
        self.passes = list(passes)

    def transform(self, mod: IRModule) -> IRModule:
        """Apply each pass to the previous one's output."""
        for p in self.passes:
            mod = p(mod)
        return mod


class RecordPasses(PassInstrument):
    """An instrument that records the names of the passes run (for tests and debugging)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.modules: list[Any] = []

    def run_after_pass(self, mod: IRModule, name: str) -> None:
        """Record ``name`` and the output module."""
        self.names.append(name)
        self.modules.append(mod)

"""The pass context: instruments and configuration for the passes run inside ``with``.

``with PassContext(instruments=[...], config={...}):`` makes a context current for the running
thread (the stack of contexts is per thread, so two threads compiling at once do not see each
other's instruments). :meth:`PassContext.current` is the innermost one, or a default empty
context. Only the current context's instruments run: an inner context replaces, not extends,
the outer one; :meth:`PassContext.extend` builds a context that keeps the current instruments
and configuration and adds more.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from ...errors import IRError
from ..module import IRModule
from .config import lookup_option, validate_config

if TYPE_CHECKING:
    from .passes import Pass


class PassInstrument:
    """Hooks around the passes run inside a :class:`PassContext`; override what you need.

    An instrument may be shared by several contexts and threads; one that keeps state must
    guard it (the built-in ones use a lock and per-thread stacks).
    """

    @property
    def name(self) -> str:
        """The instrument's name (its class name)."""
        return type(self).__name__

    def enter_pass_ctx(self) -> None:
        """Called when a context holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when a context holding this instrument is exited (also on error)."""

    def run_before_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Called with the input module before ``pass_`` runs."""

    def run_after_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Called with the output module after ``pass_`` ran (not when it raised)."""

    def pass_failed(self, mod: IRModule, pass_: Pass, error: BaseException) -> None:
        """Called with the input module when ``pass_`` raised ``error`` (re-raised after)."""


class _Stack(threading.local):
    def __init__(self) -> None:
        self.items: list[PassContext] = []


_STACK = _Stack()


class PassContext:
    """Instruments and configuration for the passes run while the context is current.

    Parameters
    ----------
    instruments
        Called in order before and after every pass run while the context is current.
    config
        Settings read by passes; every key must be registered with
        :func:`~tilecraft.ir.transform.register_pass_config` and every value must have its
        registered type, else :class:`~tilecraft.errors.IRError`.

    Examples
    --------
    >>> timing = PassTimingInstrument()
    >>> with PassContext(instruments=[timing, VerifyIR()]):
    ...     mod = tc.graph.get_pipeline("zero")(mod)
    >>> print(timing.report())
    """

    def __init__(
        self,
        instruments: Sequence[PassInstrument] = (),
        config: Mapping[str, object] | None = None,
    ) -> None:
        for ins in instruments:
            if not isinstance(ins, PassInstrument):
                got = f"the class {ins.__name__}" if isinstance(ins, type) else type(ins).__name__
                raise IRError(f"PassContext: instruments must be PassInstruments, got {got}")
        self._instruments = tuple(instruments)
        self._config = validate_config(config)
        self._own: tuple[PassInstrument, ...] = self._instruments

    @property
    def instruments(self) -> tuple[PassInstrument, ...]:
        """The instruments run around every pass."""
        return self._instruments

    @property
    def config(self) -> Mapping[str, object]:
        """The settings given to this context (a read-only mapping)."""
        return self._config

    def get_config(self, key: str) -> object:
        """The value of ``key``: the one set in this context, else its registered default."""
        option = lookup_option(key)
        return self._config.get(key, option.default)

    def extend(
        self,
        instruments: Sequence[PassInstrument] = (),
        config: Mapping[str, object] | None = None,
    ) -> PassContext:
        """A context with this one's instruments and config plus ``instruments``/``config``.

        Entering it calls ``enter_pass_ctx`` only on the added instruments (the inherited
        ones belong to this context, which is entered already or not at all).
        """
        merged = dict(self._config)
        merged.update(validate_config(config))
        out = PassContext([*self._instruments, *instruments], merged)
        out._own = tuple(instruments)
        return out

    def __enter__(self) -> PassContext:
        entered: list[PassInstrument] = []
        try:
            for ins in self._own:
                ins.enter_pass_ctx()
                entered.append(ins)
        except BaseException:
            for ins in reversed(entered):
                ins.exit_pass_ctx()
            raise
        _STACK.items.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        items = _STACK.items
        if not items or items[-1] is not self:
            raise IRError("PassContext: contexts must be exited in the reverse order of entry")
        items.pop()
        for ins in reversed(self._own):
            ins.exit_pass_ctx()

    @staticmethod
    def current() -> PassContext:
        """The innermost context entered by this thread, or an empty default context."""
        items = _STACK.items
        return items[-1] if items else _DEFAULT


_DEFAULT = PassContext()

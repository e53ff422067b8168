"""Built-in instruments: recording, per-pass timing, IR dumps, verification and function hooks.

Each is thread-safe: state shared between threads is guarded by a lock, and the stack of
passes running in a thread is kept per thread (so one instrument may watch several threads).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import IRError, TilecraftError
from ..function import PrimFunc
from ..module import IRModule
from ..serialize import to_json
from .context import PassInstrument
from .passes import Pass, Sequential


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.items: list[tuple[Pass, object]] = []


def _pop(stack: list[tuple[Pass, object]], pass_: Pass) -> object | None:
    """Pop the entry pushed by ``pass_`` (and any left above it); None if it is not there."""
    for k in range(len(stack) - 1, -1, -1):
        if stack[k][0] is pass_:
            value = stack[k][1]
            del stack[k:]
            return value
    return None


class RecordPasses(PassInstrument):
    """Record the name and output module of every pass that finished, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.names: list[str] = []
        self.modules: list[IRModule] = []

    def run_after_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Append the pass name and its output."""
        with self._lock:
            self.names.append(pass_.name)
            self.modules.append(mod)


@dataclass
class PassTiming:
    """Wall time of one pass at one place in the pass tree, summed over its runs."""

    name: str
    seconds: float = 0.0
    calls: int = 0
    children: dict[str, PassTiming] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        """``{"name", "seconds", "calls", "children": [...]}`` with plain values."""
        return {
            "name": self.name,
            "seconds": self.seconds,
            "calls": self.calls,
            "children": [c.as_dict() for c in self.children.values()],
        }


class PassTimingInstrument(PassInstrument):
    """Wall time per pass; passes run inside a Sequential are shown as its children.

    Times of the same pass at the same place in the tree (a pipeline run on several
    functions) are summed. :meth:`report` gives a printable tree, :meth:`as_dict` plain data.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = _PerThread()
        self._root = PassTiming("<root>")

    def run_before_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Start the clock for ``pass_``."""
        self._running.items.append((pass_, time.perf_counter()))

    def run_after_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Stop the clock and add the time under the passes still running around it."""
        stack = self._running.items
        start = _pop(stack, pass_)
        if not isinstance(start, float):
            return
        elapsed = time.perf_counter() - start
        path = [p.name for p, _ in stack] + [pass_.name]
        with self._lock:
            node = self._root
            for name in path:
                node = node.children.setdefault(name, PassTiming(name))
            node.seconds += elapsed
            node.calls += 1

    def pass_failed(self, mod: IRModule, pass_: Pass, error: BaseException) -> None:
        """Forget the clock of a pass that raised."""
        _pop(self._running.items, pass_)

    def timings(self) -> list[PassTiming]:
        """The top-level passes' timings (copies are not made: do not modify them)."""
        with self._lock:
            return list(self._root.children.values())

    def as_dict(self) -> dict[str, object]:
        """``{"passes": [tree of {"name", "seconds", "calls", "children"}], "total": s}``."""
        with self._lock:
            top = [c.as_dict() for c in self._root.children.values()]
            total = sum(c.seconds for c in self._root.children.values())
        return {"passes": top, "total": total}

    def clear(self) -> None:
        """Forget every recorded time."""
        with self._lock:
            self._root = PassTiming("<root>")

    def report(self) -> str:
        """A tree of passes with their time, share of the parent's time and run count."""
        with self._lock:
            top = list(self._root.children.values())
        total = sum(t.seconds for t in top)
        lines = [f"{'pass':<48} {'time (ms)':>10} {'share':>7} {'calls':>6}"]

        def emit(node: PassTiming, depth: int, parent: float) -> None:
            share = 100.0 * node.seconds / parent if parent > 0 else 100.0
            label = "  " * depth + node.name
            lines.append(f"{label:<48} {node.seconds * 1e3:>10.3f} {share:>6.1f}% {node.calls:>6}")
            for child in node.children.values():
                emit(child, depth + 1, node.seconds)

        for node in top:
            emit(node, 0, total)
        lines.append(f"{'total':<48} {total * 1e3:>10.3f}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class DumpIR(PassInstrument):
    """Write the script text of the module before and after each pass into ``directory``.

    Files are ``NNN_<pass>.before.py`` and ``NNN_<pass>.after.py``, numbered in the order
    passes start (a pass that raises leaves only its ``before`` file). Sequentials are not
    dumped unless ``include_sequential`` (their children are). Modules the script printer
    cannot show are written as JSON.
    """

    def __init__(self, directory: str | Path, *, include_sequential: bool = False) -> None:
        self.directory = Path(directory)
        self.include_sequential = include_sequential
        self._lock = threading.Lock()
        self._count = 0
        self._running = _PerThread()

    def enter_pass_ctx(self) -> None:
        """Create the directory."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TilecraftError(f"DumpIR: cannot create {self.directory}: {e}") from e

    def _skip(self, pass_: Pass) -> bool:
        return isinstance(pass_, Sequential) and not self.include_sequential

    def run_before_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Write ``NNN_<pass>.before.py``."""
        if self._skip(pass_):
            return
        with self._lock:
            number = self._count
            self._count += 1
        stem = f"{number:03d}_{_UNSAFE.sub('_', pass_.name)}"
        self._running.items.append((pass_, stem))
        self._write(f"{stem}.before.py", mod)

    def run_after_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Write ``NNN_<pass>.after.py``."""
        if self._skip(pass_):
            return
        stem = _pop(self._running.items, pass_)
        if isinstance(stem, str):
            self._write(f"{stem}.after.py", mod)

    def pass_failed(self, mod: IRModule, pass_: Pass, error: BaseException) -> None:
        """Forget the number of a pass that raised."""
        _pop(self._running.items, pass_)

    def _write(self, filename: str, mod: IRModule) -> None:
        try:
            text = mod.script()
        except TilecraftError:
            text = to_json(mod, indent=1)
        path = self.directory / filename
        try:
            path.write_text(text + "\n", encoding="utf-8")
        except OSError as e:
            raise TilecraftError(f"DumpIR: cannot write {path}: {e}") from e


class VerifyIR(PassInstrument):
    """Run :func:`tilecraft.ir.verify` on every PrimFunc after every pass.

    Raises :class:`~tilecraft.errors.IRError` naming the pass whose output is broken. A
    function object already verified is not verified again (IR is immutable).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._verified: dict[int, PrimFunc] = {}

    def exit_pass_ctx(self) -> None:
        """Forget the functions verified so far."""
        with self._lock:
            self._verified.clear()

    def run_after_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Verify every PrimFunc of the output not verified before."""
        from ..verify import verify

        for _, func in mod.prim_funcs():
            with self._lock:
                if self._verified.get(id(func)) is func:
                    continue
            try:
                verify(func)
            except IRError as e:
                raise IRError(f"VerifyIR: the output of pass {pass_.name!r} is invalid: {e}") from e
            with self._lock:
                self._verified[id(func)] = func


PassHook = Callable[[str, PrimFunc, PrimFunc], None]
"""``hook(pass_name, before, after)``: see :class:`PrimFuncHooks`."""


class PrimFuncHooks(PassInstrument):
    """Call ``hook(pass_name, before, after)`` for each PrimFunc after each pass.

    ``before`` and ``after`` are the function of that name in the pass's input and output
    (functions the pass added or removed are not shown). Sequentials are not reported (their
    passes are). This is how ``tilecraft.lower.lower(..., hooks=...)`` is implemented.
    """

    def __init__(self, hooks: Sequence[PassHook]) -> None:
        self.hooks = tuple(hooks)
        self._running = _PerThread()

    def run_before_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Remember the input module."""
        if not isinstance(pass_, Sequential):
            self._running.items.append((pass_, mod))

    def run_after_pass(self, mod: IRModule, pass_: Pass) -> None:
        """Call the hooks for each function present before and after."""
        if isinstance(pass_, Sequential):
            return
        before = _pop(self._running.items, pass_)
        if not isinstance(before, IRModule):
            return
        old_funcs = dict(before.prim_funcs())
        for name, after in mod.prim_funcs():
            old = old_funcs.get(name)
            if old is not None:
                for hook in self.hooks:
                    hook(pass_.name, old, after)

    def pass_failed(self, mod: IRModule, pass_: Pass, error: BaseException) -> None:
        """Forget the input of a pass that raised."""
        _pop(self._running.items, pass_)


__all__ = [
    "DumpIR",
    "PassHook",
    "PassTiming",
    "PassTimingInstrument",
    "PrimFuncHooks",
    "RecordPasses",
    "VerifyIR",
]

"""Loaded kernels: :class:`Module` (``lib["main"](a, b, c)``) and timing."""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BuildError
from ..ir import Block, Buffer, BufferStore, Node, PrimFunc, post_order_visit
from ..lower.bounds_check import BOUNDS_SITES_ATTR
from .arguments import (
    ArgumentChecker,
    check_timing,
    ctype_of,
    missing_function,
    reject_keywords,
)
from .bounds import find_record, raise_if_violated
from .openmp_fork import guard_forks
from .threads import before_call

if TYPE_CHECKING:
    from .backend.base import Artifact


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call of each repeat; ``median``, ``mean`` and ``std`` summarize them."""

    results: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median seconds per call."""
        return statistics.median(self.results)

    @property
    def mean(self) -> float:
        """Mean seconds per call."""
        return statistics.fmean(self.results)

    @property
    def std(self) -> float:
        """Population standard deviation of the repeats (0 for one repeat)."""
        return statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    def __str__(self) -> str:
        return (
            f"median {self.median * 1e3:.4f} ms, mean {self.mean * 1e3:.4f} ms, "
            f"std {self.std * 1e3:.4f} ms ({len(self.results)} repeats)"
        )


def _written(func: PrimFunc) -> set[int]:
    out: set[int] = set()

    def fn(n: Node) -> None:
        if isinstance(n, BufferStore):
            out.add(id(n.buffer))
        elif isinstance(n, Block):  # a tensorized block may write only through intrinsics
            out.update(id(r.buffer) for r in n.writes)

    post_order_visit(func.body, fn)
    return out


def written_params(func: PrimFunc) -> list[Buffer]:
    """The buffer parameters ``func`` stores into (its outputs), in parameter order."""
    ids = _written(func)
    return [p for p in func.buffer_params if id(p) in ids]


class Function:
    """One compiled kernel; call it with numpy arrays / DLPack tensors / scalars."""

    def __init__(
        self,
        cfunc: Any,
        func: PrimFunc,
        lowered: PrimFunc,
        after_call: Callable[[], None] | None = None,
    ) -> None:
        self.name = func.name
        self.func = func
        self.lowered = lowered
        self._cfunc = cfunc
        self._after_call = after_call  # raises BoundsCheckError in bounds-checked builds
        cfunc.restype = None
        cfunc.argtypes = [
            ctypes.c_void_p if isinstance(p, Buffer) else ctype_of(p.dtype) for p in lowered.params
        ]
        self._checker = ArgumentChecker(func, lowered, _written(func))

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Check ``args`` against the parameters (raising ArgumentError) and run the kernel.

        Arguments are positional, one per parameter of the function: inputs and outputs
        alike (outputs are written in place).
        """
        reject_keywords(self.name, self._checker.names, kwargs)
        prepared = self._checker.prepare(args)
        before_call()
        self._cfunc(*prepared.cargs)
        if self._after_call is not None:
            self._after_call()

    def bind(self, *args: Any, **kwargs: Any) -> Callable[[], None]:
        """Check ``args`` once and return a no-argument callable running the kernel on them."""
        reject_keywords(self.name, self._checker.names, kwargs)
        prepared = self._checker.prepare(args)
        cfunc, cargs, after = self._cfunc, prepared.cargs, self._after_call

        def run() -> None:
            _ = prepared.arrays  # keep the arrays alive while the closure exists
            cfunc(*cargs)
            if after is not None:
                after()

        return run

    def __repr__(self) -> str:
        return f"<tilecraft Function {self.name}({', '.join(p.name for p in self.func.params)})>"


class Module:
    """A built library: ``lib["name"]`` gives a :class:`Function`; ``lib.source`` the C text."""

    def __init__(
        self,
        path: Path,
        source: str,
        functions: dict[str, tuple[PrimFunc, PrimFunc]],
        symbols: dict[str, str],
    ) -> None:
        self.path = path
        self.source = source
        self.artifact: Artifact | None = None  # what its backend loaded it from (exported)
        guard_forks()  # a forked child must not wait for this process's OpenMP threads
        try:
            self._lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise BuildError(f"cannot load the compiled library {path}: {e}") from e
        after = self._bounds_hook(functions, symbols)
        self._functions = {
            name: Function(getattr(self._lib, symbols[name]), orig.update(name=name), low, after)
            for name, (orig, low) in functions.items()
        }

    @property
    def bounds_checked(self) -> bool:
        """True when the library was built with ``bounds_check=True``."""
        return self._bounds_checked

    def _bounds_hook(
        self, functions: dict[str, tuple[PrimFunc, PrimFunc]], symbols: dict[str, str]
    ) -> Callable[[], None] | None:
        sites = {
            name: tuple(str(s) for s in low.attrs.get(BOUNDS_SITES_ATTR, ()))  # type: ignore[union-attr]
            for name, (_, low) in functions.items()
        }
        checked = any(BOUNDS_SITES_ATTR in low.attrs for _, low in functions.values())
        record = find_record(self._lib) if checked else None  # None: no check survived
        self._bounds_checked = checked
        if record is None:
            return None
        names = {sym: name for name, sym in symbols.items()}
        return lambda: raise_if_violated(record, names, sites)

    @property
    def function_names(self) -> list[str]:
        """Names of the functions in this module."""
        return list(self._functions)

    def __getitem__(self, name: str) -> Function:
        fn = self._functions.get(name) if isinstance(name, str) else None
        if fn is None:
            raise missing_function(name, self.function_names)
        return fn

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def get_function(self, name: str) -> Function:
        """``self[name]``."""
        return self[name]

    def time_evaluator(
        self, name: str, number: int = 10, repeat: int = 5, min_repeat_ms: float = 0
    ) -> Callable[..., TimingResult]:
        """A callable timing function ``name`` on given arguments.

        Parameters
        ----------
        name
            The function to time.
        number
            Calls per repeat (the time of a repeat is divided by it).
        repeat
            Number of measurements.
        min_repeat_ms
            Raise ``number`` until one repeat takes at least this long.

        Returns
        -------
        callable
            ``evaluator(*args) -> TimingResult`` (seconds per call); it runs once to warm up.
        """
        fn = self[name]
        check_timing(number, repeat)

        def evaluator(*args: Any) -> TimingResult:
            return time_calls(fn.bind(*args), number, repeat, min_repeat_ms)

        return evaluator

    def __repr__(self) -> str:
        return f"<tilecraft Module {self.function_names} at {self.path}>"


def time_calls(
    run: Callable[[], object], number: int, repeat: int, min_repeat_ms: float
) -> TimingResult:
    """Seconds per call of ``run``: one warm-up call, then ``repeat`` timed groups of calls.

    Each group makes ``number`` calls, raised until a group takes at least ``min_repeat_ms``.
    """
    run()
    n = number
    results = []
    for _ in range(repeat):
        while True:
            start = time.perf_counter()
            for _ in range(n):
                run()
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= min_repeat_ms or n >= 1 << 30:
                break
            n = max(n * 2, int(n * min_repeat_ms / max(elapsed * 1e3, 1e-3)) + 1)
        results.append(elapsed / n)
    return TimingResult(tuple(results))

"""The library as a tuning candidate: time what :class:`DispatchLibrary` would run for a function.

For a PrimFunc that :func:`~tilecraft.dispatch._gemm.match_gemm` accepts, the dispatched path
is the library's GEMM followed, when the function fuses one, by its epilogue as a kernel of our
own scheduled by the target's default rules: exactly what ``DispatchLibrary`` then the rules
build. :meth:`LibraryCandidate.measure` times that path on random inputs in this process,
the way the tuner's runner times a kernel (warm-up calls, then ``repeat`` means of ``number``
calls), on ``num_threads`` library threads; the tuner records the times next to its own
candidates' (:mod:`tilecraft.tune`), and ``DispatchLibrary(database=db)`` keeps whichever is
faster per function.

A candidate is an object (:class:`LibraryCandidate`), so tests give the tuner fixed timings
(a subclass overriding :meth:`~LibraryCandidate.measure`) and the choice stays deterministic.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..errors import TilecraftError
from ..ir import Buffer, IntImm, IRModule, PrimFunc
from ..rules import ApplyDefaultSchedule, default_rules
from ..runtime import build
from ..runtime.executor.extern import ExternLibraryError, extern_kernel, load_blas
from ..target import Target
from ._gemm import GemmMatch, match_gemm


class LibraryCandidate:
    """A vendor library as one more tuning candidate (base class: BLAS, see :func:`candidate`).

    Attributes
    ----------
    name
        The library, as ``DispatchLibrary(library=name)`` and the ``dispatch:<name>`` mark
        spell it.
    """

    name = "blas"

    def unavailable(self, target: Target) -> str | None:
        """Why the library cannot run for ``target`` here (not installed, a GPU target)."""
        if target.kind != "cpu":
            return f"{self.name} runs on the CPU; the target is {target}"
        try:
            load_blas()
        except ExternLibraryError as e:
            return str(e)
        return None

    def declines(self, func: PrimFunc) -> str | None:
        """Why ``func`` is not something the library computes (None: it is)."""
        m = match_gemm(func)
        if isinstance(m, str):
            return m
        if not all(isinstance(d, IntImm) for p in _buffers(func) for d in p.shape):
            return "symbolic extents: the library is measured on static shapes only"
        return None

    def measure(
        self,
        func: PrimFunc,
        target: Target,
        *,
        number: int = 3,
        repeat: int = 3,
        warmup: int = 1,
        num_threads: int | None = None,
    ) -> tuple[float, ...]:
        """Seconds per call of the dispatched path of ``func``, one value per repeat.

        Raises
        ------
        TilecraftError
            When ``func`` is not dispatchable or its epilogue does not build.
        """
        call = self.prepare(func, target, num_threads or target.num_cores)
        for _ in range(warmup):
            call()
        times = []
        for _ in range(max(1, repeat)):
            start = time.perf_counter()
            for _ in range(max(1, number)):
                call()
            times.append((time.perf_counter() - start) / max(1, number))
        return tuple(times)

    def prepare(self, func: PrimFunc, target: Target, num_threads: int) -> Callable[[], None]:
        """A call running the dispatched path of ``func`` on fixed random inputs."""
        m = match_gemm(func)
        if isinstance(m, str) or self.declines(func) is not None:
            raise TilecraftError(f"{self.name}: {func.name} is not dispatchable: {m}")
        rng = np.random.default_rng(0)
        args = [_random(p.dtype.numpy_name(), _static(p.shape), rng) for p in _buffers(func)]
        gemm = extern_kernel(
            "blas.gemm", {"trans_a": m.trans_a, "trans_b": m.trans_b, "num_threads": num_threads}
        )
        a, b, out = args[m.a], args[m.b], args[-1]
        if m.epilogue is None:
            return lambda: gemm(a, b, out)
        epilogue = _epilogue(m, target)
        tmp = np.empty(_static(_buffers(m.epilogue)[0].shape), out.dtype)
        rest = [args[n] for n in m.epilogue_inputs]

        def call() -> None:
            gemm(a, b, tmp)
            epilogue(tmp, *rest, out)

        return call


def _buffers(func: PrimFunc) -> list[Buffer]:
    """The parameters of ``func``, all buffers (``match_gemm`` accepts no other)."""
    return [p for p in func.params if isinstance(p, Buffer)]


def _static(shape: tuple[object, ...]) -> tuple[int, ...]:
    return tuple(d.value for d in shape if isinstance(d, IntImm))


def _random(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


def _epilogue(m: GemmMatch, target: Target) -> Callable[..., object]:
    """The epilogue kernel as ``DispatchLibrary`` then the default rules build it."""
    assert m.epilogue is not None  # callers check
    with target:
        mod = ApplyDefaultSchedule(*default_rules(target))(IRModule({"main": m.epilogue}))
    return build(mod, target)["main"]


def candidate(library: str) -> LibraryCandidate:
    """The built-in candidate of ``library`` (``"blas"``)."""
    if library != LibraryCandidate.name:
        raise TilecraftError(f"no library candidate {library!r}; available: ['blas']")
    return LibraryCandidate()

"""``LocalRunner`` and ``CUDARunner``: measure candidates in an isolated worker process."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import TuneError
from ...ir import PrimFunc, structural_hash, to_json
from ...runtime.compiler import flag_probe
from ...runtime.cuda_driver import why_no_device
from ...runtime.threads import kernel_threads
from .._proc import WorkerPool
from .base import (
    EvaluatorConfig,
    Runner,
    RunnerInput,
    RunnerResult,
    check_clock,
    result_of_reply,
    run_request,
)


class ReferenceCache:
    """Key and JSON of each reference function, computed once per function object."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[PrimFunc, dict[str, str]]] = {}

    def get(self, func: PrimFunc | None) -> dict[str, str] | None:
        """``{"key", "mod"}`` of ``func`` (None for None)."""
        if func is None:
            return None
        hit = self._items.get(id(func))
        if hit is None:
            hit = (func, {"key": structural_hash(func), "mod": to_json(func)})
            if len(self._items) > 64:
                self._items.clear()
            self._items[id(func)] = hit
        return hit[1]


class LocalRunner(Runner):
    """Measure candidates one at a time in a worker process on this machine.

    A candidate that crashes the worker (segfault, ``exit``) or runs past ``timeout_s`` gets
    a failed result naming what happened; the worker is replaced and the batch goes on.

    Parameters
    ----------
    timeout_s
        Deadline of one candidate (correctness check and timing), in seconds.
    number, repeat, min_repeat_ms, warmup, cache_flush, cooldown_s, clock
        Timing settings (see :class:`EvaluatorConfig`); or pass ``evaluator=``.
        ``clock="thread"`` (one thread only) keeps measurements steady on a shared machine.
    num_threads
        ``OMP_NUM_THREADS`` of the worker, fixed for every run (default: the threads this
        process's kernels run on, :func:`tilecraft.runtime.threads.kernel_threads`:
        ``OMP_NUM_THREADS`` when set, else the usable cores), so candidates are measured on
        the threads the tuned model will run on.
    check_correctness
        Compare each candidate's outputs with its reference (the unscheduled function) on
        random inputs; a mismatch fails the candidate with "wrong result: ...".
    rtol, atol
        Tolerances of that comparison (default per dtype, float32 1e-3).
    seed
        Seed of the random inputs.
    reference_timeout_s
        Extra time for the first candidate of a workload in a worker, which also builds
        and runs the reference (and again after the worker was replaced).
    env
        More environment variables for the worker.
    evaluator
        A complete timing configuration (overrides the individual settings).
    """

    def __init__(
        self,
        timeout_s: float = 10.0,
        *,
        number: int = 3,
        repeat: int = 3,
        min_repeat_ms: float = 0.0,
        warmup: int = 1,
        cache_flush: bool = False,
        cooldown_s: float = 0.0,
        clock: str = "wall",
        num_threads: int | None = None,
        check_correctness: bool = True,
        rtol: float | None = None,
        atol: float | None = None,
        seed: int = 0,
        reference_timeout_s: float = 120.0,
        env: Mapping[str, str] | None = None,
        evaluator: EvaluatorConfig | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise TuneError(f"{type(self).__name__}: timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = timeout_s
        self.evaluator = evaluator or EvaluatorConfig(
            number, repeat, min_repeat_ms, warmup, cache_flush, cooldown_s, clock
        )
        threads = kernel_threads() if num_threads is None else num_threads
        if threads < 1:
            raise TuneError(f"{type(self).__name__}: num_threads must be >= 1, got {threads}")
        check_clock(self.evaluator, threads, type(self).__name__)
        self.num_threads = threads
        self.check: dict[str, Any] = {
            "enabled": check_correctness,
            "seed": seed,
            "rtol": rtol,
            "atol": atol,
        }
        worker_env = {"OMP_NUM_THREADS": str(threads), **self._extra_env(), **dict(env or {})}
        self.pool = WorkerPool(
            1, env=worker_env, label="runner", preload="run", warmup_s=reference_timeout_s
        )
        self._references = ReferenceCache()
        self._probe: dict[str, object] | None = None

    def _extra_env(self) -> dict[str, str]:
        return {}

    def run(self, inputs: Sequence[RunnerInput]) -> list[RunnerResult]:
        """Measure every input in the worker; failures are results with an error."""
        if not inputs:
            return []
        if self._probe is None:
            self._probe = flag_probe()  # the reference's compiler; probed once, not per worker
        requests = [
            {
                **run_request(i, self.evaluator, self._references.get(i.reference), self.check),
                "probe": self._probe,
            }
            for i in inputs
        ]
        return [result_of_reply(r) for r in self.pool.map(requests, self.timeout_s)]

    def close(self) -> None:
        """Stop the worker."""
        self.pool.close()


class CUDARunner(LocalRunner):
    """Measure CUDA candidates on GPU ``device``, timed with CUDA events.

    Same isolation and settings as :class:`LocalRunner`; arguments stay on the device while
    timing, and the correctness reference runs on the CPU. ``cache_flush`` is not supported
    (it flushes CPU caches).

    Parameters
    ----------
    device
        The GPU to use (``CUDA_VISIBLE_DEVICES`` of the worker).
    **kwargs
        As for :class:`LocalRunner`.
    """

    def __init__(self, timeout_s: float = 10.0, *, device: int = 0, **kwargs: Any) -> None:
        self.device = device
        super().__init__(timeout_s, **kwargs)
        if self.evaluator.cache_flush:
            raise TuneError("CUDARunner: cache_flush flushes CPU caches; it is not supported")
        self._no_device: str | None = None  # why the device cannot be used, once probed

    def run(self, inputs: Sequence[RunnerInput]) -> list[RunnerResult]:
        """Measure every input on the GPU. Without a usable device (no driver, no GPU) nothing
        is run: a warning says so once, and every result fails with the reason."""
        if not inputs:
            return []
        if self._no_device is None:
            self._no_device = why_no_device(self.device) or ""
            if self._no_device:
                warnings.warn(
                    f"CUDARunner: no GPU to measure on ({self._no_device}); candidates are "
                    "still built, but none is run: each is recorded as failed, not measured",
                    stacklevel=2,
                )
        if self._no_device:
            error = f"not measured: no CUDA device ({self._no_device})"
            return [RunnerResult(None, error) for _ in inputs]
        return super().run(inputs)

    def _extra_env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": str(self.device)}

"""``LocalBuilder``: build candidates in parallel worker processes on this machine."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from ...errors import TuneError
from ...ir import to_json
from .._proc import WorkerPool
from ._compile import build_flags
from .base import BuildArtifact, Builder, BuilderInput, BuilderResult


def usable_cores() -> int:
    """Cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class LocalBuilder(Builder):
    """Build candidates in a pool of worker processes.

    Each build runs in a worker with a deadline; a worker that misses it is killed with the
    compiler it started, and the build fails with "timed out". Workers are replaced by fresh
    ones after every batch (``recycle``), so memory a build leaks does not pile up; the new
    workers start while the previous batch is measured.

    Parameters
    ----------
    max_workers
        Parallel builds (default: the usable cores).
    timeout_s
        Deadline of one build, in seconds.
    memory_cap_mb
        Address-space limit of each worker and its compiler (None: no limit).
    march
        Architecture for ``-march`` instead of ``native`` (see
        :func:`~tilecraft.tune.builder.host_march`); None builds for this machine.
    recycle
        Replace the workers after every batch.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        timeout_s: float = 60.0,
        memory_cap_mb: int | None = 8192,
        march: str | None = None,
        recycle: bool = True,
    ) -> None:
        workers = usable_cores() if max_workers is None else max_workers
        if workers < 1 or timeout_s <= 0:
            raise TuneError(
                f"LocalBuilder: max_workers must be >= 1 and timeout_s > 0, got {workers}, "
                f"{timeout_s}"
            )
        self.timeout_s = timeout_s
        self.march = march
        self.recycle = recycle
        self._flags: tuple[str, ...] | None = None
        # one thread each: builds run side by side, and BLAS thread buffers would eat the cap
        env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        self.pool = WorkerPool(workers, env=env, memory_cap_mb=memory_cap_mb, label="builder",
                               preload="build")  # fmt: skip

    def build(self, inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        """Build every input in the worker pool; failures are results with an error."""
        if not inputs:
            return []
        if self._flags is None and not all(i.target.is_gpu for i in inputs):
            self._flags = build_flags(self.march)  # probe the compiler once, not per worker
        flags = None if self._flags is None else list(self._flags)
        requests = [
            {"op": "build", "mod": to_json(i.mod), "target": str(i.target), "march": self.march,
             "embed_lib": False, "flags": flags}
            for i in inputs
        ]  # fmt: skip
        start = time.perf_counter()
        replies = self.pool.map(requests, self.timeout_s)
        if self.recycle:
            self.pool.recycle()
        wall = time.perf_counter() - start
        return [_result(reply, wall) for reply in replies]

    def close(self) -> None:
        """Stop the workers."""
        self.pool.close()


def _result(reply: dict[str, object], wall: float) -> BuilderResult:
    if reply.get("ok") is True and isinstance(reply.get("artifact"), dict):
        secs = reply.get("secs")
        took = float(secs) if isinstance(secs, int | float) else wall
        return BuilderResult(BuildArtifact.from_message(reply["artifact"]), None, took)  # type: ignore[arg-type]
    return BuilderResult(None, f"build failed: {reply.get('error', 'no reason given')}", wall)

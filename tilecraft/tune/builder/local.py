"""``LocalBuilder``: build candidates in parallel worker processes on this machine."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import BuildError, TuneError
from ...ir import to_json
from ...runtime.compiler import flag_probe
from ...runtime.threads import usable_cores as usable_cores
from .._proc import Message, WorkerPool
from ._compile import march_flags
from .base import BuildArtifact, Builder, BuilderInput, BuilderResult


def split_groups(indices: Sequence[int], workers: int, group_size: int) -> list[list[int]]:
    """``indices`` cut into balanced groups of at most ``group_size``, at least one per worker."""
    if not indices:
        return []
    count = min(len(indices), max(workers, math.ceil(len(indices) / group_size)))
    return [list(indices[k::count]) for k in range(count)]


class LocalBuilder(Builder):
    """Build candidates in a pool of worker processes.

    Candidates are sent to the workers in groups; a worker builds each candidate of its group
    on its own, through the target's backend exactly as ``tc.build`` would (same C, same
    flags, same compile cache: the measured library is the one ``tc.build`` loads), so a bad
    candidate only fails itself. The compiler is probed once here and the probe sent along.
    Each request has a deadline; a worker that misses it is killed with the compiler it
    started, and its candidates are built again one by one, so the one at fault fails with
    "timed out". Between batches, workers that built ``recycle_after``
    candidates or more are replaced by fresh ones, so memory a build leaks does not pile up;
    the new workers start while the previous batch is measured.

    Parameters
    ----------
    max_workers
        Parallel builds (default: the usable cores).
    timeout_s
        Deadline of one build request (a group, or one candidate), in seconds.
    memory_cap_mb
        Address-space limit of each worker and its compiler (None: no limit).
    march
        Architecture for ``-march`` instead of ``native`` (see
        :func:`~tilecraft.tune.builder.host_march`); None builds for this machine.
    recycle_after
        Builds after which a worker is replaced at the end of a batch (1: after every
        batch; None: never).
    group_size
        Most candidates sent to a worker in one request (1: each alone).
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        timeout_s: float = 60.0,
        memory_cap_mb: int | None = 8192,
        march: str | None = None,
        recycle_after: int | None = 32,
        group_size: int = 16,
    ) -> None:
        workers = usable_cores() if max_workers is None else max_workers
        if workers < 1 or timeout_s <= 0 or group_size < 1:
            raise TuneError(
                f"LocalBuilder: max_workers and group_size must be >= 1 and timeout_s > 0, got "
                f"{workers}, {group_size}, {timeout_s}"
            )
        if recycle_after is not None and recycle_after < 1:
            raise TuneError(f"LocalBuilder: recycle_after must be >= 1, got {recycle_after}")
        self.workers = workers
        self.timeout_s = timeout_s
        self.march = march
        self.recycle_after = recycle_after
        self.group_size = group_size
        march_flags(march)  # validate now, not in every worker
        self._probe: dict[str, object] | None = None
        # one thread each: builds run side by side, and BLAS thread buffers would eat the cap
        env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        self.pool = WorkerPool(
            workers, env=env, memory_cap_mb=memory_cap_mb, label="builder", preload="build"
        )

    def _request(self, inputs: Sequence[BuilderInput], group: list[int]) -> Message:
        if self._probe is None:  # probe the compiler once, not per worker
            try:
                self._probe = flag_probe()
            except BuildError:  # no C compiler: the workers say so per candidate
                self._probe = {}
        return {
            "op": "build",
            "weight": len(group),
            "mods": [to_json(inputs[i].mod) for i in group],
            "target": str(inputs[group[0]].target),
            "march": self.march,
            "embed_lib": False,
            "probe": self._probe,
        }

    def _groups(self, inputs: Sequence[BuilderInput], size: int) -> list[list[int]]:
        by_target: dict[str, list[int]] = {}
        for i, inp in enumerate(inputs):
            by_target.setdefault(str(inp.target), []).append(i)
        return [g for ids in by_target.values() for g in split_groups(ids, self.workers, size)]

    def build(self, inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        """Build every input in the worker pool; failures are results with an error."""
        results: list[BuilderResult | None] = [None] * len(inputs)
        groups = self._groups(inputs, self.group_size)
        retry: list[int] = []
        replies = self.pool.map([self._request(inputs, g) for g in groups], self.timeout_s)
        for group, reply in zip(groups, replies, strict=True):
            if reply.get("ok") is not True and len(group) > 1:
                retry.extend(group)  # a hang or crash: find the candidate at fault
                continue
            for i, item in zip(group, _items(reply, len(group)), strict=True):
                results[i] = item
        if retry:
            singles = [[i] for i in retry]
            again = self.pool.map([self._request(inputs, g) for g in singles], self.timeout_s)
            for (i,), reply in zip(singles, again, strict=True):
                results[i] = _items(reply, 1)[0]
        if self.recycle_after is not None:
            self.pool.recycle(self.recycle_after)
        return [r if r is not None else BuilderResult(None, "build failed: lost") for r in results]

    def close(self) -> None:
        """Stop the workers."""
        self.pool.close()


def _items(reply: Mapping[str, Any], count: int) -> list[BuilderResult]:
    """Per-candidate results of a worker's reply to a request for ``count`` candidates."""
    items = reply.get("results")
    if reply.get("ok") is not True or not isinstance(items, list) or len(items) != count:
        why = f"build failed: {reply.get('error', 'no reason given')}"
        return [BuilderResult(None, why) for _ in range(count)]
    secs = reply.get("secs")
    each = float(secs) / count if isinstance(secs, int | float) else 0.0
    out = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("artifact"), dict):
            out.append(BuilderResult(BuildArtifact.from_message(item["artifact"]), None, each))
        else:
            error = item.get("error") if isinstance(item, dict) else None
            out.append(BuilderResult(None, f"build failed: {error or 'no reason given'}", each))
    return out

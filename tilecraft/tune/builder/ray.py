"""``RayBuilder``: build candidates as Ray tasks on the cluster's CPU workers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import TuneError
from ...ir import to_json
from .._ray import STARTUP_TIMEOUT_S, require_ray, run_windowed, task_options
from ._compile import march_flags
from .base import Builder, BuilderInput, BuilderResult
from .local import _items


class RayBuilder(Builder):
    """Build candidates on Ray workers; each build a task holding ``num_cpus`` CPUs.

    The C flags are explicit for the machine that will measure: ``march`` replaces
    ``-march=native`` (which would describe whichever machine happens to compile). Ask the
    measuring host with :func:`~tilecraft.tune.builder.host_march`. Artifacts carry the
    library itself, so a runner on another node can load it.

    Parameters
    ----------
    march
        Target architecture of the measuring host (``"x86-64-v3"``, ``"sapphirerapids"``...);
        None: the flags the target itself names (right for a preset such as ``avx2`` or a
        GPU target; for the host target it means ``-march=native`` of the building worker).
    timeout_s
        Deadline of one build, in seconds, counted from when its task starts running on a
        worker that has imported the compiler (not from its submission: Ray's queueing and
        worker start-up are not charged to the build); late builds are cancelled.
    num_cpus
        CPUs each build task holds.
    max_in_flight
        Builds submitted at once (default: the cluster's CPUs / ``num_cpus``).
    start_timeout_s
        How long a submitted build may wait for a worker to start it, in seconds, while no
        other build of the batch runs (counted from its submission or from the last time
        another build started or ended, whichever is later); past it the task is cancelled
        and the build fails with a timeout.
    """

    def __init__(
        self,
        march: str | None,
        *,
        timeout_s: float = 120.0,
        num_cpus: float = 1.0,
        max_in_flight: int | None = None,
        start_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        march_flags(march)  # validate now, not in every task
        if timeout_s <= 0 or num_cpus <= 0 or start_timeout_s <= 0:
            raise TuneError("RayBuilder: timeout_s, num_cpus and start_timeout_s must be > 0")
        self.march = march
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.num_cpus = num_cpus
        self.max_in_flight = max_in_flight

    def build(self, inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        """Build every input as a Ray task; failures are results with an error."""
        if not inputs:
            return []
        ray = require_ray()
        # no runtime_env: Ray's idle workers take builds at once (and Ray sets a task's
        # OMP_NUM_THREADS to its CPUs)
        task = task_options(ray, num_cpus=self.num_cpus)
        requests = [
            {
                "op": "build",
                "mods": [to_json(i.mod)],
                "target": str(i.target),
                "march": self.march,
                "embed_lib": True,
            }
            for i in inputs
        ]
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        window = self.max_in_flight or max(1, int(cpus // self.num_cpus))

        def submit(index: int) -> Any:
            return task.remote(requests[index])

        replies = run_windowed(
            ray, submit, len(requests), self.timeout_s, window, "build", self.start_timeout_s
        )
        return [_items(r, 1)[0] for r in replies]

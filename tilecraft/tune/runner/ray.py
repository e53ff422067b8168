"""``RayRunner``: measure candidates as Ray tasks on workers holding a device resource."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import TuneError
from .._ray import STARTUP_TIMEOUT_S, require_ray, run_windowed, task_options
from .base import (
    EvaluatorConfig,
    Runner,
    RunnerInput,
    RunnerResult,
    check_clock,
    result_of_reply,
    run_request,
)
from .local import ReferenceCache

DEFAULT_RESOURCE = "tilecraft_device"


class RayRunner(Runner):
    """Measure candidates on Ray workers, one at a time per device.

    Each measurement is a task needing one unit of the custom resource ``resource``: start
    every measuring node with ``resources={"tilecraft_device": 1}`` (one unit per device you
    want measured at a time), and no two measurements share a device. A measurement past
    ``timeout_s`` is cancelled (its Ray worker is killed); one whose worker crashes is a
    failed candidate (tasks never retry). Results come back to the driver, the only writer
    of the database.

    A measurement's clock starts when its task starts running, not when it is submitted:
    the time Ray takes to queue the task and to start its worker process (a cancelled or
    crashed measurement's worker is gone, so the next one often waits for a new process,
    seconds on a loaded machine) is not charged to the candidate, nor is a new worker's
    build of the workload's reference outputs (a local runner gives that its own
    ``reference_timeout_s``). That wait has its own, generous limit, ``start_timeout_s``.

    Parameters
    ----------
    timeout_s
        Deadline of one measurement, in seconds, counted from when its task starts running
        on a worker that has imported the measuring code (not from its submission).
    resource
        The custom resource marking a device.
    num_cpus
        CPUs a measurement task holds besides the device (0: only the device).
    num_threads
        ``OMP_NUM_THREADS`` of the measuring worker (None: Ray's default for the task).
    check_correctness, rtol, atol, seed
        As for :class:`~tilecraft.tune.LocalRunner`.
    evaluator
        Timing settings (default :class:`EvaluatorConfig()`).
    max_in_flight
        Measurements submitted at once (default: the cluster's units of ``resource``).
    start_timeout_s
        How long a submitted measurement may wait for a worker to start it, in seconds, while no
        other measurement of the batch runs (counted from its submission or from the last time
        another measurement started or ended, whichever is later); past it the task is cancelled
        and the candidate fails with a timeout.
    """

    def __init__(
        self,
        timeout_s: float = 30.0,
        *,
        resource: str = DEFAULT_RESOURCE,
        num_cpus: float = 0.0,
        num_threads: int | None = None,
        check_correctness: bool = True,
        rtol: float | None = None,
        atol: float | None = None,
        seed: int = 0,
        evaluator: EvaluatorConfig | None = None,
        max_in_flight: int | None = None,
        start_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        if timeout_s <= 0 or start_timeout_s <= 0:
            raise TuneError(
                "RayRunner: timeout_s and start_timeout_s must be > 0, "
                f"got {timeout_s} and {start_timeout_s}"
            )
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.resource = resource
        self.num_cpus = num_cpus
        self.num_threads = num_threads
        self.evaluator = evaluator or EvaluatorConfig()
        check_clock(self.evaluator, num_threads, "RayRunner")
        self.check: dict[str, Any] = {
            "enabled": check_correctness,
            "seed": seed,
            "rtol": rtol,
            "atol": atol,
        }
        self.max_in_flight = max_in_flight
        self._references = ReferenceCache()

    def run(self, inputs: Sequence[RunnerInput]) -> list[RunnerResult]:
        """Measure every input as a Ray task; failures are results with an error."""
        if not inputs:
            return []
        ray = require_ray()
        units = int(float(ray.cluster_resources().get(self.resource, 0)))
        if units < 1:
            raise TuneError(
                f"RayRunner: no node of the cluster offers the resource {self.resource!r}; "
                f'start measuring nodes with resources={{"{self.resource}": 1}}'
            )
        env = {} if self.num_threads is None else {"OMP_NUM_THREADS": str(self.num_threads)}
        task = task_options(
            ray,
            num_cpus=self.num_cpus,
            resources={self.resource: 1},
            runtime_env={"env_vars": env} if env else None,
        )
        requests = [
            run_request(i, self.evaluator, self._references.get(i.reference), self.check)
            for i in inputs
        ]

        def submit(index: int) -> Any:
            return task.remote(requests[index])

        window = self.max_in_flight or units
        replies = run_windowed(
            ray, submit, len(requests), self.timeout_s, window, "run", self.start_timeout_s
        )
        return [result_of_reply(r) for r in replies]

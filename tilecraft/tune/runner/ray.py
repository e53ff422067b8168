"""``RayRunner``: measure candidates as Ray tasks on workers holding a device resource."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import TuneError
from .._ray import handle_request, require_ray, run_windowed
from .base import EvaluatorConfig, Runner, RunnerInput, RunnerResult, result_of_reply, run_request
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

    Parameters
    ----------
    timeout_s
        Deadline of one measurement, counted from its submission, in seconds.
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
    ) -> None:
        if timeout_s <= 0:
            raise TuneError(f"RayRunner: timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = timeout_s
        self.resource = resource
        self.num_cpus = num_cpus
        self.num_threads = num_threads
        self.evaluator = evaluator or EvaluatorConfig()
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
        task = ray.remote(handle_request).options(
            num_cpus=self.num_cpus,
            resources={self.resource: 1},
            max_retries=0,
            runtime_env={"env_vars": env} if env else None,
        )
        requests = [
            run_request(i, self.evaluator, self._references.get(i.reference), self.check)
            for i in inputs
        ]

        def submit(index: int) -> Any:
            return task.remote(requests[index])

        window = self.max_in_flight or units
        replies = run_windowed(ray, submit, len(requests), self.timeout_s, window, "run")
        return [result_of_reply(r) for r in replies]

"""The runner interface: built candidates in, run times (or why they failed) out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from types import TracebackType
from typing import Any

from ...errors import TuneError
from ...ir import PrimFunc
from ..arg_info import ArgInfo
from ..builder.base import BuildArtifact

CLOCKS = ("wall", "thread")


@dataclass(frozen=True)
class EvaluatorConfig:
    """How a candidate is timed.

    Attributes
    ----------
    number
        Calls per repeat; a repeat's time is divided by it.
    repeat
        Measurements per candidate (the record keeps all of them).
    min_repeat_ms
        Raise ``number`` until one repeat lasts at least this long.
    warmup
        Untimed calls before the first repeat.
    cache_flush
        Overwrite a buffer larger than the last-level cache before each repeat (CPU), so a
        repeat starts cold; use with ``number=1`` to time cold calls only.
    cooldown_s
        Pause between repeats (lets clocks and temperature settle).
    clock
        ``"wall"``: elapsed time. ``"thread"``: the CPU time of the calling thread, which a
        machine shared with other work inflates far less (time spent descheduled is not
        counted); it sees only work done on that thread, so it is for one-thread kernels
        (CPU only; the runners refuse it with more threads).
    """

    number: int = 3
    repeat: int = 3
    min_repeat_ms: float = 0.0
    warmup: int = 1
    cache_flush: bool = False
    cooldown_s: float = 0.0
    clock: str = "wall"

    def __post_init__(self) -> None:
        ints = {"number": 1, "repeat": 1, "warmup": 0}
        for name, low in ints.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise TuneError(f"EvaluatorConfig: {name} must be an int >= {low}, got {value!r}")
        for name in ("min_repeat_ms", "cooldown_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0:
                raise TuneError(f"EvaluatorConfig: {name} must be a number >= 0, got {value!r}")
        if self.clock not in CLOCKS:
            raise TuneError(
                f"EvaluatorConfig: clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}"
            )
        if not isinstance(self.cache_flush, bool):
            raise TuneError(
                f"EvaluatorConfig: cache_flush must be a bool, got {self.cache_flush!r}"
            )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> EvaluatorConfig:
        """Rebuild from :meth:`as_dict` output (unknown keys are an error)."""
        names = {f.name for f in fields(EvaluatorConfig)}
        if not isinstance(data, Mapping) or set(data) - names:
            raise TuneError(f"EvaluatorConfig: unexpected settings {data!r}")
        return EvaluatorConfig(**dict(data))


def check_clock(evaluator: EvaluatorConfig, threads: int | None, who: str) -> None:
    """TuneError when ``evaluator`` asks for the thread clock with other than one thread."""
    if evaluator.clock == "thread" and threads != 1:
        raise TuneError(
            f"{who}: clock='thread' times the calling thread only, so it needs num_threads=1 "
            f"(got {threads})"
        )


@dataclass(frozen=True)
class RunnerInput:
    """One built candidate to measure.

    Attributes
    ----------
    artifact
        What the builder produced.
    args_info
        The arguments to call it with (random inputs are made from them).
    reference
        The unscheduled function: when given (and the runner checks correctness), the
        candidate's outputs must match the reference's on the same random inputs.
    """

    artifact: BuildArtifact
    args_info: tuple[ArgInfo, ...]
    reference: PrimFunc | None = None


@dataclass(frozen=True)
class RunnerResult:
    """Run times of a candidate in seconds per call (one per repeat), or why it failed."""

    run_secs: tuple[float, ...] | None
    error: str | None = None


class Runner(ABC):
    """Measures batches of built candidates; a failure is a result, never an exception."""

    @abstractmethod
    def run(self, inputs: Sequence[RunnerInput]) -> list[RunnerResult]:
        """Measure every input; results in the same order."""

    def close(self) -> None:
        """Release worker processes (the runner may be used again; they restart)."""
        return None  # nothing to release by default

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def result_of_reply(reply: Mapping[str, Any]) -> RunnerResult:
    """A runner result from a worker's (or a Ray task's) reply."""
    secs = reply.get("run_secs")
    if reply.get("ok") is True and isinstance(secs, list) and secs:
        if all(isinstance(s, int | float) and not isinstance(s, bool) and s >= 0 for s in secs):
            return RunnerResult(tuple(float(s) for s in secs))
        return RunnerResult(None, f"the runner returned bad run times {secs!r}")
    return RunnerResult(None, str(reply.get("error") or "no reason given"))


def run_request(
    inp: RunnerInput,
    config: EvaluatorConfig,
    reference: Mapping[str, str] | None,
    check: Mapping[str, Any],
) -> dict[str, Any]:
    """The message a worker (or a Ray task) measures ``inp`` from."""
    return {
        "op": "run",
        "artifact": inp.artifact.as_message(),
        "args": [a.as_dict() for a in inp.args_info],
        "config": config.as_dict(),
        "reference": None if reference is None else dict(reference),
        "check": dict(check),
        "warm": None if reference is None else f"{reference['key']}:{check.get('seed', 0)}",
    }

"""What the annotations that lowering acts on may hold (checked by ``annotate`` and traces).

Most annotation keys are free-form (a rule's or the tuner's notes). A few steer lowering, and
a value the lowering passes cannot use, or one that makes them blow the program up, is refused
when it is set (``annotate`` raises ScheduleError) and when a trace is read
(``Trace.from_json`` raises TraceFormatError, so a database record carrying it is skipped):

``pragma_auto_unroll_max_step``
    An int from 0 to :data:`MAX_AUTO_UNROLL_STEP`: loops under it with at most that many
    steps are unrolled (``lower/unroll_loops.py``); with ``pragma_unroll_explicit`` the body
    is copied once per step, so the value bounds how much one annotation grows the program.
"""

from __future__ import annotations

from dataclasses import dataclass

AUTO_UNROLL_MAX_STEP = "pragma_auto_unroll_max_step"

MAX_AUTO_UNROLL_STEP = 1024
"""Largest ``pragma_auto_unroll_max_step``. Schedules use 16 to 512 (the GPU tile schedules up
to 1024, the largest step budget common in tuning spaces). A larger budget only adds nests of
more than 1024 statements, whose explicit copies grow the program without bound: a 64x64
matmul under a huge budget did not build in 120 s, under 1024 it builds in under a second."""


@dataclass(frozen=True)
class AnnotationProblem:
    """Why a value cannot be set as an annotation: what is wrong and what is required."""

    short: str
    requires: str


def annotation_problem(key: str, value: object, on_loop: bool) -> AnnotationProblem | None:
    """Why ``value`` cannot be annotation ``key`` (on a loop when ``on_loop``), or None."""
    if key == AUTO_UNROLL_MAX_STEP:
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and 0 <= value <= MAX_AUTO_UNROLL_STEP
        ):
            return None
        return AnnotationProblem(
            f"{key} = {value!r} is not an int from 0 to {MAX_AUTO_UNROLL_STEP}",
            f"{key} needs an int step budget of at most {MAX_AUTO_UNROLL_STEP} (larger budgets "
            "unroll nests so large that the program does not build in reasonable time)",
        )
    return None

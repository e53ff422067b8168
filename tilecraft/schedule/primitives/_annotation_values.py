"""What the annotations that lowering acts on may hold (checked by ``annotate`` and traces).

Most annotation keys are free-form (a rule's or the tuner's notes). A few steer lowering, and
a value the lowering passes cannot use, or one that makes them blow the program up, is refused
when it is set (``annotate`` raises ScheduleError) and when a trace is read
(``Trace.from_json`` raises TraceFormatError, so a database record carrying it is skipped):

``pragma_auto_unroll_max_step``
    An int from 0 to :data:`MAX_AUTO_UNROLL_STEP`: loops under it with at most that many
    steps are unrolled (``lower/unroll_loops.py``); with ``pragma_unroll_explicit`` the body
    is copied once per step, so the value bounds how much one annotation grows the program.
``software_pipeline_stage``
    On a loop: a non-empty list of ints, each 0 (producers) or ``S - 1`` (consumers) for one
    ``S >= 2`` (``lower/software_pipeline.py``). That there is one stage per statement of the
    loop body is checked when lowering, once the body is final.
``software_pipeline_order``
    On a loop: a permutation of ``0 .. n-1`` (the position of each statement).
"""

from __future__ import annotations

from dataclasses import dataclass

AUTO_UNROLL_MAX_STEP = "pragma_auto_unroll_max_step"
PIPELINE_STAGE = "software_pipeline_stage"
PIPELINE_ORDER = "software_pipeline_order"

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


def _int_list(value: object) -> list[int] | None:
    """``value`` as a non-empty list of ints (not bools), or None."""
    if not isinstance(value, list | tuple) or not value:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return [int(v) for v in value]


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
    if key not in (PIPELINE_STAGE, PIPELINE_ORDER):
        return None
    if not on_loop:
        return AnnotationProblem(
            f"{key} is set on a block", f"{key} is read on loops only (software pipelining)"
        )
    ints = _int_list(value)
    if key == PIPELINE_STAGE:
        ok = ints is not None and max(ints) >= 1 and all(s in (0, max(ints)) for s in ints)
        want = "a non-empty list of stages, each 0 (producers) or S - 1 >= 1 (consumers)"
    else:
        ok = ints is not None and sorted(ints) == list(range(len(ints)))
        want = "a permutation of 0 .. n-1 (the position of each statement of the loop body)"
    if ok:
        return None
    return AnnotationProblem(f"{key} = {value!r} is not {want}", f"{key} needs {want}")

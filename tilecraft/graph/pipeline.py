"""Named pass pipelines for graph modules."""

from __future__ import annotations

from collections.abc import Callable

from ..ir.transform import Pass, Sequential
from .op import GraphError
from .transform import (
    AnnotateOpPattern,
    DeadCodeElimination,
    FuseOps,
    FuseTIR,
    Legalize,
)


def _zero() -> Sequential:
    return Sequential(
        [Legalize(), AnnotateOpPattern(), FuseOps(), FuseTIR(), DeadCodeElimination()],
        name="zero",
    )


PIPELINES: dict[str, Callable[[], Pass]] = {"zero": _zero}


def get_pipeline(name: str = "zero") -> Pass:
    """The pipeline named ``name``, a pass (a :class:`~tilecraft.ir.transform.Sequential`).

    ``"zero"``: Legalize, AnnotateOpPattern, FuseOps, FuseTIR, DeadCodeElimination — every
    operator becomes an unscheduled PrimFunc and fusable chains are merged.
    """
    if name not in PIPELINES:
        raise GraphError(f"unknown pipeline {name!r}; known: {sorted(PIPELINES)}")
    return PIPELINES[name]()

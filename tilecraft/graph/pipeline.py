"""Named pass pipelines for graph modules."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import IRModule
from .op import GraphError
from .transform import (
    AnnotateOpPattern,
    DeadCodeElimination,
    FuseOps,
    FuseTIR,
    Legalize,
    Sequential,
)


def _zero() -> Sequential:
    return Sequential(
        [Legalize(), AnnotateOpPattern(), FuseOps(), FuseTIR(), DeadCodeElimination()]
    )


PIPELINES: dict[str, Callable[[], Sequential]] = {"zero": _zero}


def get_pipeline(name: str = "zero") -> Callable[[IRModule], IRModule]:
    """The pipeline named ``name``.

    ``"zero"``: Legalize, AnnotateOpPattern, FuseOps, FuseTIR, DeadCodeElimination — every
    operator becomes an unscheduled PrimFunc and fusable chains are merged.
    """
    if name not in PIPELINES:
        raise GraphError(f"unknown pipeline {name!r}; known: {sorted(PIPELINES)}")
    return PIPELINES[name]()

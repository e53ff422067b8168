"""Named pass pipelines for graph modules."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..ir.transform import Pass, Sequential
from .op import GraphError
from .transform import (
    AnnotateOpPattern,
    DeadCodeElimination,
    FuseOps,
    FuseTIR,
    Legalize,
)
from .transform.bind_params import BindParams
from .transform.fold_constants import FoldConstants
from .transform.fuse_attention import FuseAttention
from .transform.fuse_transpose_matmul import FuseTransposeMatmul


def _zero() -> Sequential:
    return Sequential(
        [Legalize(), AnnotateOpPattern(), FuseOps(), FuseTIR(), DeadCodeElimination()],
        name="zero",
    )


def _default() -> Sequential:
    return Sequential(
        [
            FuseTransposeMatmul(),
            FoldConstants(),
            FuseAttention(),
            Legalize(),
            AnnotateOpPattern(),
            FuseOps(),
            FuseTIR(),
            DeadCodeElimination(),
        ],
        name="default",
    )


PIPELINES: dict[str, Callable[[], Sequential]] = {"zero": _zero, "default": _default}


def get_pipeline(name: str = "zero", params: Mapping[str, Any] | None = None) -> Pass:
    """The pipeline named ``name``, a pass (a :class:`~tilecraft.ir.transform.Sequential`).

    ``"zero"``: Legalize, AnnotateOpPattern, FuseOps, FuseTIR, DeadCodeElimination — every
    operator becomes an unscheduled PrimFunc and fusable chains are merged.

    ``"default"``: FuseTransposeMatmul (matmuls read transposed weights in their stored
    layout, or a bound weight is transposed once, see the pass), FoldConstants (bindings of
    constants only are computed once, here), FuseAttention (softmax-attention chains become
    one ``attention`` call; after FoldConstants, which turns torch's masks into constants),
    then "zero".

    Parameters
    ----------
    name
        ``"zero"`` or ``"default"``.
    params
        Weights to bind first (:class:`~tilecraft.graph.BindParams`): parameter name or
        dotted export name -> array. The executable then takes only the other parameters.
    """
    if name not in PIPELINES:
        raise GraphError(f"unknown pipeline {name!r}; known: {sorted(PIPELINES)}")
    pipeline = PIPELINES[name]()
    if params is None:
        return pipeline
    return Sequential([BindParams(params), *pipeline.passes], name=name)

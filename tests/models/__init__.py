"""Model fixtures shared by the tests, the benchmarks and the rule tests (not package code).

Every model of issue 12 is one import away, each as a :class:`ModelCase` (``mod, params,
inputs = case``) with its float64 numpy reference:

* ``llama``: a Llama-style decoder layer, TinyLlama-1.1B sizes (``llama.case(cfg, entry)``,
  entries ``decode`` and ``prefill``; ``llama.SMALL`` for quick tests);
* ``bert``: a BERT-base encoder layer; ``resnet``: ResNet-18 basic blocks (plain and
  downsampling); ``tutorial``: the two tutorial MLPs.

``cases(size)`` lists them all (``"small"`` for the default test run, ``"full"`` for the
sizes of the issue; ``small(name)`` one of the first); ``pipelined(case, ...)`` gives a case's
module after a graph pipeline and ``kernels(size)`` every distinct kernel the models hand to
the schedule rules. Tests import this package as ``models`` (``tests/`` is on ``sys.path``
under pytest); benchmarks load it through ``benchmarks/_models.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import tilecraft as tc
from tilecraft.graph import get_pipeline
from tilecraft.ir import IRModule, PrimFunc, structural_hash

from . import bert as bert
from . import llama as llama
from . import resnet as resnet
from . import tutorial as tutorial
from . import vit as vit
from .common import ModelCase as ModelCase


def cases(size: str = "small") -> list[ModelCase]:
    """Every model case of issue 12 at ``"small"`` or ``"full"`` size."""
    if size not in ("small", "full"):
        raise ValueError(f"size must be 'small' or 'full', got {size!r}")
    full = size == "full"
    lcfg = llama.TINYLLAMA if full else llama.SMALL
    return [
        llama.case(lcfg, "decode"),
        llama.case(lcfg, "prefill"),
        bert.case(bert.BERT_BASE if full else bert.SMALL),
        resnet.case(resnet.BLOCK if full else resnet.SMALL_BLOCK),
        resnet.case(resnet.DOWNSAMPLE if full else resnet.SMALL_DOWNSAMPLE),
        *(tutorial.case(m, b) for m in ("reference", "metaschedule") for b in (1, 64)),
    ]


def gpu_cases(size: str = "small") -> list[ModelCase]:
    """The models the GPU rules are checked on: :func:`cases`, the decoder layer in float16
    (decode and prefill), a ViT block and the ResNet-18 blocks in float16."""
    return [gpu_case(name, size) for name in gpu_case_names(size)]


def _gpu_builders(size: str) -> dict[str, Callable[[], ModelCase]]:
    full = size == "full"
    lcfg = llama.TINYLLAMA if full else llama.SMALL
    tag = "tinyllama" if full else "small"
    out: dict[str, Callable[[], ModelCase]] = {}
    for half in (False, True):
        cfg = llama.fp16(lcfg) if half else lcfg
        for entry in ("decode", "prefill"):
            name = f"llama_{entry}_{tag}" + ("_fp16" if half else "")
            out[name] = functools.partial(llama.case, cfg, entry)
    suffix = "" if full else "_small"
    bcfg = bert.BERT_BASE if full else bert.SMALL
    out[f"bert_layer{suffix}"] = functools.partial(bert.case, bcfg)
    out[f"vit_block{suffix}"] = functools.partial(vit.case, vit.VIT_BASE if full else vit.SMALL)
    blocks = (resnet.BLOCK, resnet.DOWNSAMPLE) if full else (resnet.SMALL_BLOCK,
                                                             resnet.SMALL_DOWNSAMPLE)  # fmt: skip
    for kind, cfg in zip(("block", "downsample"), blocks, strict=True):
        out[f"resnet18_{kind}{suffix}"] = functools.partial(resnet.case, cfg)
        out[f"resnet18_{kind}{suffix}_fp16"] = functools.partial(resnet.case, resnet.fp16(cfg))
    for m in ("reference", "metaschedule"):
        for b in (1, 64):
            out[f"tutorial_{m}_b{b}"] = functools.partial(tutorial.case, m, b)
    return out


def gpu_case_names(size: str = "small") -> list[str]:
    """The names of :func:`gpu_cases` ``(size)``, without building the models."""
    return list(_gpu_builders(size))


def gpu_case(name: str, size: str = "small") -> ModelCase:
    """One case of :func:`gpu_cases` ``(size)``, built alone."""
    builders = _gpu_builders(size)
    if name not in builders:
        raise KeyError(f"no {size} GPU model case {name!r}; cases: {sorted(builders)}")
    return builders[name]()


@functools.cache
def small(name: str) -> ModelCase:
    """The case of ``cases("small")`` named ``name`` (built once per process: do not mutate)."""
    found = {c.name: c for c in cases("small")}
    if name not in found:
        raise KeyError(f"no small model case {name!r}; cases: {sorted(found)}")
    return found[name]


def pipelined(case: ModelCase, pipeline: str = "zero", bind: bool = False) -> IRModule:
    """``case.mod`` after the graph pipeline ``pipeline`` for the CPU (bound weights: ``bind``)."""
    with tc.Target("cpu"):
        return get_pipeline(pipeline, params=case.params if bind else None)(case.mod)


@functools.cache
def kernels(size: str = "small") -> dict[str, PrimFunc]:
    """Every distinct kernel of :func:`cases` ``(size)``, by ``"<case>/<pipeline>/<kernel>"``.

    The kernels of each case's "zero" pipeline (weights as arguments: their transposes and the
    batch-norm folds are kernels too) and of its "default" pipeline with the weights bound
    (what ``tc.compile`` schedules), in that order; a kernel structurally equal to one seen
    before is left out.
    """
    out: dict[str, PrimFunc] = {}
    seen: set[str] = set()
    for case in cases(size):
        for pipeline in ("zero", "default"):
            for name, func in pipelined(case, pipeline, bind=pipeline == "default").prim_funcs():
                key = structural_hash(func)
                if key not in seen:
                    seen.add(key)
                    out[f"{case.name}/{pipeline}/{name}"] = func
    return out

"""Model fixtures shared by the tests, the benchmarks and the rule tests (not package code).

Every model of issue 12 is one import away, each as a :class:`ModelCase` (``mod, params,
inputs = case``) with its float64 numpy reference:

* ``llama``: a Llama-style decoder layer, TinyLlama-1.1B sizes (``llama.case(cfg, entry)``,
  entries ``decode`` and ``prefill``; ``llama.SMALL`` for quick tests);
* ``bert``: a BERT-base encoder layer; ``resnet``: ResNet-18 basic blocks (plain and
  downsampling); ``tutorial``: the two tutorial MLPs.

``cases(size)`` lists them all (``"small"`` for the default test run, ``"full"`` for the
sizes of the issue). Tests import this package as ``models`` (``tests/`` is on ``sys.path``
under pytest); benchmarks load it through ``benchmarks/_models.py``.
"""

from __future__ import annotations

from . import bert as bert
from . import llama as llama
from . import resnet as resnet
from . import tutorial as tutorial
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

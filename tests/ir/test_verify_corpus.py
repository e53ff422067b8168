"""``tc.ir.verify`` accepts every valid function the project produces (zero false positives).

The corpus (``verify_corpus.py``): every topi operator on static, odd and symbolic shapes, the
schedule tests' workloads, the script reference kernels and the GPU kernels; then their lowered
forms, verified after every lowering pass by the ``VerifyIR`` instrument (CPU pipeline, the CPU
pipeline emulating GPU kernels, and the GPU pipeline).
"""

from __future__ import annotations

from functools import cache

import pytest
from verify_corpus import topi_functions, workload_functions

import tilecraft as tc
from tilecraft.errors import IRError
from tilecraft.ir import PrimFunc
from tilecraft.ir.transform import PassContext, VerifyIR
from tilecraft.lower import lower, lower_gpu_function


@cache
def _corpus() -> tuple[tuple[str, PrimFunc], ...]:
    return (*topi_functions(), *workload_functions())


def _failures(check: object, select: str = "") -> list[str]:
    out = []
    for name, func in _corpus():
        if select not in name:
            continue
        try:
            check(name, func)  # type: ignore[operator]
        except IRError as e:
            out.append(f"{name}: {e}")
    return out


def test_corpus_covers_every_operator_kind() -> None:
    names = {n.split("/")[0] for n, _ in _corpus()}
    assert len(_corpus()) > 200
    assert {"softmax", "conv2d", "take", "pad", "attention", "workload", "gpu"} <= names


def test_verify_accepts_the_corpus() -> None:
    assert _failures(lambda name, f: tc.ir.verify(f)) == []


def _lower(name: str, func: PrimFunc) -> None:
    if name.startswith(("gpu/", "reference/gpu")):
        lower_gpu_function(func, tc.Target("cuda"))
        lower(func, "cpu", emulate_gpu=True)
    else:
        lower(func, "cpu")


@pytest.mark.parametrize("select", ["/symbolic", "workload/", "reference/", "gpu/"])
def test_every_lowering_pass_output_verifies(select: str) -> None:
    with PassContext(instruments=[VerifyIR()]):
        assert _failures(_lower, select) == []


@pytest.mark.slow
@pytest.mark.parametrize("select", ["/static", "/odd"])
def test_every_lowering_pass_output_verifies_on_static_shapes(select: str) -> None:
    with PassContext(instruments=[VerifyIR()]):
        assert _failures(_lower, select) == []


@pytest.mark.slow
def test_every_gpu_lowering_pass_output_verifies_on_cpu_kernels() -> None:
    def gpu(name: str, func: PrimFunc) -> None:
        lower_gpu_function(func, tc.Target("cuda"))

    with PassContext(instruments=[VerifyIR()]):
        assert _failures(gpu) == []

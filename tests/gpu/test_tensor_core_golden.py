"""Golden files pin the CUDA text of the 4096^3 tensor-core GEMMs (``--update-golden``
rewrites them): the ``mma.sync`` + ``ldmatrix`` + ``cp.async`` kernel for sm_80 and the WMMA
kernel for sm_75, both produced by the Schedule API (``tensor_core_kernels.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tensor_core_kernels import make_gemm, schedule_mma_gemm, schedule_wmma_gemm

import tilecraft as tc
from tilecraft.runtime import cuda_source

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "tensor_core_gemm_mma_sm80": (schedule_mma_gemm, "sm_80"),
    "tensor_core_gemm_wmma_sm75": (schedule_wmma_gemm, "sm_75"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tensor_core_gemm_matches_golden(name: str, update_golden: bool) -> None:
    schedule, arch = CASES[name]
    sch = schedule(make_gemm(4096, 4096, 4096))
    text = cuda_source(sch.mod, tc.Target(f"cuda -arch={arch}"))
    path = GOLDEN / f"{name}.cu"
    if update_golden:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing; run pytest tests/gpu --update-golden"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        old, new = expected.splitlines(), text.splitlines()
        pairs = enumerate(zip(old, new, strict=False))
        first = next((i for i, (a, b) in pairs if a != b), min(len(old), len(new)))
        pytest.fail(
            f"{name}.cu differs from the generated CUDA at line {first + 1}:\n"
            f"  golden:    {old[first] if first < len(old) else '<end>'}\n"
            f"  generated: {new[first] if first < len(new) else '<end>'}\n"
            "rerun with --update-golden if the change is intended"
        )

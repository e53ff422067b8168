"""Golden files pin the CUDA text of two kernels; ``--update-golden`` rewrites them."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernels import make_softmax, make_vector_add

import tilecraft as tc
from tilecraft.runtime import cuda_source

GOLDEN = Path(__file__).parent / "golden"
GPU = tc.Target("cuda -arch=sm_90")
CASES = {
    "vector_add": lambda: make_vector_add(4096, 128),
    "softmax": lambda: make_softmax(16, 256, 128),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_source_matches_golden(name, update_golden):
    func, _ = CASES[name]()
    text = cuda_source(func, GPU)
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

"""WMMA (sm_70/75) with B stored ``(n, k)`` (an ``(out, in)`` weight, K in QK^T): B stays
``(n, k)`` in shared memory, fetched in 16-byte vectors, and loads into a ``col_major``
``matrix_b`` fragment (scope ``wmma.matrix_b_col``), no transpose through shared memory;
equal under the race-checking emulator; ptxas without spills."""

from __future__ import annotations

import re
import shutil

import pytest
from test_gpu_matmul import linear

import tilecraft as tc
from tilecraft.ir import PrimFunc
from tilecraft.rules.gpu import Matmul
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info

SM75, SM70 = tc.Target("cuda -arch=sm_75"), tc.Target("cuda -arch=sm_70")


def cuda_text(func: PrimFunc, target: tc.Target) -> tuple[tc.Schedule, str]:
    sch = Matmul().apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch, build_cuda_source(sch.mod, target).text


def b_fragment_decls(text: str) -> list[str]:
    return re.findall(r"fragment<nvcuda::wmma::matrix_b, [^>]*>", text)


@pytest.mark.parametrize(
    ("shape", "batch", "target"),
    [((64, 64, 64), None, SM75), ((50, 70, 40), None, SM75), ((32, 64, 48), 2, SM70)],
    ids=["64", "ragged", "batched_sm70"],
)
def test_nk_weight_loads_col_major_without_a_transpose_equal(
    shape: tuple[int, int, int], batch: int | None, target: tc.Target
) -> None:
    func = linear(*shape, dtype="float16", weight_nk=True, batch=batch, out_dtype="float32")
    sch, text = cuda_text(func, target)
    decls = b_fragment_decls(text)
    assert decls
    assert all(d.endswith("nvcuda::wmma::col_major>") for d in decls)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target)


def test_kn_weight_stays_row_major() -> None:
    func = linear(64, 64, 64, dtype="float16", weight_nk=False, out_dtype="float32")
    _, text = cuda_text(func, SM75)
    decls = b_fragment_decls(text)
    assert decls
    assert all(d.endswith("nvcuda::wmma::row_major>") for d in decls)


def test_nk_weight_fetch_is_vectorized() -> None:
    """The (n, k) B tile is stored to shared memory like A, in 16-byte vectors, not element
    by element as a transposing copy into shared memory would be."""
    func = linear(64, 64, 64, dtype="float16", weight_nk=True, out_dtype="float32")
    _, text = cuda_text(func, SM75)
    stores = [line.strip() for line in text.splitlines() if "B_shared" in line and "= " in line]
    stores = [line for line in stores if "wmma" not in line]
    assert stores
    assert all(line.startswith("*(uint4*)(B_shared + ") for line in stores), stores


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="nvcc/ptxas not on PATH")
def test_nk_weight_on_wmma_compiles_without_spills() -> None:
    func = linear(4096, 4096, 4096, dtype="float16", weight_nk=True, out_dtype="float32")
    _, text = cuda_text(func, SM75)
    (stats,) = ptxas_info(text, "sm_75").values()
    assert not stats.spills, stats
    assert stats.stack_bytes == 0, stats
    # two stages of a 128 x 32 A and a 128 x 32 (n, k) B, rows padded by 8; the staging
    assert stats.shared_bytes == 2 * 2 * (128 * 40 + 128 * 40) + 4 * 16 * 16 * 4

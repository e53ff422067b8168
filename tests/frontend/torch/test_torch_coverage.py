"""The importer's coverage of torch's own Core ATen operator list."""

import pytest

pytest.importorskip("torch")

from tilecraft.frontend.torch import coverage

# Core ATen operators that have a meaning at inference but no converter yet. A new torch that
# adds a Core ATen operator fails the test below until it is supported or listed here.
NOT_YET = {
    "aten::_adaptive_avg_pool3d", "aten::_embedding_bag", "aten::_fft_c2r", "aten::_fft_r2c",
    "aten::_local_scalar_dense", "aten::avg_pool3d", "aten::col2im", "aten::grid_sampler_2d",
    "aten::index_put", "aten::masked_scatter", "aten::max_pool3d_with_indices",
    "aten::nonzero",
}  # fmt: skip


def test_core_aten_coverage():
    rows = coverage()
    meaningful = [r for r in rows if not r.status.startswith("excluded")]
    supported = [r for r in meaningful if r.status == "supported"]
    missing = {r.name for r in rows if r.status == "missing"}
    assert missing - NOT_YET == set(), "Core ATen operators neither supported nor listed"
    assert NOT_YET - missing == set(), "listed as missing but supported now (or gone)"
    print(f"supported Core ATen operators: {len(supported)} of {len(meaningful)}")  # noqa: T201
    assert len(supported) >= 167

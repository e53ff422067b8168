"""The less common Core ATen operators, each against torch on random inputs.

All of them sit in one exported program (one output each), compiled once; each test checks
one output. torch's default decompositions turn some of them into others (edge padding into
index arithmetic, 1-d pools into 2-d ones), so those are also called as Core ATen operators
directly and imported without decomposing.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
# one worker runs the module (--dist loadgroup), so each program is compiled once per run
pytestmark = pytest.mark.xdist_group("torch_ops_more")
F = torch.nn.functional

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import from_exported_program  # noqa: E402

OPS = {
    "cumsum": lambda x, img, idx: torch.cumsum(x, dim=1),
    "cumsum_int": lambda x, img, idx: torch.cumsum(idx, dim=0),
    "reflection_pad1d": lambda x, img, idx: F.pad(x.unsqueeze(0), (2, 3), mode="reflect"),
    "reflection_pad2d": lambda x, img, idx: F.pad(img, (1, 2, 2, 1), mode="reflect"),
    "replication_pad2d": lambda x, img, idx: F.pad(img, (3, 0, 1, 2), mode="replicate"),
    "replication_pad3d": lambda x, img, idx: F.pad(
        img.unsqueeze(0), (1, 1, 0, 2, 1, 0), mode="replicate"
    ),
    "avg_pool1d": lambda x, img, idx: F.avg_pool1d(x.unsqueeze(0), 3, 2, 1),
    "adaptive_avg_pool1d": lambda x, img, idx: F.adaptive_avg_pool1d(x.unsqueeze(0), 4),
    "upsample_nearest2d": lambda x, img, idx: F.interpolate(img, scale_factor=2, mode="nearest"),
    "upsample_nearest2d_size": lambda x, img, idx: F.interpolate(img, size=(5, 9)),
    "upsample_bilinear2d": lambda x, img, idx: F.interpolate(img, size=(7, 13), mode="bilinear"),
    "upsample_bilinear2d_aligned": lambda x, img, idx: F.interpolate(
        img, scale_factor=2, mode="bilinear", align_corners=True
    ),
    "diagonal": lambda x, img, idx: torch.diagonal(x, 1) + torch.diagonal(x, -2).sum(),
    "diagonal_3d": lambda x, img, idx: torch.diagonal(img[0], 0, 1, 2),
    "slice_scatter": lambda x, img, idx: torch.slice_scatter(x, x[:, :3] * 2, 1, 1, 7, 2),
    "select_scatter": lambda x, img, idx: torch.select_scatter(x, x[1] + 5, 0, 2),
    "scatter_src": lambda x, img, idx: torch.zeros(6, 8).scatter(0, idx[:, :8] % 6, x[:4]),
    "scatter_value": lambda x, img, idx: x.scatter(1, idx[:3, :2] % 8, 1.5),
    "scatter_add": lambda x, img, idx: x.scatter_add(0, idx[:, :8] % 6, x[2:]),
    "scatter_amax": lambda x, img, idx: x.scatter_reduce(0, idx[:, :8] % 6, x[2:], "amax"),
    "batch_norm_batch_stats": lambda x, img, idx: F.batch_norm(img, None, None, training=True),
    "cdist": lambda x, img, idx: torch.cdist(x[:3], x[3:]),
    "pdist": lambda x, img, idx: F.pdist(x, p=1.5),
    "sort": lambda x, img, idx: torch.sort(x, dim=1).values,
    "sort_indices_descending": lambda x, img, idx: torch.sort(x, 0, descending=True).indices,
    "sort_stable_ties": lambda x, img, idx: torch.sort(idx, stable=True).indices,
    "topk": lambda x, img, idx: torch.topk(x, 3).values,
    "topk_smallest_indices": lambda x, img, idx: torch.topk(img, 2, dim=2, largest=False)[1],
}


class AllOps(torch.nn.Module):
    def forward(self, x, img, idx):
        return tuple(fn(x, img, idx) for fn in OPS.values())


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 8, generator=g)
    img = torch.randn(2, 3, 4, 6, generator=g)
    # scatter positions: a permutation per column, so "last writer" is defined
    idx = torch.stack([torch.randperm(6, generator=g) for _ in range(10)], dim=1)[:4]
    return x, img, idx


@pytest.fixture(scope="module")
def compiled():
    ep = torch.export.export(AllOps(), _inputs(0))
    mod, params = from_exported_program(ep)
    return tc.compile(mod, params=params)


@pytest.mark.parametrize(("i", "name"), list(enumerate(OPS)))
def test_op_matches_torch(compiled, i, name):
    args = _inputs(1)
    ref = OPS[name](*args)
    out = compiled["main"](*(a.numpy() for a in args))[i]  # one function, a tuple of outputs
    out = np.asarray(out)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-5)


aten = torch.ops.aten
DIRECT = {
    "reflection_pad1d": lambda x, img: aten.reflection_pad1d(x, [2, 3]),
    "reflection_pad2d": lambda x, img: aten.reflection_pad2d(img, [1, 2, 2, 1]),
    "reflection_pad3d": lambda x, img: aten.reflection_pad3d(img, [1, 2, 0, 1, 1, 0]),
    "replication_pad1d": lambda x, img: aten.replication_pad1d(x, [0, 4]),
    "replication_pad2d": lambda x, img: aten.replication_pad2d(img, [3, 0, 1, 2]),
    "replication_pad3d": lambda x, img: aten.replication_pad3d(img, [1, 1, 0, 2, 1, 0]),
    "avg_pool1d": lambda x, img: aten.avg_pool1d(x.unsqueeze(0), [3], [2], [1]),
    "avg_pool1d_no_pad_count": lambda x, img: aten.avg_pool1d(
        x.unsqueeze(0), [3], [2], [1], False, False
    ),
    "adaptive_avg_pool1d": lambda x, img: aten.adaptive_avg_pool1d(x.unsqueeze(0), [4]),
}


class Direct(torch.nn.Module):
    def forward(self, x, img):
        return tuple(fn(x, img) for fn in DIRECT.values())


@pytest.fixture(scope="module")
def direct():
    x, img, _ = _inputs(0)
    ep = torch.export.export(Direct(), (x, img))
    mod, params = from_exported_program(ep, decompose=False)
    return tc.compile(mod, params=params)


@pytest.mark.parametrize(("i", "name"), list(enumerate(DIRECT)))
def test_core_aten_op_called_directly_matches_torch(direct, i, name):
    x, img, _ = _inputs(1)
    ref = DIRECT[name](x, img)
    out = np.asarray(direct["main"](x.numpy(), img.numpy())[i])
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-5)

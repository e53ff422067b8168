"""3-d pools, bagged lookups, col2im, grid sampling and indexed writes, each against torch.

Each case is its own exported program (about two seconds to export and compile), checked on
fresh random inputs: index-valued outputs (max-pool indices) exactly, values within 1e-5
relative. The default run keeps one or two cases per converter with their awkward options;
the other cases and the full sweep of grid sampling (with bicubic, whose kernels take long
to compile) are marked ``slow``.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
aten = torch.ops.aten

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import from_exported_program  # noqa: E402


def _inputs(seed):
    """vol (N, C, D, H, W), img (N, C, H, W), grid, table, ids, offsets, per-sample weights,
    blocks for col2im, index vectors a (3,), b (2, 1), c (3,)."""
    g = torch.Generator().manual_seed(seed)
    return {
        "vol": torch.randn(2, 3, 7, 6, 5, generator=g),
        "img": torch.randn(2, 3, 5, 6, generator=g),
        "grid": torch.rand(2, 4, 7, 2, generator=g) * 2.4 - 1.2,
        "table": torch.randn(10, 4, generator=g),
        "ids": torch.randint(0, 10, (8,), generator=g),
        "offsets": torch.tensor([0, 2, 2, 5]),  # bag 1 is empty
        "psw": torch.rand(8, generator=g),
        "cols": torch.randn(2, 3 * 2 * 3, 12, generator=g),
        "a": torch.randperm(4, generator=g)[:3],
        "b": torch.randperm(5, generator=g)[:2].reshape(2, 1),
        "c": torch.randperm(6, generator=g)[:3] - 3,  # negative indices count from the end
    }


NAMES = list(_inputs(0))


def _bags(v, mode, **kw):
    return F.embedding_bag(v["ids"], v["table"], v["offsets"], mode=mode, **kw)


def _bags_last(v, mode):
    offsets = torch.cat([v["offsets"], torch.tensor([8])])
    return F.embedding_bag(
        v["ids"], v["table"], offsets, mode=mode, include_last_offset=True, padding_idx=3
    )


OPS = {
    "avg_pool3d_ceil_exclude_pad": lambda v: F.avg_pool3d(
        v["vol"], 3, 2, 1, ceil_mode=True, count_include_pad=False
    ),
    "avg_pool3d_divisor_override": lambda v: F.avg_pool3d(
        v["vol"], (2, 3, 2), (2, 1, 2), (1, 1, 0), ceil_mode=True, divisor_override=5
    ),
    "avg_pool3d_include_pad": lambda v: F.avg_pool3d(v["vol"], 2, 1, 1),
    "adaptive_avg_pool3d": lambda v: F.adaptive_avg_pool3d(v["vol"], (3, 4, 2)),
    "adaptive_avg_pool3d_one": lambda v: F.adaptive_avg_pool3d(v["vol"], 1),
    "max_pool3d_dilated_ceil": lambda v: F.max_pool3d(
        v["vol"], 2, 2, 1, dilation=(1, 2, 1), ceil_mode=True
    ),
    "max_pool3d_indices": lambda v: F.max_pool3d(
        v["vol"], 2, 2, 1, dilation=(1, 2, 1), ceil_mode=True, return_indices=True
    )[1],
    "max_pool2d_indices_ceil": lambda v: F.max_pool2d(
        v["img"], 2, 2, 1, ceil_mode=True, return_indices=True
    )[1],
    "avg_pool2d_ceil_divisor": lambda v: F.avg_pool2d(v["img"], 3, 2, 1, True, True, 4),
    "adaptive_avg_pool2d_unequal": lambda v: F.adaptive_avg_pool2d(v["img"], (3, 4)),
    "embedding_bag_sum": lambda v: _bags(v, "sum"),
    "embedding_bag_sum_weighted": lambda v: _bags(v, "sum", per_sample_weights=v["psw"]),
    "embedding_bag_mean": lambda v: _bags(v, "mean"),
    "embedding_bag_max": lambda v: _bags(v, "max"),
    "embedding_bag_mean_last_offset_padding": lambda v: _bags_last(v, "mean"),
    "embedding_bag_max_last_offset_padding": lambda v: _bags_last(v, "max"),
    "embedding_bag_2d_input": lambda v: F.embedding_bag(v["ids"].reshape(2, 4), v["table"]),
    "fold_padded": lambda v: F.fold(v["cols"], (5, 6), (2, 3), (1, 2), (1, 1), (2, 1)),
    "grid_bilinear_zeros": lambda v: F.grid_sample(v["img"], v["grid"], align_corners=False),
    "grid_nearest_border_aligned": lambda v: F.grid_sample(
        v["img"], v["grid"], "nearest", "border", align_corners=True
    ),
    "grid_bilinear_reflection_aligned": lambda v: F.grid_sample(
        v["img"], v["grid"], "bilinear", "reflection", align_corners=True
    ),
    "grid_nearest_reflection": lambda v: F.grid_sample(
        v["img"], v["grid"], "nearest", "reflection", align_corners=False
    ),
    "index_put_three_broadcast": lambda v: aten.index_put(
        v["vol"][0, 0, :4, :5, 0], [v["a"], v["b"]], v["img"][0, 0, :2, :1]
    ),
    "index_put_accumulate_three": lambda v: aten.index_put(
        v["vol"][0, 0, :4, :5], [v["a"], v["b"], v["c"]], v["psw"][:3], True
    ),
    "index_put_slice_then_index": lambda v: aten.index_put(
        v["img"], [None, None, v["b"]], v["img"][:, :, :2].unsqueeze(3), False
    ),
    "index_put_split_axes": lambda v: aten.index_put(
        v["img"][:, :, :4], [v["a"][:2] % 2, None, v["a"][1:]], torch.tensor(2.5)
    ),
    "index_put_split_axes_accumulate": lambda v: aten.index_put(
        v["img"], [v["a"][:2] % 2, None, None, v["c"][:2]], v["vol"][0, :2, :3, :5, 0], True
    ),
    "index_put_bool_mask": lambda v: aten.index_put(
        v["img"], [v["img"][:, :, :, 0] > 0], torch.tensor(1.5)
    ),
    "masked_scatter_broadcast_mask": lambda v: v["img"].masked_scatter(
        v["img"][0, 0, :, :1] > 0, v["vol"].flatten()[:200]
    ),
    "masked_scatter": lambda v: v["img"].masked_scatter(v["img"] > 0.3, v["vol"][0, 0]),
}


# the seeded few of the default run: each converter with its awkward options; the rest slow
SLOW = {
    "avg_pool3d_include_pad", "adaptive_avg_pool3d_one", "max_pool3d_dilated_ceil",
    "avg_pool2d_ceil_divisor", "embedding_bag_sum", "embedding_bag_mean",
    "embedding_bag_max_last_offset_padding", "embedding_bag_2d_input",
    "grid_nearest_border_aligned", "grid_bilinear_reflection_aligned",
    "index_put_slice_then_index", "index_put_split_axes_accumulate", "masked_scatter",
}  # fmt: skip


class Program(torch.nn.Module):
    def __init__(self, fns):
        super().__init__()
        self.fns = fns

    def forward(self, *args):
        v = dict(zip(NAMES, args, strict=True))
        return tuple(fn(v) for fn in self.fns)


def _compile(fns, decompose=True):
    """One program per case: a program with several outputs converts it once per output."""
    args = tuple(_inputs(0).values())
    ep = torch.export.export(Program(list(fns)), args)
    mod, params = from_exported_program(ep, decompose=decompose)
    return tc.compile(mod, params=params)


def _check(fns, name, decompose=True):
    exe = _compile([fns[name]], decompose)
    args = tuple(_inputs(1).values())
    ref = fns[name](dict(zip(NAMES, args, strict=True)))
    out = np.asarray(exe["main"](*(a.numpy() for a in args)))
    assert out.shape == tuple(ref.shape)
    if ref.dtype.is_floating_point:
        np.testing.assert_allclose(out, ref.numpy(), rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(out, ref.numpy())


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in OPS]
)
def test_op_matches_torch(name):
    _check(OPS, name)


# torch decomposes these when exporting; called directly they stay Core ATen operators
DIRECT = {
    "col2im": lambda v: aten.col2im(v["cols"], [5, 6], [2, 3], [1, 2], [1, 1], [2, 1]),
    "col2im_unbatched": lambda v: aten.col2im(
        v["cols"][0, :, :6], [4, 4], [3, 2], [1, 1], [1, 1], [2, 2]
    ),
    "col2im_plain": lambda v: aten.col2im(
        v["cols"][:, :, :8], [3, 6], [2, 3], [1, 1], [0, 0], [1, 1]
    ),
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.slow] if i else []) for i, n in enumerate(DIRECT)]
)
def test_core_aten_op_called_directly_matches_torch(name):
    _check(DIRECT, name, decompose=False)


def test_index_put_duplicates_last_wins_and_accumulate_adds():
    """Duplicate positions: without accumulate our rule is the last index position wins
    (torch leaves it unspecified); with accumulate every value adds, as in torch."""

    class Dup(torch.nn.Module):
        def forward(self, x, i, j, v):
            return aten.index_put(x, [i, j], v), aten.index_put(x, [i, j], v, True)

    x, v = torch.randn(3, 4), torch.randn(5)
    i, j = torch.tensor([0, 2, 0, 1, 0]), torch.tensor([1, 3, 1, 1, -3])
    ep = torch.export.export(Dup(), (x, i, j, v))
    mod, params = from_exported_program(ep)
    exe = tc.compile(mod, params=params)
    args = (x.numpy(), i.numpy(), j.numpy(), v.numpy())
    want = x.numpy().copy()
    for k in range(5):  # positions 0, 2 and 4 all name x[0, 1]: the last, 4, wins
        want[i[k], j[k]] = v[k]
    last_wins, accumulated = exe["main"](*args)  # one function returning both outputs
    np.testing.assert_array_equal(np.asarray(last_wins), want)
    ref = aten.index_put(x, [i, j], v, True)
    np.testing.assert_allclose(np.asarray(accumulated), ref.numpy(), rtol=1e-5)


GRID = [
    (mode, pad, align)
    for mode in ("bilinear", "nearest", "bicubic")
    for pad in ("zeros", "border", "reflection")
    for align in (False, True)
]


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "pad", "align"), GRID)
def test_grid_sample_every_mode_padding_and_alignment(mode, pad, align):
    class Grid(torch.nn.Module):
        def forward(self, img, grid):
            return F.grid_sample(img, grid, mode, pad, align_corners=align)

    g = torch.Generator().manual_seed(3)
    img, grid = torch.randn(2, 3, 5, 6, generator=g), torch.rand(2, 4, 7, 2, generator=g) * 3 - 1.5
    mod, params = from_exported_program(torch.export.export(Grid(), (img, grid)))
    out = tc.compile(mod, params=params)["main"](img.numpy(), grid.numpy())
    ref = F.grid_sample(img, grid, mode, pad, align_corners=align)
    np.testing.assert_allclose(np.asarray(out), ref.numpy(), rtol=1e-5, atol=1e-5)

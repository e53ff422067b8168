"""Non-Core ATen operators left by torch's default decompositions (sorted search, order
statistics, histograms), each against torch eager on random inputs.

All of them sit in one exported program (one output each), compiled once; each test checks
one output: indices and counts exactly, values to 1e-5 relative.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
# one worker runs the module (--dist loadgroup), so each program is compiled once per run
pytestmark = pytest.mark.xdist_group("torch_ops_noncore2")

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import from_exported_program  # noqa: E402

EDGES = torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5])

OPS = {
    "searchsorted": lambda x, s: torch.searchsorted(EDGES, x),
    "searchsorted_right_int32": lambda x, s: torch.searchsorted(
        EDGES, x.round(), right=True, out_int32=True
    ),
    "searchsorted_side_ties": lambda x, s: torch.searchsorted(EDGES, x.round(), side="left"),
    "searchsorted_batched": lambda x, s: torch.searchsorted(s, x[:, :3]),
    "searchsorted_sorter": lambda x, s: torch.searchsorted(
        s[0].flip(0), x, sorter=torch.arange(7).flip(0)
    ),
    "searchsorted_scalar": lambda x, s: torch.searchsorted(EDGES, 0.3),
    "bucketize": lambda x, s: torch.bucketize(x, EDGES),
    "bucketize_right_ties": lambda x, s: torch.bucketize(x.round(), EDGES, right=True),
    "bucketize_int_values": lambda x, s: torch.bucketize((x * 3).long(), EDGES),
    "median": lambda x, s: x.median(),
    "median_even_count": lambda x, s: x[:, :6].median(),
    "median_dim": lambda x, s: x.median(1).values,
    "median_dim_indices": lambda x, s: x.median(0, keepdim=True).indices,
    "median_nan": lambda x, s: torch.where(x > 1.5, float("nan"), x).median(1).values,
    "kthvalue": lambda x, s: x.kthvalue(3, 1).values,
    "kthvalue_indices": lambda x, s: x.kthvalue(2, 0, keepdim=True).indices,
    "mode": lambda x, s: (x * 1.5).round().mode(1).values,
    "mode_indices": lambda x, s: (x * 1.5).round().mode(0, keepdim=True).indices,
    "mode_int_ties": lambda x, s: (x * 2).long().mode().indices,
    "mode_int_values": lambda x, s: (x * 2).long().mode().values,
    "histc": lambda x, s: torch.histc(x, 5),
    "histc_range_edges": lambda x, s: torch.histc(x.round(), 4, min=-1.0, max=1.0),
    "histc_nan_ignored": lambda x, s: torch.histc(torch.where(x > 1, float("nan"), x), 3, -2, 2),
    "histc_one_value": lambda x, s: torch.histc(x * 0 + 0.5, 4),
}


class AllOps(torch.nn.Module):
    def forward(self, x, s):
        return tuple(fn(x, s) for fn in OPS.values())


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 7, generator=g)
    s = torch.randn(4, 7, generator=g).sort(1).values
    return x, s


@pytest.fixture(scope="module")
def compiled():
    ep = torch.export.export(AllOps(), _inputs(0))
    mod, params = from_exported_program(ep)
    return tc.compile(mod, params=params)


def _compare(out, ref):
    out = np.asarray(out)
    assert out.shape == tuple(ref.shape)
    assert out.dtype == np.dtype(str(ref.dtype).removeprefix("torch."))
    if ref.dtype.is_floating_point:
        np.testing.assert_allclose(out, ref.numpy(), rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(out, ref.numpy())


@pytest.mark.parametrize(("i", "name"), list(enumerate(OPS)))
def test_op_matches_torch(compiled, i, name):
    args = _inputs(1)
    _compare(compiled["main"](*(a.numpy() for a in args))[i], OPS[name](*args))


class Dynamic(torch.nn.Module):
    def forward(self, x):
        s = torch.searchsorted(EDGES, x)
        return s, torch.bucketize(x, EDGES, right=True), x.median(1), torch.histc(x, 6)


def test_dynamic_rows():
    rows = torch.export.Dim("rows", max=64)
    ep = torch.export.export(Dynamic(), (torch.randn(3, 5),), dynamic_shapes=({0: rows},))
    mod, params = from_exported_program(ep)
    f = tc.compile(mod, params=params)["main"]
    for n in (2, 9):
        x = torch.randn(n, 5)
        out = f(x.numpy())
        ref = Dynamic()(x)
        _compare(out[0], ref[0])
        _compare(out[1], ref[1])
        _compare(out[2], ref[2].values)
        _compare(out[3], ref[2].indices)
        _compare(out[4], ref[3])


class Counts(torch.nn.Module):
    def forward(self, x, w):
        return torch.bincount(x), torch.bincount(x, w, minlength=12), torch.bincount(x * 0)


def test_bincount_length_from_the_values():
    n = torch.export.Dim("n", max=64)
    x, w = torch.tensor([0, 2, 2, 5, 1, 2]), torch.rand(6)
    ep = torch.export.export(Counts(), (x, w), dynamic_shapes=({0: n}, {0: n}))
    mod, params = from_exported_program(ep)
    f = tc.compile(mod, params=params)["main"]
    g = torch.Generator().manual_seed(2)
    for size, top in ((6, 4), (9, 20), (3, 1)):
        x, w = torch.randint(0, top, (size,), generator=g), torch.rand(size, generator=g)
        out, ref = f(x.numpy(), w.numpy()), Counts()(x, w)
        for o, r in zip(out, ref, strict=True):
            _compare(o, r)


class Unique(torch.nn.Module):
    def forward(self, x):
        values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
        return values, inverse, counts, torch.unique(x[0].long(), sorted=False)


def test_unique_length_from_the_values():
    rows = torch.export.Dim("rows", max=64)
    ep = torch.export.export(Unique(), (torch.randn(4, 3).round(),), dynamic_shapes=({0: rows},))
    mod, params = from_exported_program(ep)
    f = tc.compile(mod, params=params)["main"]
    g = torch.Generator().manual_seed(3)
    for n in (2, 4, 11):
        x = (torch.randn(n, 3, generator=g) * 2).round()
        out, ref = f(x.numpy()), Unique()(x)
        for o, r in zip(out, ref, strict=True):
            _compare(o, r)

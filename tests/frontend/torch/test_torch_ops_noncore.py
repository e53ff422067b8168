"""ATen operators outside Core ATen that survive torch.export's default decompositions.

Each is checked against torch eager on random inputs (all in one exported program, compiled
once), and NONCORE_COMMON lists the operators that must import, one test line each.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.xdist_group("torch_ops_noncore")
F = torch.nn.functional

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import from_exported_program  # noqa: E402

ERFINV_EDGES = torch.tensor([-1.0, 1.0, 0.0, 0.999999, -0.99, 1.5])
SPECIAL = torch.tensor([0.0, -1.0, -2.5, 1.0, 2.0, 1e-6, 0.5, 100.0, float("inf")])
OPS = {
    "max": lambda x, y: x.max(),
    "min": lambda x, y: y.min(),
    "norm": lambda x, y: x.norm(),
    "norm_dim_keep": lambda x, y: torch.linalg.vector_norm(y, dim=(0, 2), keepdim=True),
    "norm_inf": lambda x, y: torch.linalg.vector_norm(x, float("inf"), dim=1),
    "norm_ninf": lambda x, y: torch.linalg.vector_norm(x, float("-inf"), dim=0),
    "norm_0": lambda x, y: torch.linalg.vector_norm(x.round(), 0, dim=1),
    "norm_1": lambda x, y: torch.linalg.vector_norm(y, 1, dim=-1),
    "norm_frac": lambda x, y: torch.linalg.vector_norm(x, 1.5),
    "norm_3_f64": lambda x, y: torch.linalg.vector_norm(x, 3, dim=1, dtype=torch.float64),
    "normalize": lambda x, y: F.normalize(x, dim=1),
    "cosine_similarity": lambda x, y: F.cosine_similarity(x, x.flip(0)),
    "var_mean_var": lambda x, y: torch.var_mean(x, 1)[0],
    "var_mean_mean": lambda x, y: torch.var_mean(x, 1)[1],
    "var_mean_keep": lambda x, y: sum(torch.var_mean(y, (0, 2), correction=0, keepdim=True)),
    "std_mean": lambda x, y: torch.std_mean(x)[0],
    "round_decimals": lambda x, y: torch.round(x * 10, decimals=2),
    "round_negative_decimals": lambda x, y: torch.round(x * 1000, decimals=-2),
    "hypot": lambda x, y: torch.hypot(x, x.flip(1)),
    "copysign": lambda x, y: torch.copysign(x, x.flip(0)),
    "copysign_scalar": lambda x, y: torch.copysign(x, -1.0),
    "cumprod": lambda x, y: torch.cumprod(x, 1),
    "cumprod_dim0": lambda x, y: torch.cumprod(y, 0),
    "logcumsumexp": lambda x, y: torch.logcumsumexp(x * 5, 1),
    "cummax_values": lambda x, y: torch.cummax(x, 1)[0],
    "cummax_indices": lambda x, y: torch.cummax(x.round(), 1)[1],
    "cummin_values": lambda x, y: torch.cummin(y, 1)[0],
    "cummin_indices": lambda x, y: torch.cummin(y.round(), 0)[1],
    "erfinv": lambda x, y: torch.erfinv(torch.cat([x.flatten().tanh(), ERFINV_EDGES])),
    "lgamma": lambda x, y: torch.lgamma(torch.cat([x.flatten() * 4, y.flatten() * 40, SPECIAL])),
    "digamma": lambda x, y: torch.digamma(torch.cat([x.flatten() * 4, y.flatten() * 40, SPECIAL])),
    "i0": lambda x, y: torch.special.i0(torch.cat([x.flatten() * 4, y.flatten() * 25])),
}


class AllOps(torch.nn.Module):
    def forward(self, x, y):
        return tuple(fn(x, y) for fn in OPS.values())


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(6, 8, generator=g), torch.randn(3, 4, 5, generator=g)


@pytest.fixture(scope="module")
def compiled():
    ep = torch.export.export(AllOps(), _inputs(0))
    mod, params = from_exported_program(ep)
    return tc.compile(mod, params=params)


@pytest.mark.parametrize(("i", "name"), list(enumerate(OPS)))
def test_op_matches_torch(compiled, i, name):
    args = _inputs(1)
    ref = OPS[name](*args)
    out = np.asarray(compiled["main"](*(a.numpy() for a in args))[i])
    assert out.shape == tuple(ref.shape)
    assert out.dtype == ref.numpy().dtype
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-5, atol=1e-6)


class Reductions(torch.nn.Module):
    def forward(self, x):
        var, mean = torch.var_mean(x, 0, keepdim=True)
        ninf = torch.linalg.vector_norm(x, float("-inf"), dim=0)
        return x.max(), x.min(), x.norm(dim=0), ninf, var, mean, torch.std_mean(x)[0]


def test_reductions_over_a_dynamic_dim():
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(Reductions(), (torch.randn(5, 3),), dynamic_shapes=({0: batch},))
    mod, params = from_exported_program(ep)
    fn = tc.compile(mod, params=params)["main"]
    for n in (3, 9):
        x = torch.randn(n, 3, generator=torch.Generator().manual_seed(n))
        for out, ref in zip(fn(x.numpy()), Reductions()(x), strict=True):
            np.testing.assert_allclose(np.asarray(out), ref.numpy(), rtol=1e-5, atol=1e-6)


# each operator with a program in which it survives the default decompositions
NONCORE_COMMON = {
    "aten::max": lambda x: x.max(),
    "aten::min": lambda x: x.min(),
    "aten::linalg_vector_norm": lambda x: F.normalize(x),
    "aten::var_mean.correction": lambda x: torch.std_mean(x, 1)[0],
    "aten::round.decimals": lambda x: x.round(decimals=2),
    "aten::hypot": lambda x: torch.hypot(x, x),
    "aten::copysign.Tensor": lambda x: torch.copysign(x, -x),
    "aten::cumprod": lambda x: x.cumprod(1),
    "aten::logcumsumexp": lambda x: torch.logcumsumexp(x, 1),
    "aten::cummax": lambda x: torch.cummax(x, 1)[0],
    "aten::cummin": lambda x: torch.cummin(x, 1)[1],
    "aten::erfinv": lambda x: torch.erfinv(x.tanh()),
    "aten::lgamma": lambda x: torch.lgamma(x),
    "aten::digamma": lambda x: torch.special.digamma(x),
    "aten::i0": lambda x: torch.special.i0(x),
    "aten::nextafter": lambda x: torch.nextafter(x, x + 1),
}


class One(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("name", list(NONCORE_COMMON))
def test_common_noncore_op_imports(name):
    ep = torch.export.export(One(NONCORE_COMMON[name]), (torch.randn(4, 6),))
    ep = ep.run_decompositions()
    assert name in {n.target.name() for n in ep.graph.nodes if hasattr(n.target, "name")}
    from_exported_program(ep)


class CopySign(torch.nn.Module):
    def forward(self, x, y):
        return torch.copysign(x, y)


def test_copysign_takes_the_sign_of_negative_zero():
    x, y = torch.randn(4), torch.tensor([-0.0, 0.0, -2.0, 3.0])
    mod, params = from_exported_program(torch.export.export(CopySign(), (x, y)))
    out = tc.compile(mod, params=params)["main"](x.numpy(), y.numpy())
    np.testing.assert_array_equal(np.asarray(out), torch.copysign(x, y).numpy())


class NextAfter(torch.nn.Module):
    def forward(self, x, y):
        return torch.nextafter(x, y), torch.nextafter(x.half(), y.half())


def test_nextafter_steps_one_float_toward_other():
    tiny, big = torch.finfo(torch.float32).tiny, torch.finfo(torch.float32).max
    x = torch.cat([torch.randn(16) * 100, torch.tensor([0.0, 0.0, 1.0, 1.0, -2.0, -2.0, 0.5])])
    x = torch.cat([x, torch.tensor([tiny, tiny, 1e-44, big, float("inf"), 3.0, 1e-3])])
    y = torch.cat([torch.randn(16) * 100, torch.tensor([1.0, -1.0, 2.0, 0.0, -3.0, 0.0, 0.5])])
    y = torch.cat([y, torch.tensor([0.0, 1.0, -1.0, float("inf"), 0.0, 3.0, -1.0])])
    mod, params = from_exported_program(torch.export.export(NextAfter(), (x, y)))
    outs = tc.compile(mod, params=params)["main"](x.numpy(), y.numpy())
    for out, ref in zip(outs, NextAfter()(x, y), strict=True):
        np.testing.assert_array_equal(np.asarray(out), ref.numpy())

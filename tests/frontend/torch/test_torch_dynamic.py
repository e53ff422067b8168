"""Data-dependent shapes from torch.export: nonzero, boolean masks, masked_select, .item()."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilecraft as tc  # noqa: E402
from tilecraft.errors import GraphError  # noqa: E402
from tilecraft.frontend.torch import from_exported_program  # noqa: E402
from tilecraft.graph.ir_bind import BindSymbol  # noqa: E402

Dim = torch.export.Dim


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


def _compile(model, args, dynamic=None):
    ep = torch.export.export(model, args, dynamic_shapes=dynamic)
    mod, params = from_exported_program(ep)
    return mod, tc.compile(mod, target="cpu", params=params)


def _same(exe, model, *args):
    """The compiled program gives torch eager's result: shape, dtype and values (indices
    exactly; floats within 1e-5, sums being added in another order)."""
    out, ref = exe(*args), model(*args)
    assert isinstance(out, torch.Tensor)
    assert out.dtype == ref.dtype
    assert out.shape == ref.shape
    tol = 1e-5 if ref.dtype.is_floating_point else 0
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


def _sparse(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    return torch.where(torch.rand(*shape, generator=g) < 0.5, torch.zeros(()), x)


class Nonzero(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x)


class MaskIndex(torch.nn.Module):
    def forward(self, x, m):
        return x[m] * 2 + 1


class MaskColumns(torch.nn.Module):
    def forward(self, x, m):
        return x[:, m].sum(0)


class MaskedSelect(torch.nn.Module):
    def forward(self, x, m):
        return torch.masked_select(x, m)


class Prefix(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[0])
        return x[:k] + 1


def test_nonzero_static_and_dynamic():
    model = Nonzero()
    mod, exe = _compile(model, (_sparse(4, 3),))
    assert any(isinstance(b.value, BindSymbol) for b in mod["main"].bindings)
    for seed in range(3):
        _same(exe, model, _sparse(4, 3, seed=seed))
    _same(exe, model, torch.zeros(4, 3))
    _, exe = _compile(model, (_sparse(4, 3),), ({0: Dim("b", max=64)},))
    for n in (1, 5, 33):
        _same(exe, model, _sparse(n, 3, seed=n))


def test_nonzero_of_a_comparison_and_int_tensor():
    class M(torch.nn.Module):
        def forward(self, x):
            a = torch.nonzero(x > 0.25).sum(0)  # two counts torch does not know equal
            return a * 10 + torch.nonzero((x < 0.5).to(torch.int32)).sum(0)

    model = M()
    _, exe = _compile(model, (torch.rand(2, 3, 4),))
    for seed in range(2):
        _same(exe, model, torch.rand(2, 3, 4, generator=torch.Generator().manual_seed(seed)))


def test_boolean_mask_indexing():
    model = MaskIndex()
    x, m = _sparse(4, 3), torch.rand(4, 3) > 0.5
    _, exe = _compile(model, (x, m))
    _same(exe, model, x, m)
    _same(exe, model, x, torch.zeros(4, 3, dtype=torch.bool))
    rows = torch.tensor([True, False, True, True])  # a mask over the first axis only
    _, exe = _compile(model, (x, rows))
    _same(exe, model, x, rows)
    _same(exe, model, x, ~rows)


def test_boolean_mask_on_a_later_axis_with_dynamic_rows():
    model = MaskColumns()
    x, m = torch.randn(5, 6), torch.tensor([True, False, True, True, False, True])
    _, exe = _compile(model, (x, m), ({0: Dim("b", max=64)}, None))
    for n in (2, 9):
        _same(exe, model, torch.randn(n, 6), m)
        _same(exe, model, torch.randn(n, 6), ~m)


def test_masked_select_broadcasts():
    model = MaskedSelect()
    x = torch.randn(4, 3)
    _, exe = _compile(model, (x, torch.rand(3) > 0.5))
    for seed in range(3):
        m = torch.rand(3, generator=torch.Generator().manual_seed(seed)) > 0.5
        _same(exe, model, x, m)


def test_item_sized_slice_static_and_dynamic():
    model = Prefix()
    _, exe = _compile(model, (torch.randn(5, 3), torch.tensor(2)))
    for k in (0, 3, 5):
        _same(exe, model, torch.randn(5, 3), torch.tensor(k))
    with pytest.raises(GraphError, match=r"extent u0 read at run time is 6, outside its bounds"):
        exe(torch.randn(5, 3), torch.tensor(6))
    mod, exe = _compile(model, (torch.randn(5, 3), torch.tensor(2)), ({0: Dim("b")}, None))
    (bind,) = [b.value for b in mod["main"].bindings if isinstance(b.value, BindSymbol)]
    assert bind.upper is mod["main"].params[0].type.shape[0]  # torch._check(k <= x.shape[0])
    for n, k in ((7, 7), (9, 4), (3, 0)):
        _same(exe, model, torch.randn(n, 3), torch.tensor(k))
    for k in (8, -1):  # past the end of x, negative: an error, never a read out of bounds
        with pytest.raises(GraphError, match=r"extent u0 read at run time is -?\d+, outside"):
            exe(torch.randn(7, 3), torch.tensor(k))


def test_data_dependent_function_runs_in_python_and_numpy_in_numpy_out():
    model = Nonzero()
    _, exe = _compile(model, (_sparse(4, 3),))
    f = exe.functions["main"]
    assert f.native is None  # extents read at run time: the Python executor runs it
    x = _sparse(4, 3, seed=5)
    out = exe["main"](x.numpy())
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.argwhere(x.numpy()))


def test_torch_compile_backend_with_data_dependent_outputs_captured():
    class M(torch.nn.Module):
        def forward(self, x, m):
            return x[m] * 2 + torch.nonzero(x).sum()

    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    patch = torch._dynamo.config.patch(
        capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True
    )
    with patch:
        fast = torch.compile(M(), backend="tilecraft")
        for seed in range(2):
            x = _sparse(4, 3, seed=seed)
            m = torch.rand(4, 3, generator=torch.Generator().manual_seed(seed)) > 0.5
            torch.testing.assert_close(fast(x, m), M()(x, m), rtol=1e-6, atol=0)
    assert not counters["graph_break"]  # one graph, nonzero and the mask inside: tilecraft's
    torch._dynamo.reset()


def test_counts_torch_asserts_equal_share_one_extent():
    class SameMask(torch.nn.Module):  # two selections torch asserts equal: Eq(u0, u1)
        def forward(self, x, y, m):
            return x[m] - y[m]

    class TwoMasks(torch.nn.Module):
        def forward(self, x, m1, m2):
            return torch.nonzero(m1) + torch.nonzero(m2) + x.sum().long()

    model = SameMask()
    x, y, m = torch.randn(4, 3), torch.randn(4, 3), torch.rand(4, 3) > 0.5
    mod, exe = _compile(model, (x, y, m))
    binds = [b.value for b in mod["main"].bindings if isinstance(b.value, BindSymbol)]
    assert len(binds) == 2
    assert binds[1].lower is binds[1].upper is binds[0].symbol  # checked equal to the first
    _same(exe, model, x, y, m)
    _same(exe, model, x, y, ~m)
    model = TwoMasks()
    m1 = torch.tensor([True, False, True, False])
    _, exe = _compile(model, (torch.randn(2), m1, m1.flip(0)))
    _same(exe, model, torch.randn(2), m1, ~m1)
    with pytest.raises(
        GraphError, match=r"extent u1 read at run time is 1, outside its bounds \[2, 2\]"
    ):
        exe(torch.randn(2), m1, torch.tensor([False, False, True, False]))


def test_nonzero_of_a_scalar_and_a_mask_held_as_a_buffer():
    model = Nonzero()
    _, exe = _compile(model, (torch.tensor(1.0),))
    _same(exe, model, torch.tensor(3.0))  # (1, 0)
    _same(exe, model, torch.tensor(0.0))  # (0, 0)

    class Buffered(torch.nn.Module):  # a constant mask: its count folds, its bind stays
        def __init__(self):
            super().__init__()
            self.register_buffer("m", torch.tensor([True, False, True]))

        def forward(self, x):
            return x[self.m] + 1

    model = Buffered()
    _, exe = _compile(model, (torch.randn(3, 2),))
    _same(exe, model, torch.randn(3, 2))


def test_strict_asserted_bounds_and_the_script_round_trip():
    class Strict(torch.nn.Module):
        def forward(self, x, n):
            k = n.item()
            torch._check(k > 0)
            torch._check(k < x.shape[0])
            return x[:k] + 1

    model = Strict()
    mod, exe = _compile(model, (torch.randn(6, 3), torch.tensor(2)), ({0: Dim("b")}, None))
    assert 'R.bind_symbol(reshape, "u0", lower=1, upper="(s77 - 1)")' in mod.script()
    assert tc.ir.structural_equal(tc.script.parse(mod.script()), mod)
    for k in (1, 5):
        _same(exe, model, torch.randn(6, 3), torch.tensor(k))
    for k in (0, 6):  # torch's asserts refuse them too
        with pytest.raises(GraphError, match=r"outside its bounds \[1, 5\]"):
            exe(torch.randn(6, 3), torch.tensor(k))

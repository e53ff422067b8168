"""Values torch.export knows only symbolically used as numbers: ``x * n.item()``, int or float,
through sym arithmetic, in ``full``; ``x * x.shape[0]`` with a dynamic dimension."""

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import (  # noqa: E402
    UnsupportedOpsError,
    from_exported_program,
    tilecraft_backend,
)
from tilecraft.graph.ir_bind import BindSymbol  # noqa: E402

Dim = torch.export.Dim


class Lambda(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, *args):
        return self.f(*args)


def _compile(model, args, dynamic=None):
    ep = torch.export.export(model, args, dynamic_shapes=None if dynamic is None else (dynamic,))
    mod, params = from_exported_program(ep)
    return mod, tc.compile(mod, target="cpu", params=params)


def _same(exe, model, *args):
    out, ref = exe(*args), model(*args)
    assert isinstance(out, torch.Tensor)
    assert (out.dtype, out.shape) == (ref.dtype, ref.shape)
    tol = 1e-5 if ref.dtype.is_floating_point else 0
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


def _binds(mod):
    return [b.value for b in mod["main"].bindings if isinstance(b.value, BindSymbol)]


def _rows(n, seed):
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed))


ROWS = ({0: Dim("b", max=64)},)


def test_int_item_as_a_number_binds_nothing_and_takes_negative_values():
    model = Lambda(lambda x, n: x * n.item() + n.item())
    mod, exe = _compile(model, (_rows(4, 0), torch.tensor(3)), (*ROWS, None))
    assert _binds(mod) == []  # no extent: no host read, the compiled executor runs it
    assert exe.functions["main"].native is not None
    for rows, k in ((4, 3), (9, -7), (2, 0)):
        _same(exe, model, _rows(rows, k), torch.tensor(k))


def test_float_item_of_a_reduction_is_added_to_every_element():
    model = Lambda(lambda x: x - x.amax().item())
    _, exe = _compile(model, (_rows(4, 0),), ROWS)
    for rows in (4, 11):
        _same(exe, model, _rows(rows, rows))


def test_item_through_sym_arithmetic_int_and_float():
    def f(x, n, v):
        k, w = n.item(), v.item()
        y = x * (k * 2 + 1) / k + (k // 2) + (k % 3) - (-k) + k**2
        return y + x * (k * 2.5) + w * 3.0 + w / k + w**2 + (w - 1.5) * (k - 1)

    model = Lambda(f)
    _, exe = _compile(model, (_rows(4, 0), torch.tensor(3), torch.tensor(0.5)), (*ROWS, None, None))
    for rows, k, w in ((4, 3, 0.5), (7, -5, -2.25)):
        _same(exe, model, _rows(rows, k), torch.tensor(k), torch.tensor(w))


def test_full_and_clamp_with_item_values():
    model = Lambda(lambda x, v, n: torch.full((3,), v.item()) + torch.clamp(x, max=n.item()))
    args = (_rows(4, 0), torch.tensor(2.5), torch.tensor(1))
    _, exe = _compile(model, args, (*ROWS, None, None))
    for rows, v, n in ((4, 2.5, 1), (6, -1.0, 0)):
        _same(exe, model, _rows(rows, n), torch.tensor(v), torch.tensor(n))


def test_item_used_as_a_size_and_as_a_number_reads_one_value():
    def f(x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[0])
        return x[:k] * k

    model = Lambda(f)
    mod, exe = _compile(model, (_rows(5, 0), torch.tensor(2)), (*ROWS, None))
    (bind,) = _binds(mod)
    assert bind.upper is mod["main"].params[0].type.shape[0]
    for rows, k in ((5, 2), (9, 7)):
        _same(exe, model, _rows(rows, k), torch.tensor(k))


def test_dynamic_shape_used_as_a_number():
    model = Lambda(lambda x: x * x.shape[0] + x.shape[0] * x.shape[1])
    _, exe = _compile(model, (_rows(4, 0),), ({0: Dim("b", max=64)},))
    assert exe.functions["main"].native is not None  # a kernel counts it: no host read
    for rows in (4, 13):
        _same(exe, model, _rows(rows, rows))


def test_a_count_and_a_bool_item_used_as_numbers():
    def f(x, n):
        count = torch.nonzero(x > 0).shape[0]  # a bound extent, as a number
        return x * count + x * (n > 2).item() + torch.scalar_tensor(n.item() * 0.5)

    model = Lambda(f)
    _, exe = _compile(model, (_rows(4, 0), torch.tensor(3)), (*ROWS, None))
    for rows, k in ((4, 3), (10, 1)):
        _same(exe, model, _rows(rows, k), torch.tensor(k))


@pytest.mark.parametrize(
    ("f", "op", "why"),
    [
        (lambda x, n: torch.add(x, x, alpha=n.item()), "aten::add.Tensor", "data-dependent"),
        (
            lambda x, n: x * torch.sym_sqrt(n.item()),
            "aten::mul.Tensor",
            r"symbolic number .*sqrt.* used as a tensor operand",
        ),
    ],
)
def test_a_number_it_cannot_express_is_reported_by_op(f, op, why):
    ep = torch.export.export(Lambda(f), (_rows(4, 0), torch.tensor(2)))
    with pytest.raises(UnsupportedOpsError, match=rf"{op}: .*{why}"):
        from_exported_program(ep)


def test_torch_compile_with_captured_item(monkeypatch):
    from tilecraft.frontend.torch import backend

    imported = []

    def spy(ep, **kw):
        imported.append({str(n.target) for n in ep.graph.nodes})
        return from_exported_program(ep, **kw)

    monkeypatch.setattr(backend, "from_exported_program", spy)
    model = Lambda(lambda x, n: x * n.item() + 1.0)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        fast = torch.compile(model, backend=tilecraft_backend, options={"target": "cpu"})
        for rows, k in ((4, 3), (9, -2)):
            x, n = _rows(rows, rows), torch.tensor(k)
            torch.testing.assert_close(fast(x, n), model(x, n), rtol=1e-5, atol=1e-5)
    assert imported
    assert all("aten.item.default" in targets for targets in imported)  # no graph break

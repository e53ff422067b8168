"""torch.fft programs (complex values as real pairs inside the importer) against torch eager."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import (  # noqa: E402
    UnsupportedOpsError,
    from_exported_program,
    tilecraft_backend,
)
from tilecraft.frontend.torch._ops_fft import (  # noqa: E402
    c2c_matrix,
    c2r_matrix,
    r2c_matrix,
)
from tilecraft.graph import Constant  # noqa: E402

Dim = torch.export.Dim


def _run(model, args, dynamic_shapes=None):
    """Export, import and compile ``model``; its outputs on ``args`` as numpy arrays."""
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    mod, params = from_exported_program(ep)
    return mod, tc.compile(mod, params=params)


def _close(out, ref):
    ref = ref.detach().numpy()
    out = np.asarray(out)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(np.abs(ref).max(), 1e-30))


def _outputs(exe, *args):
    out = exe["main"](*[a.numpy() for a in args])
    return out if isinstance(out, tuple) else (out,)


# the matrices, against numpy's FFT ----------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 7, 8])
def test_dft_matrices_match_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n))
    z = x + 1j * rng.standard_normal((3, n))
    pairs = np.stack([z.real, z.imag], -1).reshape(3, 2 * n)
    got = (x @ r2c_matrix(n, n // 2 + 1, 1.0)).reshape(3, -1, 2)
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], np.fft.rfft(x), atol=1e-12)
    for forward, ref in ((True, np.fft.fft(z)), (False, np.fft.ifft(z) * n)):
        got = (pairs @ c2c_matrix(n, forward, 1.0)).reshape(3, n, 2)
        np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], ref, atol=1e-12)
    spec = np.fft.rfft(x)
    half = np.stack([spec.real, spec.imag], -1).reshape(3, -1)
    np.testing.assert_allclose(half @ c2r_matrix(n // 2 + 1, n, 1.0 / n), x, atol=1e-12)


def test_c2r_ignores_imaginary_dc_and_nyquist_and_resizes():
    rng = np.random.default_rng(0)
    spec = rng.standard_normal((2, 5)) + 1j * rng.standard_normal((2, 5))  # not Hermitian
    pairs = np.stack([spec.real, spec.imag], -1).reshape(2, -1)
    for n in (8, 9, 6, 14):  # output lengths whose spectra have 5, 5, 4 and 8 bins
        k = min(5, n // 2 + 1)
        ref = torch.fft.irfft(torch.from_numpy(spec[:, :k]), n=n).numpy()
        got = pairs[:, : 2 * k] @ c2r_matrix(k, n, 1.0 / n)
        np.testing.assert_allclose(got, ref, atol=1e-12)


# every normalization, onesided or not, any dim list ----------------------------------------
class _Transforms(torch.nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.norm = norm

    def forward(self, x):  # x: (2, 6, 8)
        n = self.norm
        spec = torch.fft.rfft(x, norm=n)
        return (
            torch.view_as_real(spec),
            torch.fft.irfft(spec, n=8, norm=n),
            torch.fft.irfft(spec, n=11, norm=n),  # zero-padded spectrum
            torch.fft.irfft(spec, n=5, dim=-1, norm=n),  # truncated spectrum
            torch.view_as_real(torch.fft.fft(x, dim=1, norm=n)),  # real input, two-sided
            torch.view_as_real(torch.fft.ifft(x, norm=n).resolve_conj()),
            torch.view_as_real(torch.fft.rfftn(x, dim=(0, 2), norm=n)),
            torch.fft.irfftn(torch.fft.rfftn(x, dim=(2, 1), norm=n), s=(6, 8), dim=(1, 2), norm=n),
            torch.view_as_real(torch.fft.fftn(x.to(torch.complex64), norm=n)),
            torch.view_as_real(torch.fft.ifftn(x.to(torch.complex64), dim=(0, 1), norm=n)),
            torch.fft.hfft(spec, norm=n),
            torch.view_as_real(torch.fft.ihfft(x, norm=n).resolve_conj()),
            torch.fft.rfft(x, n=12, norm=n).abs(),  # zero-padded signal
        )


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_fft_transforms_every_normalization(norm):
    torch.manual_seed(0)
    x = torch.randn(2, 6, 8)
    _, exe = _run(_Transforms(norm), (x,))
    refs = _Transforms(norm)(x)
    outs = _outputs(exe, x)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs, strict=True):
        _close(out, ref)


def test_equal_transforms_share_one_dft_matrix():
    class M(torch.nn.Module):
        def forward(self, x, y):
            return torch.fft.rfft(x).abs() + torch.fft.rfft(y).abs()

    args = (torch.randn(2, 8), torch.randn(3, 2, 8))
    mod, _ = from_exported_program(torch.export.export(M(), args))
    consts = [b for b in mod["main"].bindings if isinstance(b.value, Constant)]
    assert [c.var.type.static_shape() for c in consts] == [(8, 10)]
    _close(_outputs(tc.compile(mod), *args)[0], M()(*args))


# models as users write them ----------------------------------------------------------------
class SpectralFilter(torch.nn.Module):
    """rfft -> multiply by a learned complex (and a real) weight -> irfft."""

    def __init__(self, channels=4, length=32):
        super().__init__()
        bins = length // 2 + 1
        self.weight = torch.nn.Parameter(torch.randn(channels, bins, dtype=torch.cfloat))
        self.gain = torch.nn.Parameter(torch.rand(bins) + 0.5)
        self.length = length

    def forward(self, x):  # (batch, channels, length)
        spec = torch.fft.rfft(x, dim=-1, norm="ortho")
        spec = spec * self.weight * self.gain + spec / 4
        return torch.fft.irfft(spec, n=self.length, dim=-1, norm="ortho") + x


class MagnitudeFrontEnd(torch.nn.Module):
    """An audio front-end: windowed frames -> |rfft| -> log-compressed power."""

    def __init__(self, frame=16):
        super().__init__()
        self.register_buffer("window", torch.hann_window(frame))

    def forward(self, frames):  # (batch, frames, frame)
        mag = torch.fft.rfft(frames * self.window).abs()
        return torch.log1p(mag * mag)


class SpectralConv1d(torch.nn.Module):
    """A Fourier neural operator layer: the lowest modes mixed by complex weights (einsum)."""

    def __init__(self, channels=4, modes=5):
        super().__init__()
        scale = 1 / channels
        self.weight = torch.nn.Parameter(
            scale * torch.randn(channels, channels, modes, dtype=torch.cfloat)
        )
        self.modes = modes

    def forward(self, x):  # (batch, channels, length)
        n = x.shape[-1]
        spec = torch.fft.rfft(x)
        mixed = torch.einsum("bix,iox->box", spec[:, :, : self.modes], self.weight)
        out = torch.zeros(x.shape[0], x.shape[1], n // 2 + 1, dtype=torch.cfloat)
        out[:, :, : self.modes] = mixed
        return torch.fft.irfft(out, n=n) + x


class Spectrogram(torch.nn.Module):
    """``torch.stft`` magnitude, as audio models compute it."""

    def __init__(self, n_fft=16, hop=4):
        super().__init__()
        self.register_buffer("window", torch.hann_window(n_fft))
        self.n_fft, self.hop = n_fft, hop

    def forward(self, wave):  # (batch, samples)
        spec = torch.stft(wave, self.n_fft, self.hop, window=self.window, return_complex=True)
        return spec.abs().pow(2)


@pytest.mark.parametrize(
    ("model", "shape"),
    [
        (SpectralFilter(), (3, 4, 32)),
        (MagnitudeFrontEnd(), (2, 5, 16)),
        (SpectralConv1d(), (2, 4, 16)),
        (Spectrogram(), (2, 64)),
    ],
)
def test_models_dynamic_batch(model, shape):
    torch.manual_seed(0)
    model.eval()
    ep_x = torch.randn(*shape)
    _, exe = _run(model, (ep_x,), dynamic_shapes=({0: Dim("b", max=16)},))
    for b in (shape[0], 5):
        x = torch.randn(b, *shape[1:])
        with torch.no_grad():
            ref = model(x)
        _close(_outputs(exe, x)[0], ref)


def test_complex_arithmetic():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(5, dtype=torch.cfloat) + 2)

        def forward(self, x):  # x: (3, 8)
            z = torch.fft.rfft(x)
            q = (z / self.w) - 2 * z.conj() + (1 + 2j) - x[:, :5] / (z + 3)
            r = torch.polar(x[:, :5].abs(), x[:, :5]) * torch.complex(x[:, 1:6], x[:, 2:7])
            s = torch.cat([q, r.permute(1, 0).reshape(3, 5)], 1).sum(1, keepdim=True)
            parts = torch.view_as_complex(torch.view_as_real(q) * 2)
            e = torch.where(x[:, :5] > 0, torch.exp(z / 8), 1 / (z + 2j)) * (0.5 - 1j)
            return torch.view_as_real(q + s), r.angle(), parts.imag + z.real, (-q).abs(), e.abs()

    torch.manual_seed(0)
    model, x = M(), torch.randn(3, 8)
    _, exe = _run(model, (x,))
    for out, ref in zip(_outputs(exe, x), model(x), strict=True):
        _close(out, ref)


def test_shifts_indexing_and_frequencies():
    class M(torch.nn.Module):
        def forward(self, x):  # (3, 8)
            spec = torch.fft.fftshift(torch.fft.fft(x), dim=-1)
            back = torch.fft.ifft(torch.fft.ifftshift(spec)).real
            picked = torch.stack([spec[:, [1, 3]], torch.flip(spec, [-1])[:, :2]]).abs()
            freqs = torch.fft.fftfreq(8, d=0.5) + torch.fft.rfftfreq(14)[:8]
            return back, picked, spec.abs() * freqs

    x = torch.randn(3, 8)
    _, exe = _run(M(), (x,))
    for out, ref in zip(_outputs(exe, x), M()(x), strict=True):
        _close(out, ref)


def test_complex_only_operators_on_real_tensors():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.angle(x), x.conj() + x.resolve_conj() + torch.real(x) + x.conj_physical()

    x = torch.tensor([[1.0, -2.0, 0.0, float("nan")], [-0.0, 3.0, -1.0, 2.0]])
    _, exe = _run(M(), (x,))
    angle, total = _outputs(exe, x)
    np.testing.assert_array_equal(angle, torch.angle(x).numpy())  # pi, 0 and NaN exactly
    np.testing.assert_array_equal(total, (4 * x).numpy())


def test_real_to_complex_keeps_infinities_and_signs():
    class M(torch.nn.Module):
        def forward(self, x):
            z = x.to(torch.complex64)
            return torch.view_as_real(z), z.angle()

    x = torch.tensor([[1.0, -2.0, float("inf"), -float("inf")]])
    _, exe = _run(M(), (x,))
    pairs, angle = _outputs(exe, x)
    ref_pairs, ref_angle = M()(x)
    np.testing.assert_array_equal(pairs, ref_pairs.numpy())  # (inf, 0), not (inf, nan)
    np.testing.assert_array_equal(angle, ref_angle.numpy())  # pi for a negative real


def _rotary_table(dim, end):
    freqs = 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim))
    angles = torch.outer(torch.arange(end).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


class ComplexRotary(torch.nn.Module):
    """Llama's reference rotary embedding: pairs viewed as complex, times a complex table."""

    def __init__(self, head_dim=8, max_len=64):
        super().__init__()
        self.register_buffer("freqs_cis", _rotary_table(head_dim, max_len))

    def forward(self, xq):  # (batch, seq, heads, head_dim)
        seq = xq.shape[1]
        pairs = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        table = self.freqs_cis[:seq].view(1, seq, 1, pairs.shape[-1])
        return torch.view_as_real(pairs * table).flatten(3).type_as(xq)


def test_complex_rotary_embedding_dynamic_sequence():
    model = ComplexRotary()
    ep = torch.export.export(
        model, (torch.randn(2, 6, 3, 8),), dynamic_shapes=({1: Dim("s", max=32)},)
    )
    mod, params = from_exported_program(ep)
    assert params["freqs_cis"].shape == (64, 4, 2)  # the complex buffer as its real view
    exe = tc.compile(mod, params=params)
    for seq in (6, 9):
        x = torch.randn(2, seq, 3, 8)
        _close(_outputs(exe, x)[0], model(x))


# the boundary: complex inputs and outputs ----------------------------------------------------
class _ComplexInOut(torch.nn.Module):
    def forward(self, z, x):  # z complex (4, 6), x real (4, 6)
        return torch.fft.ifft(z * x, norm="ortho"), torch.fft.irfft(z, n=10).sum(0)


def test_complex_inputs_and_outputs_are_real_views():
    torch.manual_seed(0)
    z = torch.randn(4, 6, dtype=torch.cfloat)
    x = torch.randn(4, 6)
    mod, exe = _run(_ComplexInOut(), (z, x))
    attrs = mod["main"].attrs
    assert attrs["tc.complex_inputs"] == (0,)
    assert attrs["tc.complex_outputs"] == (0,)
    assert [p.type.static_shape() for p in mod["main"].params] == [(4, 6, 2), (4, 6)]
    out = exe["main"](torch.view_as_real(z).numpy(), x.numpy())
    ref = _ComplexInOut()(z, x)
    _close(out[0], torch.view_as_real(ref[0]))
    _close(out[1], ref[1])


def test_complex_parameter_is_its_real_view():
    model = SpectralFilter()
    _, params = from_exported_program(torch.export.export(model, (torch.randn(1, 4, 32),)))
    np.testing.assert_array_equal(params["weight"], torch.view_as_real(model.weight).detach())


def test_torch_compile_backend_converts_complex_at_the_boundary():
    graphs = []

    def counting(gm, example_inputs):  # the tilecraft backend, counting the graphs it gets
        graphs.append(gm)
        return tilecraft_backend(gm, example_inputs)

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = SpectralFilter().eval()
    assert torch.compile(model, backend="tilecraft")(torch.randn(1, 4, 32)).shape == (1, 4, 32)
    fast = torch.compile(model, backend=counting)
    x = torch.randn(2, 4, 32)
    with torch.no_grad():
        _close(fast(x), model(x))
    assert len(graphs) == 1  # one graph, no break: the FFTs ran in tilecraft
    io = torch.compile(_ComplexInOut(), backend=counting)
    z, y = torch.randn(4, 6, dtype=torch.cfloat), torch.randn(4, 6)
    out, ref = io(z, y), _ComplexInOut()(z, y)
    assert out[0].dtype == torch.complex64
    _close(torch.view_as_real(out[0]), torch.view_as_real(ref[0]))
    _close(out[1], ref[1])
    assert len(graphs) == 2


# what is not supported says so -----------------------------------------------------------------
def test_other_op_on_a_complex_value_is_named():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.view_as_real(torch.sqrt(torch.fft.rfft(x)))

    ep = torch.export.export(M(), (torch.randn(2, 8),))
    with pytest.raises(UnsupportedOpsError, match=r"aten::sqrt: not supported on complex"):
        from_exported_program(ep)


def test_fft_over_a_symbolic_axis_is_named():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    ep = torch.export.export(M(), (torch.randn(2, 8),), dynamic_shapes=({1: Dim("n", max=64)},))
    with pytest.raises(UnsupportedOpsError, match=r"aten::_fft_r2c: FFT axis of symbolic size"):
        from_exported_program(ep)

"""DispatchLibrary("cublas"): GEMMs of CUDA targets become cuBLAS calls.

Which functions go to cuBLAS and which dtypes are declined (with the reason); emulated builds
run the call on the host and match numpy (float32, float16 accumulated in float32, batched,
transposed layouts); a missing cuBLAS or GPU is a clear error; on a GPU (marked ``gpu``) the
real cuBLAS call matches numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.dispatch import DispatchError, DispatchLibrary, ExternLibraryError
from tilecraft.frontend import nn
from tilecraft.graph import CallExtern, get_pipeline
from tilecraft.graph.script import parse
from tilecraft.ir import scheduled_by
from tilecraft.runtime.cuda_driver import CUDAError, device_available
from tilecraft.runtime.executor import extern_cublas

GPU = tc.Target("cuda -arch=sm_90")


class MLP(nn.Module):
    """Linear with bias, ReLU, Linear without bias."""

    def __init__(self, dtype: str = "float32") -> None:
        self.fc1 = nn.Linear(16, 32, dtype=dtype)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(32, 8, bias=False, dtype=dtype)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


class Attention(nn.Module):
    """Two batched matmuls: ``(q @ k) @ v``."""

    def forward(self, q: nn.Tensor, k: nn.Tensor, v: nn.Tensor) -> nn.Tensor:
        return (q @ k) @ v


def _dispatched(mod: tc.IRModule, params: Any = None) -> tuple[tc.IRModule, DispatchLibrary]:
    with GPU:
        mod = get_pipeline("default", params=params)(mod)
        pass_ = DispatchLibrary("cublas")
        mod = dl.ApplyDefaultSchedule(*dl.gpu.default_rules())(pass_(mod))
    return mod, pass_


def _externs(mod: tc.IRModule) -> list[CallExtern]:
    return [b.value for b in mod["forward"].bindings if isinstance(b.value, CallExtern)]


def _mlp_ref(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    w = {n: a.astype(np.float64) for n, a in p.items()}
    h = np.maximum(x.astype(np.float64) @ w["fc1.weight"].T + w["fc1.bias"], 0)
    return h @ w["fc2.weight"].T


@pytest.mark.parametrize(("dtype", "tol"), [("float32", 1e-5), ("float16", 2e-3)])
def test_mlp_gemms_go_to_cublas_and_match_numpy_emulated(dtype: str, tol: float) -> None:
    mod, params = MLP(dtype).export({"forward": {"x": nn.spec.Tensor(("batch", 16), dtype)}})
    mod, pass_ = _dispatched(mod, params)
    assert sorted(pass_.report.dispatched) == ["fused_matmul_add_relu", "matmul1"]
    calls = _externs(mod)
    assert [c.func for c in calls] == ["cublas.gemm"] * 2
    assert all(set(dict(c.attrs)) == {"trans_a", "trans_b"} for c in calls)  # no BLAS threads
    # float16 products accumulate in float32: the GEMM's result is float32, cast by our kernel
    assert all(str(c.out_type.dtype) == "float32" for c in calls)
    for name in pass_.report.dispatched:
        assert scheduled_by(mod[name]) == "dispatch:cublas"
    exe = tc.build(mod, GPU, emulate=True)
    for batch in (3, 8):
        x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(dtype)
        y = exe(x)
        assert y.dtype == np.dtype(dtype)
        np.testing.assert_allclose(y, _mlp_ref(x, params), rtol=tol, atol=tol)


def test_dispatched_module_round_trips_as_script_json_and_hash() -> None:
    mod, params = MLP("float16").export({"forward": {"x": nn.spec.Tensor(("b", 16), "float16")}})
    with GPU:
        mod = DispatchLibrary("cublas")(get_pipeline("default", params=params)(mod))
    text = mod.script()
    assert "R.call_extern('cublas.gemm'" in text
    assert 'tc.scheduled": "dispatch:cublas"' in text
    for again in (parse(text), tc.ir.from_json(tc.ir.to_json(mod))):
        assert tc.ir.structural_equal(again, mod)
        assert tc.ir.structural_hash(again) == tc.ir.structural_hash(mod)
    blas = parse(text.replace("'cublas.gemm'", "'blas.gemm'"))  # the library is the meaning
    assert tc.ir.structural_hash(blas) != tc.ir.structural_hash(mod)


def test_batched_matmuls_match_numpy_emulated() -> None:
    spec = {
        "q": nn.spec.Tensor((3, "s", 8), "float16"),
        "k": nn.spec.Tensor((3, 8, "s"), "float16"),
        "v": nn.spec.Tensor((3, "s", 5), "float16"),
    }
    mod, _ = Attention().export({"forward": spec})
    mod, pass_ = _dispatched(mod)
    assert len(pass_.report.dispatched) == 2
    exe = tc.build(mod, GPU, emulate=True)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype("float16") for s in ((3, 6, 8), (3, 8, 6), (3, 6, 5)))
    want = (q.astype(np.float32) @ k.astype(np.float32)).astype("float16").astype(np.float32)
    np.testing.assert_allclose(exe(q, k, v), want @ v.astype(np.float32), rtol=5e-3, atol=5e-3)


def test_declined_dtypes_and_functions_say_why() -> None:
    class Softmax(nn.Module):
        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return nn.functional.softmax(x, axis=-1)

    spec = {"x": nn.spec.Tensor((4, 8), "int8"), "w": nn.spec.Tensor((8, 4), "int8")}

    class Int8(nn.Module):
        def forward(self, x: nn.Tensor, w: nn.Tensor) -> nn.Tensor:
            return x @ w

    mod, _ = Int8().export({"forward": spec})
    with GPU:
        lowered = get_pipeline("default")(mod)
        pass_ = DispatchLibrary("cublas")
        assert pass_(lowered) is lowered
    (why,) = pass_.report.declined.values()
    assert "takes no int8 operands" in why
    mod, _ = Softmax().export({"forward": {"x": nn.spec.Tensor((4, 8), "float32")}})
    with GPU:
        pass_ = DispatchLibrary("cublas")
        pass_(get_pipeline("default")(mod))
    assert pass_.report.dispatched == []
    assert all(pass_.report.declined.values())


def test_blas_declines_float16_that_cublas_takes() -> None:
    mod, _ = MLP("float16").export({"forward": {"x": nn.spec.Tensor((2, 16), "float16")}})
    with tc.Target("cpu"):
        pass_ = DispatchLibrary("blas")
        pass_(get_pipeline("default")(mod))
    assert pass_.report.dispatched == []
    assert any("float16" in why for why in pass_.report.declined.values())


def test_library_and_target_kind_must_agree() -> None:
    mod, _ = MLP().export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    with tc.Target("cpu"), pytest.raises(DispatchError, match="CUDA GPUs"):
        DispatchLibrary("cublas")(mod)
    with pytest.raises(DispatchError, match="CUDA GPUs; the current target is none"):
        DispatchLibrary("cublas")(mod)


@pytest.mark.parametrize(
    ("trans_a", "trans_b", "a_shape", "b_shape"),
    [
        (False, False, (3, 5, 7), (7, 4)),
        (True, False, (3, 7, 5), (7, 4)),
        (False, True, (3, 5, 7), (3, 4, 7)),
        (True, True, (7, 5), (3, 4, 7)),
    ],
)
def test_emulated_gemm_layouts_accumulate_float16_in_float32(
    trans_a: bool, trans_b: bool, a_shape: tuple[int, ...], b_shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype("float16")
    b = rng.standard_normal(b_shape).astype("float16")
    at = np.swapaxes(a, -1, -2) if trans_a else a
    bt = np.swapaxes(b, -1, -2) if trans_b else b
    want = at.astype(np.float32) @ bt.astype(np.float32)
    out = np.full(want.shape, np.nan, "float32")
    kernel = extern_cublas.cublas_kernel({"trans_a": trans_a, "trans_b": trans_b}, emulated=True)
    kernel(a, b, out)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


SCRIPT = """
@R.function
def forward(a: R.Tensor(("n", 8), "float32"), w: R.Tensor((4, 8), "float32")) -> R.Tensor(("n", 4), "float32"):
    with R.dataflow():
        y = R.call_extern('cublas.gemm', (a, w), out_sinfo=R.Tensor(("n", 4), "float32"), trans_a=False, trans_b=True)
        R.output(y)
    return y
"""  # noqa: E501


def test_missing_cublas_is_an_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extern_cublas, "_cublas", None)
    monkeypatch.setattr(extern_cublas, "_wheel_candidates", list)
    monkeypatch.setattr(extern_cublas, "_SONAMES", ("libcublas_not_installed.so",))
    with pytest.raises(ExternLibraryError, match=r"pip install 'tilecraft\[cublas\]'"):
        extern_cublas.load_cublas()
    mod = tc.IRModule({"forward": parse(SCRIPT)})
    with pytest.raises(ExternLibraryError, match="nvidia-cublas"):
        tc.build(mod, GPU)  # a real build needs the library
    exe = tc.build(mod, GPU, emulate=True)  # an emulated one does not
    a = np.ones((2, 8), np.float32)
    w = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(exe(a, w), a @ w.T)


@pytest.mark.skipif(device_available(), reason="checks the error of a machine without a GPU")
def test_missing_gpu_is_a_cuda_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = extern_cublas.Cublas("fake", None, None, None)  # type: ignore[arg-type]
    monkeypatch.setattr(extern_cublas, "_cublas", fake)
    exe = tc.build(tc.IRModule({"forward": parse(SCRIPT)}), GPU)
    with pytest.raises(CUDAError):
        exe(np.ones((2, 8), np.float32), np.ones((4, 8), np.float32))


def test_cublas_symbols_resolve_where_the_library_is_installed() -> None:
    try:
        lib = extern_cublas.load_cublas()
    except ExternLibraryError:
        pytest.skip("cuBLAS is not installed (pip install 'tilecraft[cublas]')")
    assert lib.gemm is not None
    assert lib.gemm_strided is not None
    assert callable(lib.dll.cublasCreate_v2)


@pytest.mark.gpu
@pytest.mark.skipif(not device_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("dtype", "tol"), [("float32", 1e-4), ("float16", 3e-3)])
def test_real_cublas_matches_numpy(dtype: str, tol: float) -> None:
    mod, params = MLP(dtype).export({"forward": {"x": nn.spec.Tensor(("batch", 16), dtype)}})
    mod, _ = _dispatched(mod, params)
    exe = tc.build(mod, GPU)
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(dtype)
    np.testing.assert_allclose(exe(x), _mlp_ref(x, params), rtol=tol, atol=tol)
    spec = {
        "q": nn.spec.Tensor((3, "s", 8), "float32"),
        "k": nn.spec.Tensor((3, 8, "s"), "float32"),
        "v": nn.spec.Tensor((3, "s", 5), "float32"),
    }
    mod, _ = _dispatched(Attention().export({"forward": spec})[0])
    exe = tc.build(mod, GPU)
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal(s).astype("float32") for s in ((3, 6, 8), (3, 8, 6), (3, 6, 5)))
    np.testing.assert_allclose(exe(q, k, v), (q @ k) @ v, rtol=1e-4, atol=1e-4)

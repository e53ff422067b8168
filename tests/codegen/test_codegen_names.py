"""Names that clash with C keywords, libm or CUDA math: mangled in the source, kept in the API."""

import shutil

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.codegen import build_c_source, c_source, c_symbol, cuda_source
from tilecraft.codegen.base import NameTable, symbol_table
from tilecraft.ir import Buffer, BufferStore, For, ForKind, IRModule, PrimFunc, Var, op
from tilecraft.runtime.cuda_compile import ptxas_info


def unary(name, fn, dtype="float32", a="A", b="B", i="i", n=64):
    A, B = Buffer(a, (n,), dtype), Buffer(b, (n,), dtype)
    v = Var(i)
    return PrimFunc((A, B), For(v, 0, n, ForKind.SERIAL, BufferStore(B, fn(A[v]), (v,))), name=name)


def test_prim_func_named_exp_compiles_and_keeps_its_name():
    f = unary("exp", op.exp)
    csrc = build_c_source(f)
    assert csrc.symbols == {"exp": "exp_"}
    assert "TC_EXPORT void exp_(" in csrc.text
    lib = tc.build(f, target="cpu")
    x = np.linspace(-3, 3, 64, dtype="float32")
    y = np.empty_like(x)
    lib["exp"](x, y)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_buffers_and_loop_var_named_like_libm_functions(dtype):
    # float32 code calls expf/sqrtf, float64 code calls exp/sqrt: either way the locals
    # must not shadow the functions the kernel calls
    f = unary("tanh", lambda x: op.exp(x) + op.sqrt(x), dtype, a="expf", b="sqrt", i="exp")
    src = c_source(f)
    assert f"{'const ' + ('float' if dtype == 'float32' else 'double')}* restrict v_expf" in src
    assert "v_sqrt[v_exp] = " in src
    lib = tc.build(f, target="cpu")
    x = np.linspace(0.5, 4, 64).astype(dtype)
    y = np.empty_like(x)
    lib["tanh"](x, y)
    np.testing.assert_allclose(y, np.exp(x) + np.sqrt(x), rtol=1e-6)


def test_module_symbols_stay_distinct():
    mod = IRModule({"exp": unary("exp", op.exp), "exp_": unary("exp_", op.sqrt),
                    "abs": unary("abs", lambda x: x * 2.0)})  # fmt: skip
    csrc = build_c_source(mod)
    assert csrc.symbols == {"exp": "exp_1", "exp_": "exp_", "abs": "abs_"}
    lib = tc.build(mod, target="cpu")
    x = np.linspace(0.5, 4, 64, dtype="float32")
    for name, ref in (("exp", np.exp(x)), ("exp_", np.sqrt(x)), ("abs", x * 2)):
        y = np.empty_like(x)
        lib[name](x, y)
        np.testing.assert_allclose(y, ref, rtol=1e-6)


def test_symbol_and_local_mangling_rules():
    assert c_symbol("main") == "main_"
    assert c_symbol("tanhf") == "tanhf_"
    assert c_symbol("tc_kernel") == "f_tc_kernel"
    assert c_symbol("fused_add") == "fused_add"
    assert symbol_table(["sqrt", "sqrt_", "sqrt_1"]) == {
        "sqrt": "sqrt_2", "sqrt_": "sqrt_", "sqrt_1": "sqrt_1"}  # fmt: skip
    names = NameTable(reserved=("k",))
    assert [names.get(object(), h) for h in ("powf", "free", "tc_x", "k", "1a", "int")] == [
        "v_powf", "v_free", "v_tc_x", "k_1", "v_1a", "v_int"]  # fmt: skip


def _gpu_unary(name, a, b, fn):
    A, B = Buffer(a, (4096,), "float32"), Buffer(b, (4096,), "float32")
    bx, tx = Var("bx"), Var("tx")
    idx = bx * 128 + tx
    store = BufferStore(B, fn(A[idx]), (idx,))
    inner = For(tx, 0, 128, ForKind.THREAD_BINDING, store, thread="threadIdx.x")
    return PrimFunc((A, B), For(bx, 0, 32, ForKind.THREAD_BINDING, inner, thread="blockIdx.x"),
                    name=name)  # fmt: skip


def test_cuda_locals_named_like_cuda_math():
    f = _gpu_unary("rsqrt", "expf", "rsqrtf", lambda x: op.rsqrt(op.exp(x)))
    src = cuda_source(f, "cuda -arch=sm_90")
    assert "const float* __restrict__ v_expf" in src
    assert "v_rsqrtf[" in src
    assert "= rsqrtf(expf(v_expf[" in src


@pytest.mark.skipif(shutil.which("ptxas") is None or shutil.which("nvcc") is None,
                    reason="nvcc/ptxas not on PATH")  # fmt: skip
def test_cuda_locals_named_like_cuda_math_compile():
    f = _gpu_unary("expf", "sqrtf", "exp", lambda x: op.sqrt(op.exp(x)))
    info = ptxas_info(cuda_source(f, "cuda -arch=sm_90"), "sm_90")
    assert sorted(info) == ["expf_kernel0"]

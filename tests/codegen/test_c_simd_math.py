"""Vectorizable libm calls: libmvec declarations in the C text and the flags that enable them."""

import numpy as np

import tilecraft as tc
from tilecraft.codegen import c_source
from tilecraft.ir import Buffer, BufferStore, For, ForKind, PrimFunc, Var, op
from tilecraft.runtime.compiler import LIBMVEC_FLAGS, compile_flags, find_compiler, link_flags


def loop_func(dtype="float32", value=None, n=64):
    A, B = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    i = Var("i")
    return PrimFunc((A, B), For(i, 0, n, ForKind.VECTORIZED, BufferStore(B, value(A[i]), (i,))))


def test_simd_declarations_only_for_used_functions():
    src = c_source(loop_func(value=lambda x: op.exp(x) + op.log(x)))
    assert "TC_SIMD float expf(float);" in src
    assert "TC_SIMD float logf(float);" in src
    assert "sinf" not in src
    assert "#if defined(TC_LIBMVEC)" in src
    f64 = c_source(loop_func("float64", value=lambda x: op.exp(x) + op.tanh(x)))
    assert "TC_SIMD double exp(double);" in f64
    assert "TC_SIMD double tanh(double);" in f64  # newer libmvec: under a glibc version check
    assert "__GLIBC_PREREQ(2, 35)" in f64


def test_no_declarations_without_libm_calls():
    src = c_source(loop_func(value=lambda x: x * 2.0))
    assert "TC_SIMD" not in src
    src = c_source(loop_func(value=lambda x: op.sqrt(x)))  # vectorized natively by gcc
    assert "TC_SIMD" not in src


def test_libmvec_define_and_library_go_together():
    flags = compile_flags(find_compiler())
    define, lib = LIBMVEC_FLAGS
    assert (define in flags) == (lib in link_flags(flags))


def test_vectorized_exp_matches_numpy():
    func = loop_func(value=lambda x: op.exp(x), n=1000)
    lib = tc.build(func, target="cpu")
    a = np.linspace(-80.0, 80.0, 1000, dtype=np.float32)
    b = np.empty_like(a)
    lib["main"](a, b)
    np.testing.assert_allclose(b, np.exp(a), rtol=2e-6)
    if LIBMVEC_FLAGS[0] in compile_flags(find_compiler()):
        # the loop calls a vector variant (mangled _ZGV<isa><mask><lanes>v_expf)
        assert b"_ZGV" in lib.path.read_bytes()

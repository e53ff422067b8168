"""C codegen: emitted text (pragmas, restrict, helpers, libm mapping) and that it compiles."""

import pytest

import tilecraft as tc
from tilecraft.codegen import c_source
from tilecraft.errors import CodegenError
from tilecraft.ir import (
    Allocate,
    Buffer,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    PrimFunc,
    Var,
    op,
    seq,
)
from tilecraft.runtime import compile_shared


def loop_func(kind, dtype="float32", n=64, value=None, name="main"):
    A, B = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    i = Var("i")
    val = value(A[i]) if value else A[i]
    return PrimFunc((A, B), For(i, 0, n, kind, BufferStore(B, val, (i,))), name=name)


@pytest.mark.parametrize(
    ("kind", "pragma"),
    [(ForKind.PARALLEL, "#pragma omp parallel for"), (ForKind.VECTORIZED, "#pragma omp simd"),
     (ForKind.UNROLLED, "#pragma GCC unroll 64")],
)  # fmt: skip
def test_loop_kind_pragmas(kind, pragma):
    # a parallel loop goes to threads with work to share (lower.ParallelGrain)
    src = c_source(loop_func(kind, n=1 << 16 if kind is ForKind.PARALLEL else 64))
    assert pragma in src
    assert "const float* restrict A" in src
    assert "float* restrict B" in src
    compile_shared(src)


def test_float16_storage_and_helpers():
    src = c_source(loop_func(ForKind.SERIAL, "float16", value=lambda x: op.exp(x)))
    assert "uint16_t* restrict B" in src
    assert "tc_f16_to_f32(A[i])" in src
    assert "B[i] = tc_f32_to_f16(expf(" in src
    src_bf = c_source(loop_func(ForKind.SERIAL, "bfloat16"))
    assert "tc_bf16_to_f32" in src_bf
    compile_shared(src)


def test_intrinsic_mapping():
    f32 = c_source(
        loop_func(ForKind.SERIAL, value=lambda x: op.rsqrt(x) + op.sigmoid(x) + op.erf(x))
    )
    assert "(1.0f / sqrtf(" in f32
    assert "(1.0f / (1.0f + expf(-(" in f32
    assert "erff(" in f32
    f64 = c_source(loop_func(ForKind.SERIAL, "float64", value=lambda x: op.exp(x) + op.tanh(x)))
    assert "exp(A[i])" in f64
    assert "tanh(A[i])" in f64
    assert "expf" not in f64
    compile_shared(f32)


def test_floordiv_helpers_only_when_signs_unknown():
    n = 16
    A = Buffer("A", (n,), "int32")
    i = Var("i")
    nonneg = PrimFunc((A,), For(i, 0, n, ForKind.SERIAL, BufferStore(A, i // 4 + i % 4, (i,))))
    src = c_source(nonneg)
    assert "tc_floordiv" not in src
    assert "(i / 4)" in src
    assert "(i % 4)" in src
    s = Var("s")  # a scalar parameter of unknown sign
    store = BufferStore(A, (i - s) // 3 + (i - s) % 3, (i,))
    neg = PrimFunc((A, s), For(i, 0, n, ForKind.SERIAL, store))
    src = c_source(neg)
    assert "tc_floordiv_int32(" in src
    assert "tc_floormod_int32(" in src
    compile_shared(src)


def test_symbolic_shape_is_an_integer_argument():
    n = Var("n")
    A, B = Buffer("A", (n, 4), "float32"), Buffer("B", (n, 4), "float32")
    i, j = Var("i"), Var("j")
    body = For(
        i, 0, n, ForKind.SERIAL, For(j, 0, 4, ForKind.SERIAL, BufferStore(B, A[i, j], (i, j)))
    )
    src = c_source(PrimFunc((A, B), body, name="copy"))
    assert "void copy(const float* restrict A, float* restrict B, int32_t n)" in src
    compile_shared(src)


def test_large_allocations_on_heap_small_on_stack():
    A = Buffer("A", (8,), "float32")
    big, small = Buffer("big", (1 << 20,), "float32"), Buffer("small", (8,), "float32")
    i = Var("i")
    # big is touched at both ends, so lowering's buffer compaction keeps all of it
    body = Allocate(big, Allocate(small, For(i, 0, 8, ForKind.SERIAL, seq(
        BufferStore(small, FloatImm("float32", 1.0), (i,)),
        BufferStore(big, small[i], (i * 149796 + 3,)),
        BufferStore(big, small[i], (i,)),
        BufferStore(A, big[i], (i,))))))  # fmt: skip
    src = c_source(PrimFunc((A,), body))
    assert "tc_alloc(sizeof(float) * (size_t)(1048576))" in src
    assert "tc_release(big, sizeof(float) * (size_t)(1048576));" in src  # back to the pool
    assert "float small[8] __attribute__((aligned(64)));" in src
    compile_shared(src)


def test_module_functions_and_c_keyword_names():
    funcs = {"main": loop_func(ForKind.SERIAL), "double": loop_func(ForKind.SERIAL)}
    mod = tc.ir.IRModule(funcs)
    src = c_source(mod)
    assert "void main_(" in src
    assert "void double_(" in src


def test_thread_bound_loop_needs_emulation():
    A = Buffer("A", (32,), "float32")
    t = Var("t")
    store = BufferStore(A, FloatImm("float32", 1.0), (t,))
    f = PrimFunc((A,), For(t, 0, 32, ForKind.THREAD_BINDING, store, thread="threadIdx.x"))
    with pytest.raises(tc.errors.LowerError, match="emulate_gpu"):
        c_source(f)
    assert "for (int32_t t = 0; t < 32; ++t)" in c_source(f, emulate_gpu=True)
    with pytest.raises(CodegenError, match="GPU"):
        c_source(f, "cuda")

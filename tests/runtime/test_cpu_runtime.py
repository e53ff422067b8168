"""CPU runtime: build, run against numpy, argument checks, build errors, compile cache."""

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import BuildError
from tilecraft.ir import (
    Block,
    Buffer,
    BufferRegion,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    IterKind,
    IterVar,
    PrimFunc,
    Range,
    Var,
    block_realize,
    op,
    seq,
)
from tilecraft.runtime import ArgumentError, compile_shared
from tilecraft.runtime import compiler as compiler_mod


@pytest.fixture(autouse=True, scope="module")
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILECRAFT_CACHE_DIR", str(tmp_path_factory.mktemp("tc-cache")))
        yield


def elementwise(shape, dtype, fn, kinds=None, out_dtype=None, name="main"):
    """B[idx] = fn(A[idx]) over a loop nest with the given loop kinds."""
    A, B = Buffer("A", shape, dtype), Buffer("B", shape, out_dtype or dtype)
    loops = [Var(f"i{d}") for d in range(len(shape))]
    body = BufferStore(B, fn(A[tuple(loops)]), tuple(loops))
    for d in reversed(range(len(shape))):
        kind = (kinds or {}).get(d, ForKind.SERIAL)
        body = For(loops[d], 0, shape[d], kind, body)
    return PrimFunc((A, B), body, name=name)


def matmul(n, m, k, outer=ForKind.PARALLEL):
    A, B, C = (
        Buffer("A", (n, k), "float32"),
        Buffer("B", (k, m), "float32"),
        Buffer("C", (n, m), "float32"),
    )
    i, j, r = Var("i"), Var("j"), Var("r")
    vi, vj = (
        IterVar(Var("vi"), Range(0, n), IterKind.SPATIAL),
        IterVar(Var("vj"), Range(0, m), IterKind.SPATIAL),
    )
    vk = IterVar(Var("vk"), Range(0, k), IterKind.REDUCE)
    a, b, c = vi.var, vj.var, vk.var
    blk = Block(
        "C",
        (vi, vj, vk),
        (BufferRegion.point(A, [a, c]), BufferRegion.point(B, [c, b])),
        (BufferRegion.point(C, [a, b]),),
        BufferStore(C, C[a, b] + A[a, c] * B[c, b], (a, b)),
        init=BufferStore(C, FloatImm("float32", 0.0), (a, b)),
    )
    nest = For(
        i,
        0,
        n,
        outer,
        For(j, 0, m, ForKind.SERIAL, For(r, 0, k, ForKind.SERIAL, block_realize(blk, [i, j, r]))),
    )
    root = Block("root", (), (), (), nest)
    return PrimFunc((A, B, C), block_realize(root))  # fmt: skip


def test_vector_add_and_source():
    n = 37
    A, B, C = (Buffer(x, (n,), "float32") for x in "ABC")
    i = Var("i")
    f = PrimFunc((A, B, C), For(i, 0, n, ForKind.VECTORIZED, BufferStore(C, A[i] + B[i], (i,))))
    lib = tc.build(f)
    a, b = np.random.rand(n).astype("float32"), np.random.rand(n).astype("float32")
    c = np.zeros(n, "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    assert "#pragma omp simd" in lib.source


def test_matmul_reduction_with_init():
    lib = tc.build(matmul(13, 7, 19))
    a, b = np.random.rand(13, 19).astype("float32"), np.random.rand(19, 7).astype("float32")
    c = np.full((13, 7), 99.0, "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_intermediate_buffer_and_unrolled_loop():
    n = 8
    A, C = Buffer("A", (n,), "float32"), Buffer("C", (n,), "float32")
    Tmp = Buffer("T", (n,), "float32")
    i, j = Var("i"), Var("j")
    body = seq(For(i, 0, n, ForKind.UNROLLED, BufferStore(Tmp, A[i] * 3.0, (i,))),
               For(j, 0, n, ForKind.PARALLEL,
                   BufferStore(C, Tmp[n - 1 - j] + 1.0, (j,))))  # fmt: skip
    f = PrimFunc((A, C), block_realize(Block("root", (), (), (), body, alloc_buffers=(Tmp,))))
    tc.testing.check_numeric(f, lambda a: a[::-1] * 3.0 + 1.0)


def test_symbolic_shapes():
    n = Var("n")
    A, B = Buffer("A", (n, 3), "float32"), Buffer("B", (n, 3), "float32")
    i, j = Var("i"), Var("j")
    body = For(
        i,
        0,
        n,
        ForKind.PARALLEL,
        For(j, 0, 3, ForKind.SERIAL, BufferStore(B, A[i, j] * 2.0, (i, j))),
    )
    lib = tc.build(PrimFunc((A, B), body))
    for rows in (1, 7, 13):
        a = np.random.rand(rows, 3).astype("float32")
        b = np.zeros_like(a)
        lib["main"](a, b)
        np.testing.assert_allclose(b, a * 2)
    with pytest.raises(ArgumentError, match=r"'B'.*n = 7"):
        lib["main"](np.zeros((7, 3), "float32"), np.zeros((6, 3), "float32"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_storage(dtype):
    f = elementwise((33,), dtype, lambda x: op.exp(x) * x, kinds={0: ForKind.VECTORIZED})
    tc.testing.check_numeric(f, lambda a: np.exp(a.astype("float32")) * a)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_dtypes(dtype):
    f = elementwise((4, 5), dtype, lambda x: x * 3 + 1)
    ref = tc.testing.check_numeric(f, lambda a: (a * 3 + 1).astype(dtype))
    assert ref[0].dtype == np.dtype(dtype)


def test_floordiv_floormod_negative_like_numpy():
    n = 24
    A, B, C = Buffer("A", (n,), "int32"), Buffer("B", (n,), "int32"), Buffer("C", (n,), "int32")
    s, i = Var("s"), Var("i")
    body = For(i, 0, n, ForKind.SERIAL, seq(BufferStore(B, (A[i] - s) // 5, (i,)),
                                            BufferStore(C, (A[i] - s) % -3, (i,))))  # fmt: skip
    lib = tc.build(PrimFunc((A, B, C, s), body))
    a = np.arange(n, dtype="int32")
    b, c = np.zeros(n, "int32"), np.zeros(n, "int32")
    lib["main"](a, b, c, 11)
    np.testing.assert_array_equal(b, (a - 11) // 5)
    np.testing.assert_array_equal(c, (a - 11) % -3)


def test_dlpack_arguments():
    class Tensor:  # a minimal DLPack producer that is not an ndarray
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kw):
            return self.arr.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    f = elementwise((10,), "float32", lambda x: x + 1.0)
    a, b = np.arange(10, dtype="float32"), np.zeros(10, "float32")
    tc.build(f)["main"](Tensor(a), Tensor(b))
    np.testing.assert_array_equal(b, a + 1)


def test_argument_errors_are_clear():
    lib = tc.build(elementwise((4, 5), "float32", lambda x: x + 1.0))
    fn = lib["main"]
    a, b = np.zeros((4, 5), "float32"), np.zeros((4, 5), "float32")
    with pytest.raises(ArgumentError, match=r"expected 2 arguments \(A, B\), got 1"):
        fn(a)
    with pytest.raises(ArgumentError, match=r"'B'.*expected shape \(4, 5\).*got \(5, 4\)"):
        fn(a, np.zeros((5, 4), "float32"))
    with pytest.raises(TypeError, match=r"'A'.*expected dtype float32, got float64"):
        fn(np.zeros((4, 5)), b)
    with pytest.raises(ArgumentError, match="C-contiguous"):
        fn(np.zeros((5, 4), "float32").T, b)
    ro = np.zeros((4, 5), "float32")
    ro.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        fn(a, ro)
    with pytest.raises(ArgumentError, match="share memory"):
        fn(b, b)
    with pytest.raises(TypeError, match="numpy array or a DLPack tensor"):
        fn([1, 2], b)
    with pytest.raises(KeyError, match="no function 'nope'"):
        lib["nope"]
    fn(a, b)  # the process survived; a correct call still works
    assert (b == 1).all()


def test_time_evaluator():
    lib = tc.build(elementwise((256,), "float32", lambda x: x * 2.0))
    a, b = np.ones(256, "float32"), np.zeros(256, "float32")
    res = lib.time_evaluator("main", number=3, repeat=4, min_repeat_ms=1)(a, b)
    assert len(res.results) == 4
    assert res.median > 0
    assert res.std >= 0
    assert min(res.results) <= res.mean <= max(res.results)


def test_build_error_shows_command_and_stderr():
    with pytest.raises(BuildError) as err:
        compile_shared("int broken( { return 0; }\n")
    assert err.value.command
    assert "error" in err.value.stderr
    assert "command:" in str(err.value)


def test_build_error_for_missing_compiler(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/tc-cc")
    with pytest.raises(BuildError, match="tc-cc"):
        compile_shared("int tc_unique_source_for_missing_cc(void) { return 1; }\n")


def test_second_build_hits_cache(monkeypatch):
    f = elementwise((9,), "float32", lambda x: x - 4.0)
    tc.build(f)

    def no_compiler(command):
        raise AssertionError(f"compiler invoked on a cached build: {command}")

    monkeypatch.setattr(compiler_mod, "run_compiler", no_compiler)
    lib = tc.build(elementwise((9,), "float32", lambda x: x - 4.0))
    a, b = np.ones(9, "float32"), np.zeros(9, "float32")
    lib["main"](a, b)
    assert (b == -3).all()


def test_concurrent_builds_of_same_source(tmp_path):
    script = textwrap.dedent("""
        import sys
        from tilecraft.runtime import compile_shared
        src = "int tc_concurrent(int x) { return x * 7; }\\n"
        print(compile_shared(src))
    """)
    root = str(Path(tc.__file__).resolve().parent.parent)
    env = {"TILECRAFT_CACHE_DIR": str(tmp_path), "PATH": os.environ["PATH"], "PYTHONPATH": root}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    paths = {o.strip() for o, _ in outs}
    assert len(paths) == 1
    lib = ctypes.CDLL(paths.pop())
    assert lib.tc_concurrent(6) == 42
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]  # no temp files left

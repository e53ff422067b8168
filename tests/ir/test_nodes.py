"""IR nodes validate themselves: malformed construction raises IRError with a clear message."""

from __future__ import annotations

import pytest

import tilecraft.ir as ir
from tilecraft.errors import IRError


def _bufs() -> tuple[ir.Buffer, ir.Buffer]:
    return ir.decl_buffer((16, 16), "float32", "A"), ir.decl_buffer((16, 16), "float32", "B")


def test_dtype_parsing_and_lanes() -> None:
    assert str(ir.dtype("f32")) == "float32"
    assert ir.dtype("float16x4").lanes == 4
    assert ir.dtype("float16x4").element_of() is ir.dtype("float16")
    assert ir.dtype("bfloat16").numpy_name() == "uint16"
    assert ir.dtype("int64") is ir.dtype("int64")
    for bad in ("float8", "int7", "bool8", "complex64", "", "float32x0"):
        with pytest.raises(IRError, match="dtype"):
            ir.dtype(bad)


def test_operators_build_ir_and_eq_is_identity() -> None:
    i, j = ir.Var("i"), ir.Var("j")
    assert isinstance((i * 16 + j) // 16, ir.FloorDiv)
    assert isinstance(i % 4, ir.FloorMod)
    assert isinstance(i < 3, ir.LT)
    assert isinstance(i.eq(3), ir.EQ)
    assert isinstance(i.ne(3), ir.NE)
    assert (i == i) is True
    assert (i == j) is False
    with pytest.raises(TypeError, match="if_then_else"):
        bool(i < 3)


def test_constants_follow_the_other_operand() -> None:
    x = ir.Var("x", "float16")
    e = x * 2
    assert isinstance(e.b, ir.FloatImm)
    assert e.b.dtype == ir.dtype("float16")
    n = ir.Var("n", "int64")
    assert (n + 1).b.dtype == ir.dtype("int64")
    with pytest.raises(IRError, match="float"):
        _ = n + 1.5


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ir.Add(ir.Var("a", "int32"), ir.Var("b", "int64")), "dtypes differ"),
        (lambda: ir.FloorDiv(ir.Var("a", "float32"), ir.Var("b", "float32")), "integer"),
        (lambda: ir.IntImm("int8", 300), "does not fit"),
        (lambda: ir.IntImm("float32", 1), "integer"),
        (lambda: ir.FloatImm("int32", 1.0), "float"),
        (lambda: ir.And(ir.Var("a"), ir.Var("b")), "bool"),
        (
            lambda: ir.Select(ir.Var("c"), ir.const(1.0, "float32"), ir.const(2.0, "float32")),
            "bool",
        ),
        (lambda: ir.Call("float32", "exp", (ir.Var("a"),)), "floating"),
        (lambda: ir.Call("float32", "nosuch", ()), "unknown intrinsic"),
        (lambda: ir.Call("float32", "pow", (ir.const(1.0, "float32"),)), "expects 2"),
        (lambda: ir.Var(""), "non-empty"),
        (lambda: ir.Range(ir.Var("a", "int32"), ir.Var("b", "int64")), "differ"),
        (lambda: ir.Buffer("A", (4, 4), "float32", "texture"), "unknown scope"),
        (lambda: ir.Buffer("A", (-1,), "float32"), "negative"),
    ],
)
def test_malformed_expressions(build, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IRError, match=message):
        build()


def test_malformed_statements() -> None:
    A, B = _bufs()
    i, j = ir.Var("i"), ir.Var("j")
    with pytest.raises(IRError, match="dtype mismatch"):
        ir.BufferStore(B, i, (i, j))
    with pytest.raises(IRError, match="rank"):
        ir.BufferStore(B, A[i, j], (i,))
    store = ir.BufferStore(B, A[i, j], (i, j))
    with pytest.raises(IRError, match="thread="):
        ir.For(i, 0, 16, ir.ForKind.THREAD_BINDING, store)
    with pytest.raises(IRError, match="thread="):
        ir.For(i, 0, 16, ir.ForKind.SERIAL, store, thread="threadIdx.x")
    with pytest.raises(IRError, match="unknown thread tag"):
        ir.For(i, 0, 16, ir.ForKind.THREAD_BINDING, store, thread="warpIdx.x")
    with pytest.raises(IRError, match="domain"):
        ir.IterVar(ir.Var("vi"), None, ir.IterKind.SPATIAL)  # type: ignore[arg-type]
    with pytest.raises(IRError, match="at least one"):
        ir.SeqStmt(())
    with pytest.raises(IRError, match="condition"):
        ir.IfThenElse(i, store)
    with pytest.raises(IRError, match="duplicate parameter names"):
        ir.PrimFunc((A, ir.decl_buffer((2,), "float32", "A")), store)
    blk = ir.Block("B", (), (), (), store)
    with pytest.raises(IRError, match="values for"):
        ir.BlockRealize((i,), ir.const(True, "bool"), blk)
    with pytest.raises(IRError, match="predicate"):
        ir.BlockRealize((), i, blk)


def test_update_returns_self_when_unchanged() -> None:
    A, _B = _bufs()
    i = ir.Var("i")
    load = A[i, i]
    assert load.update(indices=load.indices) is load
    other = load.update(indices=(i, ir.const(0)))
    assert other is not load
    assert other.buffer is A


def test_module_is_immutable_and_renames_functions() -> None:
    A, B = _bufs()
    i = ir.Var("i")
    f = ir.PrimFunc((A, B), ir.BufferStore(B, A[i, i], (i, i)))
    mod = ir.IRModule({"k": f})
    assert mod["k"].name == "k"
    mod2 = mod.with_function("k2", f)
    assert "k2" not in mod
    assert "k2" in mod2
    with pytest.raises(KeyError, match="no function"):
        mod["missing"]


def test_substitute_and_collect_vars_keep_buffer_identity() -> None:
    n = ir.Var("n")
    A = ir.decl_buffer((n,), "float32", "A")
    i, k = ir.Var("i"), ir.Var("k")
    body = ir.BufferStore(A, A[i] + A[i], (i,))
    out = ir.substitute(body, {i: k})
    assert out.buffer is A
    assert out.value.a.buffer is out.value.b.buffer
    assert [v.name for v in ir.collect_vars(out)] == ["n", "k"]
    m = ir.Var("m")
    out2 = ir.substitute(body, {n: m})
    assert out2.buffer is not A
    assert out2.buffer.shape[0] is m
    assert out2.value.a.buffer is out2.buffer


def test_every_intrinsic_has_a_helper() -> None:
    from tilecraft.ir import op

    x = ir.Var("x", "float32")
    for name, intr in ir.INTRINSICS.items():
        call = getattr(op, name)(*([x] * intr.arity))
        assert isinstance(call, ir.Call)
        assert call.op == name
        assert call.dtype == (ir.dtype("bool") if intr.predicate else x.dtype)


def test_a_buffer_where_a_tuple_belongs_is_an_error_not_a_hang() -> None:
    """Regression: Buffer.__getitem__ made Python iterate A[0], A[1], ... forever."""
    from tilecraft.errors import IRError
    from tilecraft.ir import Buffer, BufferRegion

    buf = Buffer("A", (4,), "float32")
    with pytest.raises(IRError, match="not iterable"):
        BufferRegion(buf, buf)  # type: ignore[arg-type]
    with pytest.raises(IRError, match="not iterable"):
        tuple(buf)

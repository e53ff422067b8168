"""Printing then parsing is exact for every IR node class (and for tricky corners of each)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

import tilecraft as tc
from tilecraft import ir
from tilecraft.ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Evaluate,
    Expr,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRModule,
    IterKind,
    IterVar,
    LetStmt,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
)
from tilecraft.ir.visitor import iter_children
from tilecraft.script.printer import free_symbols

ABSTRACT = {"Node", "Expr", "Stmt", "BinaryOp", "CmpOp", "BaseFunc"}

n = Var("n", "int32")
m = Var("m", "int32")
x = Var("x", "float32")
b = Var("b", "bool")
A = Buffer("A", (n, 16), "float32")


def check_roundtrip(node: PrimFunc | IRModule) -> str:
    """Print, parse, compare structurally; printing the parsed IR gives the same text."""
    text = node.script()
    back = tc.script.parse(text, verify=False)  # nodes, not necessarily valid programs
    assert type(back) is type(node)
    # a parsed function has new objects for variables/buffers it uses but never binds, so only
    # those are matched by position; everything bound compares up to renaming
    assert tc.ir.structural_equal(node, back, map_free_vars=_has_free_symbols(node)), text
    assert back.script() == text
    return text


def _has_free_symbols(node: PrimFunc | IRModule) -> bool:
    funcs = list(node.functions.values()) if isinstance(node, IRModule) else [node]
    for f in funcs:
        assert isinstance(f, PrimFunc)
        free_vars, free_bufs = free_symbols(f)
        shape_vars = {id(s) for p in f.buffer_params for s in p.shape}
        if free_bufs or any(id(v) not in shape_vars for v in free_vars):
            return True
    return False


def in_func(body: Stmt, *params: Buffer | Var) -> PrimFunc:
    return PrimFunc(params, body, name="f")


def store_expr(e: Expr) -> PrimFunc:
    """A function storing ``e`` into ``Out[0]`` (free variables get declared)."""
    out = Buffer("Out", (1,), e.dtype)
    return in_func(BufferStore(out, e, (ir.const(0),)), A, out)


def block_func(kind: IterKind = IterKind.SPATIAL) -> PrimFunc:
    i, vi = Var("i"), Var("vi")
    out = Buffer("Out", (16,), "float32")
    region = BufferRegion(A, (Range(n - 4, 4), Range(vi, 1)))
    blk = Block(
        "B",
        (IterVar(vi, Range(0, 16), kind),),
        (region,),
        (BufferRegion.point(out, [vi]),),
        BufferStore(out, A[n - 1, vi], (vi,)),
    )
    loop = For(i, 0, 16, ForKind.SERIAL, BlockRealize((i,), i < 16, blk))
    root = Block("root", (), (), (), loop)
    return in_func(BlockRealize((), ir.const(True, "bool"), root), A, out, n)


BUILDERS: dict[str, Callable[[], PrimFunc | IRModule]] = {
    "Var": lambda: store_expr(x),
    "IntImm": lambda: store_expr(IntImm("int64", -7)),
    "FloatImm": lambda: store_expr(ir.FloatImm("float16", 0.1)),
    "Add": lambda: store_expr(n + m),
    "Sub": lambda: store_expr(n - m),
    "Mul": lambda: store_expr(n * m),
    "Div": lambda: store_expr(x / 3.0),
    "FloorDiv": lambda: store_expr(n // 4),
    "FloorMod": lambda: store_expr(n % 4),
    "Min": lambda: store_expr(ir.Min(n, m)),
    "Max": lambda: store_expr(ir.Max(x, x)),
    "EQ": lambda: store_expr(n.eq(m)),
    "NE": lambda: store_expr(n.ne(m)),
    "LT": lambda: store_expr(n < m),
    "LE": lambda: store_expr(n <= m),
    "GT": lambda: store_expr(n > m),
    "GE": lambda: store_expr(n >= m),
    "And": lambda: store_expr(ir.And(b, n < m)),
    "Or": lambda: store_expr(ir.Or(b, b)),
    "Not": lambda: store_expr(ir.Not(b)),
    "Select": lambda: store_expr(ir.Select(b, x, x + 1.0)),
    "Cast": lambda: store_expr(ir.Cast("float16", x)),
    "Call": lambda: store_expr(ir.Call("float32", "pow", (x, ir.FloatImm("float32", 2.0)))),
    "BufferLoad": lambda: store_expr(A[n - 1, 3]),
    "Range": block_func,
    "Buffer": lambda: store_expr(A[0, 0]),
    "BufferRegion": block_func,
    "IterVar": lambda: block_func(IterKind.OPAQUE),
    "Block": block_func,
    "BlockRealize": block_func,
    "BufferStore": lambda: store_expr(x),
    "For": lambda: in_func(For(m, 2, n, ForKind.PARALLEL, Evaluate(m)), n),
    "SeqStmt": lambda: in_func(SeqStmt((Evaluate(n), Evaluate(n + 1))), n),
    "IfThenElse": lambda: in_func(IfThenElse(n < 3, Evaluate(1), Evaluate(2)), n),
    "Evaluate": lambda: in_func(Evaluate(0)),
    "LetStmt": lambda: in_func(LetStmt(m, n * 2, Evaluate(m)), n),
    "Allocate": lambda: in_func(Allocate(Buffer("tmp", (n,), "float16", "shared"), Evaluate(1)), n),
    "PrimFunc": lambda: in_func(Evaluate(0)).with_attrs({"a": [1, "two", 3.5], "b": {"c": None}}),
    "IRModule": lambda: IRModule(
        {"f": in_func(Evaluate(0)), "g": in_func(Evaluate(1), n)}, {"version": 2}
    ),
}


def _contains(root: object, cls: type) -> bool:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, cls):
            return True
        stack.extend(iter_children(node))  # type: ignore[arg-type]
    return False


def test_every_node_class_has_a_builder() -> None:
    concrete = {
        name
        for name, obj in vars(ir).items()
        if isinstance(obj, type) and issubclass(obj, ir.Node) and name not in ABSTRACT
    }
    assert concrete == set(BUILDERS)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_node_roundtrip(name: str) -> None:
    node = BUILDERS[name]()
    assert _contains(node, getattr(ir, name))
    check_roundtrip(node)


CORNERS: dict[str, Callable[[], PrimFunc | IRModule]] = {
    "int32_min": lambda: store_expr(IntImm("int32", -(2**31))),
    "uint64_max": lambda: store_expr(IntImm("uint64", 2**64 - 1)),
    "bool_false": lambda: store_expr(ir.const(False, "bool")),
    "nan": lambda: store_expr(ir.FloatImm("float32", math.nan)),
    "inf": lambda: store_expr(ir.FloatImm("float64", math.inf)),
    "neg_inf": lambda: store_expr(ir.FloatImm("bfloat16", -math.inf)),
    "neg_zero": lambda: store_expr(ir.FloatImm("float32", -0.0)),
    "tiny": lambda: store_expr(ir.FloatImm("float64", 5e-324)),
    "right_assoc_sub": lambda: store_expr(n - (m - 1)),
    "right_assoc_add": lambda: store_expr(n + (m + 1)),
    "mul_of_sum": lambda: store_expr((n + 1) * (m - 2) // (n % 3)),
    "neg_literal": lambda: store_expr(ir.Sub(IntImm("int32", -3), n) * IntImm("int32", -2)),
    "negation": lambda: store_expr(-n),
    "cmp_of_cmp": lambda: store_expr(ir.EQ(n < m, b)),
    "not_in_cmp": lambda: store_expr(ir.NE(b, ir.Not(b))),
    "and_or": lambda: store_expr(ir.Or(ir.And(b, b), ir.And(b, ir.Or(b, b)))),
    "not_of_and": lambda: store_expr(ir.Not(ir.And(b, b))),
    "int64_arith": lambda: store_expr(Var("k", "int64") * IntImm("int64", 16) + 1),
    "vector_var": lambda: store_expr(Var("v", "float32x4")),
    "weird_names": lambda: store_expr(Var("a.b", "int32") + Var("1x", "int32") + Var("for")),
    "same_name_vars": lambda: store_expr(Var("n") + n),
    "reserved_names": lambda: store_expr(Var("T") + Var("range")),
    "buffer_named_like_var": lambda: store_expr(Buffer("n", (4,), "int32")[n]),
    "zero_dim_buffer": lambda: store_expr(Buffer("s", (), "float32")[()]),
    "nested_seq": lambda: in_func(
        SeqStmt((Evaluate(0), SeqStmt((Evaluate(1), Evaluate(2))), Evaluate(3)))
    ),
    "single_seq": lambda: in_func(SeqStmt((Evaluate(0),))),
    "let_not_tail": lambda: in_func(
        SeqStmt((LetStmt(m, n + 1, SeqStmt((Evaluate(m), Evaluate(m)))), Evaluate(n))), n
    ),
    "let_tail_in_seq": lambda: in_func(SeqStmt((Evaluate(n), LetStmt(m, n, Evaluate(m)))), n),
    "let_chain": lambda: in_func(LetStmt(m, n, LetStmt(Var("m"), m + 1, Evaluate(m))), n),
    "allocate_not_tail": lambda: in_func(
        SeqStmt((Allocate(Buffer("t", (4,), "int32", "local"), Evaluate(0)), Evaluate(1)))
    ),
    "if_else_if": lambda: in_func(
        IfThenElse(n < 1, Evaluate(0), IfThenElse(n < 2, Evaluate(1), Evaluate(2))), n
    ),
    "sibling_loops_same_name": lambda: in_func(
        SeqStmt(tuple(For(Var("i"), 0, 4, ForKind.SERIAL, Evaluate(n)) for _ in range(2))), n
    ),
    "shadowing_loops": lambda: in_func(
        For(Var("i"), 0, 4, ForKind.SERIAL, For(Var("i"), 0, 4, ForKind.SERIAL, Evaluate(0)))
    ),
    "loop_kinds": lambda: in_func(_all_loop_kinds()),
    "symbolic_loop_min": lambda: in_func(For(m, n * 2, n + 3, ForKind.UNROLLED, Evaluate(m)), n),
    "int64_loop": lambda: in_func(
        For(Var("i", "int64"), IntImm("int64", 3), IntImm("int64", 5), ForKind.SERIAL, Evaluate(0))
    ),
    "free_buffer": lambda: in_func(BufferStore(A, ir.FloatImm("float32", 1.0), (n, 0))),
    "scalar_param_after_buffer": lambda: in_func(Evaluate(A[n - 1, 0]), A, n),
    "bare_block": lambda: in_func(
        Block("b", (IterVar(m, Range(0, 4), IterKind.SPATIAL),), (), (), Evaluate(m))
    ),
    "block_everything": lambda: _block_everything(),
    "empty_module": lambda: IRModule({}),
    "module_attrs_only": lambda: IRModule({}, {"x": [1, [2, 3]], "inf": float("inf")}),
}


def _dependent_grid() -> PrimFunc:
    i, j = Var("i"), Var("j")
    inner = For(j, 0, i, ForKind.SERIAL, Evaluate(j))
    return in_func(For(i, 0, 8, ForKind.SERIAL, For(Var("k"), 0, 2, ForKind.SERIAL, inner)))


CORNERS["dependent_grid"] = _dependent_grid


def _all_loop_kinds() -> Stmt:
    body: Stmt = Evaluate(0)
    for kind, thread in [
        (ForKind.SERIAL, None),
        (ForKind.PARALLEL, None),
        (ForKind.VECTORIZED, None),
        (ForKind.UNROLLED, None),
        (ForKind.THREAD_BINDING, "threadIdx.x"),
        (ForKind.THREAD_BINDING, "blockIdx.y"),
    ]:
        body = For(Var("i"), 0, 4, kind, body, thread, {"pragma": 1, "s": "x"})
    return For(Var("i"), 1, 4, ForKind.SERIAL, body)


def _block_everything() -> PrimFunc:
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    loc = Buffer("loc", (4,), "float32", "local")
    out = Buffer("Out", (n, 16), "float32")
    blk = Block(
        "C",
        (IterVar(vi, Range(n - 8, 8), IterKind.SPATIAL), IterVar(vj, Range(2, 4), IterKind.REDUCE)),
        (BufferRegion(A, (Range(vi * 2, n - vi), Range(0, 16))), BufferRegion.full(loc)),
        (BufferRegion(out, (Range(vi, 1), Range(vj, IntImm("int32", 1)))),),
        SeqStmt((BufferStore(loc, A[vi, vj], (0,)), BufferStore(out, loc[0], (vi, vj)))),
        init=BufferStore(out, ir.FloatImm("float32", 0.0), (vi, vj)),
        alloc_buffers=(loc,),
        annotations={"meta_schedule.tiling": "SSR", "n": 3},
    )
    realize = BlockRealize((i + n - 8, j + 2), ir.And(i < 8, j < 4), blk)
    nest = For(i, 0, 8, ForKind.SERIAL, For(j, 0, 4, ForKind.SERIAL, realize))
    root = Block("root", (), (), (), nest, alloc_buffers=(Buffer("unused", (2,), "int8"),))
    return in_func(BlockRealize((), ir.const(True, "bool"), root), A, out, n)


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_corner_roundtrip(name: str) -> None:
    node = CORNERS[name]()
    assert node is not None
    check_roundtrip(node)


def test_names_are_made_unique() -> None:
    text = check_roundtrip(CORNERS["same_name_vars"]())
    assert "n_1 = T.int32()" in text
    text = check_roundtrip(CORNERS["shadowing_loops"]())
    assert "for i, i_1 in T.grid(4, 4):" in text
    text = check_roundtrip(CORNERS["sibling_loops_same_name"]())
    assert "i_1" not in text  # sibling scopes do not overlap: both keep their name
    text = check_roundtrip(CORNERS["reserved_names"]())
    assert "T_1 = T.int32()" in text
    assert "range_1 = T.int32()" in text


def test_printed_forms() -> None:
    text = check_roundtrip(CORNERS["nan"]())
    assert 'T.float32("nan")' in text
    assert "T.int64(-7)" in check_roundtrip(BUILDERS["IntImm"]())
    text = check_roundtrip(CORNERS["loop_kinds"]())
    assert 'T.thread_binding(4, thread="threadIdx.x", annotations={"pragma": 1, "s": "x"})' in text
    assert "for i in range(1, 5):" in text
    text = check_roundtrip(CORNERS["symbolic_loop_min"]())
    assert "T.unroll(n * 2, n * 2 + (n + 3))" in text
    text = check_roundtrip(_block_everything())
    assert "T.reads(A[vi * 2:vi * 2 + (n - vi), 0:16], loc[0:4])" in text
    assert "vi = T.axis.spatial((n - 8, n - 8 + 8), i + n - 8)" in text
    assert "T.where(i < 8 and j < 4)" in text
    text = check_roundtrip(CORNERS["dependent_grid"]())
    assert "for i, k in T.grid(8, 2):" in text
    assert "for j in range(i):" in text


def test_non_function_nodes_print() -> None:
    assert (n + 1).script() == "n + 1"
    assert repr(A) == 'A: T.Buffer((n, 16), "float32")'
    assert "A[n - 1, 3]" in repr(BufferStore(A, A[n - 1, 3], (n - 1, 3)))
    assert tc.script.to_script(Range(0, n)) == "T.Range(0, n)"

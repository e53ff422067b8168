"""Structural equality (alpha-equivalence) and the stable structural hash."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tilecraft.errors import IRError
from tilecraft.ir import (
    Add,
    Allocate,
    Attrs,
    Block,
    Buffer,
    BufferRegion,
    BufferStore,
    Call,
    Evaluate,
    Expr,
    FloatImm,
    For,
    ForKind,
    IntImm,
    IRModule,
    IterKind,
    IterVar,
    LetStmt,
    Max,
    Mul,
    Node,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    block_realize,
    dtype,
    structural_hash,
)
from tilecraft.ir import structural_equal as _structural_equal
from tilecraft.ir.structural import assert_structural_equal, register_node

REPO = Path(__file__).resolve().parents[2]


def structural_equal(a: object, b: object, map_free_vars: bool = False) -> bool:
    """``tc.ir.structural_equal``, checking on every call of this file that the hash agrees.

    The digest numbers variables and buffers by first appearance, free or bound, so two
    values hash equal exactly when they are equal with free variables matched by position.
    """
    result = _structural_equal(a, b, map_free_vars)
    mapped = _structural_equal(a, b, map_free_vars=True)
    assert (structural_hash(a) == structural_hash(b)) == mapped, (a, b)
    assert mapped or not result
    return result


# a three-block softmax with knobs for every kind of difference -------------------------------
def softmax(tag: str = "", **kw: Any) -> PrimFunc:
    """Row softmax of an (n, m) matrix; ``tag`` renames every variable and buffer."""
    n, m = kw.get("n", 64), kw.get("m", 128)
    dt = kw.get("dt", "float32")
    f = dtype(dt)
    A = Buffer("A" + tag, (n, m), dt)
    B = Buffer("B" + tag, (n, m), dt)
    t_max = Buffer("T_max" + tag, (n,), dt, kw.get("scope", "global"))
    t_sum = Buffer("T_sum" + tag, (n,), dt)
    # "swap" reads B where A is read in the first block (and writes the result to A)
    src, dst = (B, A) if kw.get("swap") else (A, B)

    def loop2(block: Block, ext: tuple[Any, Any], first: dict[str, Any] | None = None) -> Stmt:
        i, k = Var("i" + tag), Var("k" + tag)
        inner = For(k, 0, ext[1], ForKind.SERIAL, block_realize(block, [i, k]))
        return For(i, 0, ext[0], body=inner, **({"kind": ForKind.SERIAL} | (first or {})))

    def iters(kinds: tuple[IterKind, IterKind]) -> tuple[IterVar, IterVar, Var, Var]:
        vi, vk = Var("vi" + tag), Var("vk" + tag)
        return (IterVar(vi, Range(0, n), kinds[0]), IterVar(vk, Range(0, m), kinds[1]), vi, vk)

    # block 1: running max
    iv0, iv1, vi, vk = iters((IterKind.SPATIAL, kw.get("iter_kind", IterKind.REDUCE)))
    b_max = Block(
        kw.get("block_name", "T_max"), (iv0, iv1),
        (BufferRegion(src, (Range(vi, 1), Range(vk, 1))),), (BufferRegion(t_max, (Range(vi, 1),)),),
        BufferStore(t_max, kw.get("max_op", Max)(t_max[vi], src[vi, vk]), (vi,)),
        init=BufferStore(t_max, FloatImm(f, kw.get("init", -math.inf)), (vi,)),
    )  # fmt: skip
    # block 2: sum of exponentials
    iv0, iv1, vi, vk = iters((IterKind.SPATIAL, IterKind.REDUCE))
    e = Call(f, "exp", (Sub(src[vi, vk], t_max[vi]),))
    b_sum = Block(
        "T_sum", (iv0, iv1),
        (BufferRegion(src, (Range(vi, 1), Range(vk, 1))), BufferRegion(t_max, (Range(vi, 1),))),
        (BufferRegion(t_sum, (Range(vi, 1),)),),
        BufferStore(t_sum, t_sum[vi] + e, (vi,)),
        init=BufferStore(t_sum, FloatImm(f, 0.0), (vi,)),
    )  # fmt: skip
    # block 3: normalise
    iv0, iv1, vi, vj = iters((IterKind.SPATIAL, IterKind.SPATIAL))
    e = Call(f, "exp", (Sub(src[vi, vj], t_max[vi]),))
    b_norm = Block(
        "T_softmax", (iv0, iv1),
        (BufferRegion(src, (Range(vi, 1), Range(vj, 1))), BufferRegion(t_max, (Range(vi, 1),)),
         BufferRegion(t_sum, (Range(vi, 1),))),
        (BufferRegion(dst, (Range(vi, 1), Range(vj, 1))),),
        BufferStore(dst, e / t_sum[vi], (vi, vj)),
    )  # fmt: skip
    first = kw.get("first_loop")
    body = SeqStmt((loop2(b_max, (n, m), first), loop2(b_sum, (n, m)), loop2(b_norm, (n, m))))
    root = Block("root", (), (), (), body, alloc_buffers=(t_max, t_sum))
    return PrimFunc((A, B), block_realize(root), attrs=kw.get("attrs", {"global_symbol": "sm"}),
                    name="softmax" + tag)  # fmt: skip


def check_different(a: object, b: object) -> None:
    assert not structural_equal(a, b)
    assert not structural_equal(b, a)
    assert structural_hash(a) != structural_hash(b)


# alpha-equivalence ---------------------------------------------------------------------------
def test_renamed_function_is_equal_and_hashes_equal() -> None:
    a, b = softmax(), softmax("_renamed")
    assert a.params[0].name != b.params[0].name
    assert structural_equal(a, b)
    assert structural_equal(b, a)
    assert structural_hash(a) == structural_hash(b)
    assert_structural_equal(a, b)


def test_equal_to_itself_and_reflexive_on_parts() -> None:
    a = softmax()
    assert structural_equal(a, a)
    assert structural_equal(a.body, a.body)
    assert structural_hash(a) == structural_hash(a)


VARIANTS: dict[str, dict[str, Any]] = {
    "shape": {"n": 32},
    "inner_extent": {"m": 256},
    "dtype": {"dt": "float16"},
    "scope": {"scope": "shared"},
    "loop_kind": {"first_loop": {"kind": ForKind.PARALLEL}},
    "thread_tag": {"first_loop": {"kind": ForKind.THREAD_BINDING, "thread": "blockIdx.x"}},
    "annotation": {"first_loop": {"annotations": {"pragma_unroll": 4}}},
    "annotation_value": {"first_loop": {"annotations": {"pragma_unroll": 8}}},
    "annotation_type": {"first_loop": {"annotations": {"pragma_unroll": 4.0}}},
    "constant": {"init": -1e30},
    "operator": {"max_op": Add},
    "block_name": {"block_name": "T_max2"},
    "iter_kind": {"iter_kind": IterKind.SPATIAL},
    "swapped_buffers": {"swap": True},
    "func_attrs": {"attrs": {"global_symbol": "other"}},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_kind_of_difference_is_unequal_and_hashes_differently(name: str) -> None:
    base, variant = softmax(), softmax("_v", **VARIANTS[name])
    check_different(base, variant)
    # the variant is still equal to itself built with other names
    assert structural_equal(variant, softmax("_w", **VARIANTS[name]))


def test_variant_hashes_are_pairwise_distinct() -> None:
    digests = {name: structural_hash(softmax(**kw)) for name, kw in VARIANTS.items()}
    digests["base"] = structural_hash(softmax())
    assert len(set(digests.values())) == len(digests)
    thread_x = softmax(first_loop={"kind": ForKind.THREAD_BINDING, "thread": "threadIdx.x"})
    assert structural_hash(thread_x) != digests["thread_tag"]


def test_inconsistent_buffer_mapping_is_unequal() -> None:
    i = Var("i")
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    C, D = Buffer("C", (16,), "float32"), Buffer("D", (16,), "float32")
    out = Buffer("out", (16,), "float32")

    def fn(x: Buffer, y: Buffer) -> PrimFunc:
        loop = For(i, 0, 16, ForKind.SERIAL, BufferStore(out, x[i] + y[i], (i,)))
        return PrimFunc((A, B, out), loop)

    same, mixed = fn(A, A), fn(A, B)
    check_different(same, mixed)
    # and with fresh buffers the consistent pattern still matches
    other = PrimFunc(
        (C, D, out), For(i, 0, 16, ForKind.SERIAL, BufferStore(out, C[i] + C[i], (i,)))
    )
    assert structural_equal(same, other)
    with pytest.raises(AssertionError, match=r"Buffer 'A' matches 'A' elsewhere, not 'B'"):
        assert_structural_equal(same, mixed)


def test_inconsistent_var_mapping_is_unequal() -> None:
    i, j, x, y = Var("i"), Var("j"), Var("x"), Var("y")
    buf = Buffer("o", (8, 8), "int32")

    def nest(a: Var, b: Var, u: Expr) -> For:
        return For(
            a, 0, 8, ForKind.SERIAL, For(b, 0, 8, ForKind.SERIAL, BufferStore(buf, u, (a, b)))
        )

    assert structural_equal(nest(i, j, i * 2 + j), nest(x, y, x * 2 + y))
    check_different(nest(i, j, i * 2 + j), nest(x, y, y * 2 + x))


def test_shadowing_a_variable_is_not_confused_with_the_outer_one() -> None:
    i, i2, j = Var("i"), Var("i2"), Var("j")
    buf = Buffer("o", (8,), "int32")
    a = For(i, 0, 8, ForKind.SERIAL, For(i2, 0, 8, ForKind.SERIAL, BufferStore(buf, i, (i,))))
    b = For(j, 0, 8, ForKind.SERIAL, For(j, 0, 8, ForKind.SERIAL, BufferStore(buf, j, (j,))))
    check_different(a, b)


def test_free_variables_compare_by_identity_unless_mapped() -> None:
    x, y = Var("x"), Var("y")
    assert structural_equal(x + 1, x + 1)
    assert not structural_equal(x + 1, y + 1)
    assert structural_equal(x + 1, y + 1, map_free_vars=True)
    assert structural_hash(x + 1) == structural_hash(y + 1)  # names never enter the digest
    # mapping is consistent: x+x vs x+y stays unequal even when mapping free vars
    assert not structural_equal(x + x, x + y, map_free_vars=True)
    assert structural_hash(x + x) != structural_hash(x + y)
    assert not structural_equal(x + 1, Var("z", "int64") + IntImm(dtype("int64"), 1), True)
    with pytest.raises(AssertionError, match="map_free_vars=True"):
        assert_structural_equal(x + 1, y + 1)


def test_symbolic_shape_vars_are_defined_in_param_order() -> None:
    def fn(tag: str, share: bool) -> PrimFunc:
        n, m = Var("n" + tag), Var("m" + tag)
        A = Buffer("A" + tag, (n,), "float32")
        B = Buffer("B" + tag, (n if share else m,), "float32")
        i = Var("i" + tag)
        return PrimFunc((A, B), For(i, 0, n, ForKind.SERIAL, BufferStore(B, A[i], (i,))))

    assert structural_equal(fn("", True), fn("_2", True))
    assert structural_equal(fn("", False), fn("_2", False))
    check_different(fn("", True), fn("_2", False))


def test_scalar_param_must_match_the_shape_var_it_repeats() -> None:
    def fn(tag: str, same: bool) -> PrimFunc:
        n, k = Var("n" + tag), Var("k" + tag)
        A = Buffer("A" + tag, (n,), "float32")
        i = Var("i" + tag)
        ext = n if same else k
        return PrimFunc((A, n if same else k), For(i, 0, ext, ForKind.SERIAL, Evaluate(A[i])))

    assert structural_equal(fn("", True), fn("_2", True))
    check_different(fn("", True), fn("_2", False))


def _late_scalar(tag: str, extent_of: str = "n") -> PrimFunc:
    """``A: Buffer((n * 2,))`` before the scalar parameters ``n`` and ``m`` it may use."""
    n, m = Var("n" + tag), Var("m" + tag)
    A = Buffer("A" + tag, ((n if extent_of == "n" else m) * 2,), "float32")
    return PrimFunc((A, n, m), BufferStore(A, FloatImm(dtype("float32"), 1.0), (n,)))


def test_signature_defines_scalars_a_shape_uses_before_them() -> None:
    """Regression: a later scalar param in a compound extent was a free variable, so a
    function differed from its own print/parse round trip while the hashes agreed."""
    import tilecraft as tc

    f = _late_scalar("")
    back = tc.script.parse(f.script())
    assert structural_equal(f, back)
    assert structural_equal(f, _late_scalar("_2"))
    check_different(f, _late_scalar("", extent_of="m"))


def test_block_alloc_buffers_are_definitions_even_when_used_first() -> None:
    def fn(tag: str, scope: str = "local") -> Block:
        tmp = Buffer("tmp" + tag, (4,), "float32", scope)
        v = Var("v" + tag)
        body = For(v, 0, 4, ForKind.SERIAL, BufferStore(tmp, FloatImm(dtype("float32"), 1.0), (v,)))
        return Block("b", (), (), (BufferRegion.full(tmp),), body, alloc_buffers=(tmp,))

    assert structural_equal(fn(""), fn("_x"))
    check_different(fn(""), fn("_x", "shared"))


def test_let_and_allocate_define_their_variable_and_buffer() -> None:
    def fn(tag: str, value: int) -> Stmt:
        x = Var("x" + tag)
        buf = Buffer("t" + tag, (2,), "int32", "local")
        return LetStmt(x, IntImm(dtype("int32"), value), Allocate(buf, BufferStore(buf, x, (0,))))

    assert structural_equal(fn("", 3), fn("_y", 3))
    check_different(fn("", 3), fn("_y", 4))


def test_top_level_buffers_compare_as_declarations() -> None:
    a = Buffer("A", (16, 16), "float32")
    assert structural_equal(a, Buffer("B", (16, 16), "float32"))
    check_different(a, Buffer("B", (16, 8), "float32"))
    check_different(a, Buffer("B", (16, 16), "float32", "shared"))
    n = Var("n")
    assert structural_equal(Buffer("A", (n,), "int8"), Buffer("B", (Var("m"),), "int8"))


def test_leaf_values_are_type_strict() -> None:
    assert not structural_equal(Attrs({"a": 1}), Attrs({"a": True}))
    assert not structural_equal(Attrs({"a": 1}), Attrs({"a": 1.0}))
    assert structural_hash(Attrs({"a": 1})) != structural_hash(Attrs({"a": True}))
    assert structural_hash(Attrs({"a": 1})) != structural_hash(Attrs({"a": 1.0}))
    assert structural_equal(Attrs({"a": (1, "x")}), Attrs({"a": [1, "x"]}))
    nan, f32 = math.nan, dtype("float32")
    assert structural_equal(FloatImm(f32, nan), FloatImm(f32, nan))
    check_different(FloatImm(f32, 0.0), FloatImm(f32, -0.0))
    check_different(IntImm(dtype("int32"), 1), IntImm(dtype("int64"), 1))
    check_different(IntImm(dtype("int32"), 1), FloatImm(f32, 1.0))
    check_different(Range(0, 4), Range(0, 5))


def test_modules_compare_functions_by_name_and_attrs() -> None:
    m1 = IRModule({"sm": softmax(), "other": softmax(n=8)})
    m2 = IRModule({"other": softmax("_b", n=8), "sm": softmax("_b")})  # order does not matter
    assert structural_equal(m1, m2)
    assert structural_hash(m1) == structural_hash(m2)
    check_different(m1, IRModule({"sm2": softmax(), "other": softmax(n=8)}))
    check_different(m1, m1.with_attr("version", 2))
    check_different(m1, m1.without_function("other"))


def test_assert_structural_equal_names_the_first_mismatch_path() -> None:
    i = Var("i")
    buf = Buffer("A", (4,), "int32")

    def fn(c: int) -> PrimFunc:
        stores = (BufferStore(buf, i, (i,)), BufferStore(buf, i + c, (i,)))
        return PrimFunc((buf,), For(i, 0, 4, ForKind.SERIAL, SeqStmt(stores)))

    assert_structural_equal(fn(2), fn(2))
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(fn(2), fn(3))
    assert (
        str(info.value).splitlines()[0] == "IR differs at body.body.stmts[1].value.b.value: 2 != 3"
    )
    with pytest.raises(AssertionError, match=r"^IR differs at body\.extent\.value: 4 != 5"):
        assert_structural_equal(
            fn(2), fn(2).update(body=fn(2).body.update(extent=IntImm(dtype("int32"), 5)))
        )
    with pytest.raises(
        AssertionError, match=r"^IR differs at attrs\['global_symbol'\]: 'sm' != 'x'"
    ):
        assert_structural_equal(softmax(), softmax(attrs={"global_symbol": "x"}))
    with pytest.raises(
        AssertionError, match=r"^IR differs at body\.block\.body\.stmts\[0\]\.kind: "
    ):
        assert_structural_equal(softmax(), softmax(**VARIANTS["loop_kind"]))


def test_unregistered_node_class_is_an_ir_error() -> None:
    @dataclass(frozen=True, slots=True, eq=False)
    class Stray(Expr):
        value: int
        dtype: Any = "int32"

    with pytest.raises(IRError, match="not a registered IR node"):
        structural_hash(Stray(1))
    with pytest.raises(IRError, match="not a registered IR node"):
        structural_equal(Stray(1), Stray(1))


def test_registered_node_class_takes_part_in_equality_and_hash() -> None:
    @dataclass(frozen=True, slots=True, eq=False)
    class TestBind(Stmt):  # binds ``var`` in ``body`` like a graph-level binding would
        var: Var
        value: Expr
        body: Stmt

    register_node(TestBind, defines=("var",), tag="test_structural.TestBind")
    out = Buffer("o", (1,), "int32")

    def fn(tag: str, c: int) -> TestBind:
        v = Var("v" + tag)
        return TestBind(v, IntImm(dtype("int32"), c), BufferStore(out, v, (0,)))

    assert structural_equal(fn("", 1), fn("_r", 1))
    assert structural_hash(fn("", 1)) == structural_hash(fn("_r", 1))
    check_different(fn("", 1), fn("_r", 2))
    with pytest.raises(IRError, match="unknown fields"):
        register_node(TestBind, defines=("nope",))


def test_every_ir_node_class_is_registered() -> None:
    from tilecraft.ir.structural import registered_classes

    found: set[type] = set()
    todo = list(Node.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        module = sys.modules[cls.__module__]
        if cls.__module__.startswith("tilecraft.ir") and getattr(module, cls.__name__, None) is cls:
            found.add(cls)
    concrete = {c for c in found if not any(issubclass(d, c) and d is not c for d in found)}
    missing = sorted(c.__name__ for c in concrete - set(registered_classes()))
    assert not missing, f"register these node classes in tilecraft.ir.structural: {missing}"
    assert len(concrete) >= 38


# stability -----------------------------------------------------------------------------------
PINNED_SOFTMAX = "7c4f911ee169d45718a56950e2282707"


def test_pinned_digest_of_a_fixed_function() -> None:
    digest = structural_hash(softmax())
    assert len(digest) == 32
    assert all(c in "0123456789abcdef" for c in digest)
    assert digest == PINNED_SOFTMAX


def test_digest_is_sha256_of_the_documented_encoding() -> None:
    x = Var("x", "int64")
    expr = Add(x, IntImm(dtype("int64"), -3))
    tokens = ["tilecraft-structural-hash-v1", "nAdd", "nVar", "dint64", "nIntImm", "dint64", "i-3"]
    expected = hashlib.sha256("\n".join(tokens).encode()).hexdigest()[:32]
    assert structural_hash(expr) == expected
    # a repeated variable is a back-reference to its number, not a second definition
    tokens = ["tilecraft-structural-hash-v1", "nAdd", "nVar", "dint64", "@0"]
    assert structural_hash(Add(x, x)) == hashlib.sha256("\n".join(tokens).encode()).hexdigest()[:32]


def test_hash_is_the_same_in_processes_with_different_hash_seeds() -> None:
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
        "from test_structural import softmax; from tilecraft.ir import structural_hash;"
        "print(structural_hash(softmax()), structural_hash(softmax(n=7, dt='float64')))"
    )
    here = (structural_hash(softmax()), structural_hash(softmax(n=7, dt="float64")))
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run(
            [sys.executable, "-c", script, str(REPO), str(Path(__file__).parent)],
            env=env, capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        assert tuple(res.stdout.split()) == here


def test_hash_is_fast_enough() -> None:
    func = softmax()
    best = math.inf
    for _ in range(20):
        t0 = time.perf_counter()
        structural_hash(func)
        best = min(best, time.perf_counter() - t0)
    assert best < 5e-3


def test_deep_expressions_do_not_hit_the_recursion_limit() -> None:
    x, y = Var("x"), Var("y")
    a: Expr = x
    b: Expr = y
    for k in range(5000):
        a = Mul(a, IntImm(dtype("int32"), k % 7))
        b = Mul(b, IntImm(dtype("int32"), k % 7))
    assert structural_equal(a, b, map_free_vars=True)
    assert structural_hash(a) == structural_hash(b)

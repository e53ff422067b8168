"""JSON round trip of every IR node kind, sharing, exactness, and rejection of bad documents."""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tilecraft.errors import IRError
from tilecraft.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    Allocate,
    And,
    Attrs,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    Div,
    Evaluate,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRModule,
    IterKind,
    IterVar,
    LetStmt,
    Max,
    Min,
    Mul,
    Node,
    Not,
    Or,
    PrimFunc,
    Range,
    Select,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    block_realize,
    dtype,
    from_json,
    structural_equal,
    structural_hash,
    to_json,
)
from tilecraft.ir.serialize import FORMAT, VERSION, SerializeError
from tilecraft.ir.structural import register_node

I32, F32 = dtype("int32"), dtype("float32")


def i32(v: int) -> IntImm:
    return IntImm(I32, v)


def f32(v: float) -> FloatImm:
    return FloatImm(F32, v)


def matmul(n: int = 16) -> PrimFunc:
    """C = A @ B with a root block, a reduction block with init, and a GPU-style binding."""
    A = Buffer("A", (n, n), "float32")
    B = Buffer("B", (n, n), "float32")
    C = Buffer("C", (n, n), "float32")
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    blk = Block(
        "C",
        (
            IterVar(vi, Range(0, n), IterKind.SPATIAL),
            IterVar(vj, Range(0, n), IterKind.SPATIAL),
            IterVar(vk, Range(0, n), IterKind.REDUCE),
        ),
        (
            BufferRegion(A, (Range(vi, 1), Range(vk, 1))),
            BufferRegion(B, (Range(vk, 1), Range(vj, 1))),
        ),
        (BufferRegion(C, (Range(vi, 1), Range(vj, 1))),),
        BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(C, f32(0.0), (vi, vj)),
        annotations={"meta": {"tile": (4, 4), "ok": True, "ratio": 0.5, "none": None}},
    )
    nest = For(
        i, 0, n, ForKind.THREAD_BINDING,
        For(j, 0, n, ForKind.VECTORIZED,
            For(k, 0, n, ForKind.UNROLLED, block_realize(blk, [i, j, k]),
                annotations={"pragma_unroll_explicit": 1})),
        thread="blockIdx.x",
    )  # fmt: skip
    root = Block("root", (), (), (), nest)
    return PrimFunc(
        (A, B, C), block_realize(root), attrs={"global_symbol": "mm", "tir.noalias": True}
    )


# one instance of every concrete node class ---------------------------------------------------
def _block() -> Block:
    x = Var("x")
    buf = Buffer("tmp", (4,), "float32", "shared")
    iv = IterVar(x, Range(0, 4), IterKind.OPAQUE)
    body = BufferStore(buf, f32(1.5), (x,))
    return Block("b", (iv,), (), (BufferRegion.full(buf),), body, alloc_buffers=(buf,))


def _expr_builders() -> dict[str, Callable[[], Node]]:
    a, b = Var("a"), Var("b")
    p, q = Var("p", "bool"), Var("q", "bool")
    x = Var("x", "float32")
    buf = Buffer("A", (Var("n"), 8), "float16", "local")
    out: dict[str, Callable[[], Node]] = {
        "Var": lambda: Var("v", "int64"),
        "IntImm": lambda: IntImm(dtype("uint64"), 2**64 - 1),
        "FloatImm": lambda: FloatImm(dtype("float64"), 0.1),
        "And": lambda: And(p, q),
        "Or": lambda: Or(p, q),
        "Not": lambda: Not(p),
        "Select": lambda: Select(p, a, b),
        "Cast": lambda: Cast(dtype("float16"), x),
        "Call": lambda: Call(F32, "pow", (x, x)),
        "BufferLoad": lambda: BufferLoad(buf, (a, b)),
        "Range": lambda: Range(a, 7),
        "Buffer": lambda: buf,
    }
    for cls in (Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE):
        out[cls.__name__] = lambda cls=cls: cls(a, b)  # type: ignore[misc]
    return out


def _stmt_builders() -> dict[str, Callable[[], Node]]:
    i = Var("i")
    buf = Buffer("B", (8,), "int32")
    store = BufferStore(buf, i * 2, (i,))
    return {
        "BufferStore": lambda: store,
        "For": lambda: For(i, 1, 7, ForKind.PARALLEL, store, annotations={"k": "v"}),
        "SeqStmt": lambda: SeqStmt((store, Evaluate(i))),
        "IfThenElse": lambda: IfThenElse(i < 3, store, Evaluate(0)),
        "Evaluate": lambda: Evaluate(i + 1),
        "LetStmt": lambda: LetStmt(i, i32(3), store),
        "Allocate": lambda: Allocate(buf, store),
        "BufferRegion": lambda: BufferRegion(buf, (Range(i, 2),)),
        "IterVar": lambda: IterVar(i, Range(0, 8), IterKind.REDUCE),
        "Block": _block,
        "BlockRealize": lambda: BlockRealize((i,), i < 4, _block()),
        "PrimFunc": matmul,
        "IRModule": lambda: IRModule({"mm": matmul(), "mm8": matmul(8)}, {"version": 3}),
    }


BUILDERS = {**_expr_builders(), **_stmt_builders()}


def concrete_node_classes() -> list[type]:
    found: set[type] = set()
    todo = list(Node.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        module = sys.modules[cls.__module__]
        if cls.__module__.startswith("tilecraft.ir") and getattr(module, cls.__name__, None) is cls:
            found.add(cls)
    concrete = {c for c in found if not any(issubclass(d, c) and d is not c for d in found)}
    return sorted(concrete, key=lambda c: c.__name__)


def test_walk_finds_the_whole_ir() -> None:
    names = {c.__name__ for c in concrete_node_classes()}
    assert {"Var", "Add", "GE", "Block", "PrimFunc", "IRModule", "Range"} <= names
    assert "BinaryOp" not in names
    assert "Expr" not in names


@pytest.mark.parametrize("cls", concrete_node_classes(), ids=lambda c: c.__name__)
def test_every_node_class_round_trips(cls: type) -> None:
    assert cls.__name__ in BUILDERS, f"add a builder for the new node class {cls.__name__}"
    node = BUILDERS[cls.__name__]()
    assert type(node) is cls
    text = to_json(node)
    back = from_json(text)
    assert type(back) is cls
    assert back is not node
    assert structural_equal(node, back, map_free_vars=True)
    assert structural_hash(node) == structural_hash(back)
    assert to_json(back) == text  # exact: names, attrs and constants included


def test_document_has_format_tag_and_version() -> None:
    doc = json.loads(to_json(matmul()))
    assert doc["format"] == FORMAT == "tilecraft.ir"
    assert doc["version"] == VERSION == 1
    assert doc["root"] == {"ref": len(doc["nodes"]) - 1}


def test_function_round_trip_is_exact_and_preserves_sharing() -> None:
    func = matmul()
    back = from_json(to_json(func, indent=2))
    assert structural_equal(func, back)  # no free variables: definitions match
    assert back.name == func.name
    assert back.attrs == func.attrs
    assert [p.name for p in back.params] == ["A", "B", "C"]
    A, B, C = back.params
    blk = back.body.block.body.body.body.body.block
    store = blk.body
    assert store.buffer is C
    assert blk.init.buffer is C
    assert blk.writes[0].buffer is C
    assert blk.reads[0].buffer is A
    assert blk.reads[1].buffer is B
    vi = blk.iter_vars[0].var
    assert store.indices[0] is vi
    assert blk.reads[0].region[0].min is vi
    loop_i = back.body.block.body
    assert back.body.block.body.body.body.body.iter_values[0] is loop_i.loop_var
    assert loop_i.thread == "blockIdx.x"
    assert loop_i.kind is ForKind.THREAD_BINDING
    assert blk.annotations["meta"] == Attrs(
        {"tile": (4, 4), "ok": True, "ratio": 0.5, "none": None}
    )


def test_shared_var_is_one_table_entry() -> None:
    x = Var("x")
    expr = x + x * x - x
    doc = json.loads(to_json(expr))
    assert sum(1 for tag, _ in doc["nodes"] if tag == "Var") == 1
    back = from_json(to_json(expr))
    assert back.a.a is back.a.b.a is back.a.b.b is back.b


def test_module_round_trip_keeps_function_order_and_attrs() -> None:
    mod = IRModule({"z": matmul(), "a": matmul(8)}, {"flag": False, "n": 3})
    back = from_json(to_json(mod))
    assert list(back) == ["z", "a"]
    assert back.attrs == mod.attrs
    assert structural_equal(mod, back)
    assert back["z"].name == "z"


@pytest.mark.parametrize(
    "value", [0.1, -0.0, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 1 / 3]
)
def test_floats_round_trip_bit_exactly(value: float) -> None:
    back = from_json(to_json(FloatImm(dtype("float64"), value)))
    assert back.value.hex() == value.hex()


def test_nan_round_trips() -> None:
    back = from_json(to_json(FloatImm(F32, math.nan)))
    assert math.isnan(back.value)


def test_attrs_round_trip_at_top_level() -> None:
    attrs = Attrs({"a": 1, "b": [1, 2.5, "s"], "c": {"d": None, "e": True}})
    back = from_json(to_json(attrs))
    assert isinstance(back, Attrs)
    assert back == attrs
    assert type(back["a"]) is int
    assert type(back["c"]["e"]) is bool  # type: ignore[index]


def test_registered_class_round_trips() -> None:
    @dataclass(frozen=True, slots=True, eq=False)
    class Pair(Stmt):
        first: Stmt
        second: Stmt
        label: str

    register_node(Pair, tag="test_serialize.Pair")
    x = Var("x")
    node = Pair(Evaluate(x), Evaluate(x + 1), "lbl")
    back = from_json(to_json(node))
    assert isinstance(back, Pair)
    assert back.label == "lbl"
    assert back.first.value is back.second.value.a
    assert structural_equal(node, back, map_free_vars=True)


def test_deep_trees_round_trip_without_recursion() -> None:
    x = Var("x")
    expr: Expr = x
    for k in range(5000):
        expr = Add(expr, i32(k))
    back = from_json(to_json(expr))
    assert structural_equal(expr, back, map_free_vars=True)
    leaf = back
    while isinstance(leaf, Add):
        leaf = leaf.a
    assert isinstance(leaf, Var)
    assert leaf.name == "x"


def test_unregistered_class_cannot_be_written() -> None:
    @dataclass(frozen=True, slots=True, eq=False)
    class Loose(Stmt):
        value: Expr

    with pytest.raises(IRError, match="not a registered IR node"):
        to_json(Loose(i32(1)))


# malformed documents -------------------------------------------------------------------------
def doc(nodes: list[Any], root: Any = None, **top: Any) -> str:
    base = {"format": FORMAT, "version": VERSION, "nodes": nodes}
    base["root"] = root if root is not None else {"ref": len(nodes) - 1}
    base.update(top)
    return json.dumps(base)


VAR_I = ["Var", {"name": "i", "dtype": {"dtype": "int32"}}]
INT_0 = ["IntImm", {"dtype": {"dtype": "int32"}, "value": 0}]

BAD_DOCUMENTS: dict[str, tuple[Any, str]] = {
    "not_json": ('{"format": ', "not valid JSON"),
    "not_an_object": ("[1, 2]", "expected a JSON object"),
    "not_a_string": (None, "expected a JSON string"),
    "wrong_format": (doc([VAR_I], format="other"), "format must be 'tilecraft.ir'"),
    "wrong_version": (doc([VAR_I], version=2), "unsupported version 2"),
    "bool_version": (doc([VAR_I], version=True), "unsupported version True"),
    "missing_root": (json.dumps({"format": FORMAT, "version": 1, "nodes": []}), "exactly the keys"),
    "extra_top_key": (doc([VAR_I], extra=1), "exactly the keys"),
    "unknown_node_type": (doc([["Lambda", {"code": "print(1)"}]]), "unknown node type 'Lambda'"),
    "entry_not_a_pair": (doc([["Var"]]), r"expected \[type_name, \{field: value\}\]"),
    "unknown_field": (
        doc([["Var", {"name": "i", "colour": "red"}]]),
        r"unknown fields \['colour'\]",
    ),
    "missing_field": (
        doc([["Var", {"dtype": {"dtype": "int32"}}]]),
        r"nodes\[0\] \(Var\): invalid",
    ),
    "wrong_field_type": (doc([["Var", {"name": 5}]]), "name must be a non-empty string"),
    "tuple_field_not_list": (doc([INT_0, ["SeqStmt", {"stmts": 3}]]), r"nodes\[1\] \(SeqStmt\)"),
    "attrs_field_not_attrs": (
        doc(
            [
                INT_0,
                ["Evaluate", {"value": {"ref": 0}}],
                ["PrimFunc", {"params": [], "body": {"ref": 1}, "attrs": 7}],
            ]
        ),
        r"nodes\[2\] \(PrimFunc\)",
    ),
    "dangling_ref": (doc([VAR_I], root={"ref": 9}), "ref 9 does not name an earlier node"),
    "self_reference_cycle": (
        doc([["Evaluate", {"value": {"ref": 0}}]]),
        "ref 0 does not name an earlier node",
    ),
    "forward_reference": (
        doc([["Add", {"a": {"ref": 1}, "b": {"ref": 1}}], VAR_I]),
        "forward references",
    ),
    "ref_not_int": (doc([VAR_I], root={"ref": True}), "a ref must be an integer"),
    "invalid_dtype": (
        doc([["Var", {"name": "i", "dtype": {"dtype": "float7"}}]]),
        r"nodes\[0\] \(Var\)\.dtype: dtype: float does not come in 7 bits",
    ),
    "wrong_arity": (
        doc(
            [
                ["Var", {"name": "x", "dtype": {"dtype": "float32"}}],
                [
                    "Call",
                    {"dtype": {"dtype": "float32"}, "op": "exp", "args": [{"ref": 0}, {"ref": 0}]},
                ],
            ]
        ),
        r"expects 1 argument\(s\), got 2",
    ),
    "unknown_intrinsic": (
        doc(
            [
                ["Var", {"name": "x", "dtype": {"dtype": "float32"}}],
                ["Call", {"dtype": {"dtype": "float32"}, "op": "system", "args": [{"ref": 0}]}],
            ]
        ),
        "unknown intrinsic 'system'",
    ),
    "op_not_a_string": (
        doc(
            [
                ["Var", {"name": "x", "dtype": {"dtype": "float32"}}],
                ["Call", {"dtype": {"dtype": "float32"}, "op": ["exp"], "args": [{"ref": 0}]}],
            ]
        ),
        r"nodes\[1\] \(Call\): Call: unknown intrinsic \('exp',\)",
    ),
    "bad_enum_value": (
        doc(
            [
                VAR_I,
                INT_0,
                ["Evaluate", {"value": {"ref": 1}}],
                [
                    "For",
                    {
                        "loop_var": {"ref": 0},
                        "min": {"ref": 1},
                        "extent": {"ref": 1},
                        "kind": {"enum": "ForKind", "value": "sideways"},
                        "body": {"ref": 2},
                    },
                ],
            ]
        ),
        "'sideways' is not a ForKind",
    ),
    "unknown_enum_type": (doc([], root={"enum": "os.system", "value": "x"}), "unknown enum type"),
    "semantic_dtype_mismatch": (
        doc(
            [
                ["Buffer", {"name": "B", "shape": [4], "dtype": {"dtype": "float32"}}],
                INT_0,
                ["BufferStore", {"buffer": {"ref": 0}, "value": {"ref": 1}, "indices": [0]}],
            ]
        ),
        "dtype mismatch: storing int32 into a float32 buffer",
    ),
    "bad_float_hex": (doc([], root={"float": "0xZZ"}), "is not a float.hex string"),
    "bare_nan": ('{"format": "tilecraft.ir", "version": 1, "nodes": [], "root": NaN}', "bare NaN"),
    "tagged_with_extra_keys": (doc([VAR_I], root={"ref": 0, "x": 1}), "expected an object with"),
    "value_too_deep": (doc([], root=json.loads("[" * 100 + "]" * 100)), "nested more than"),
    "json_too_deep": ("[" * 200000 + "]" * 200000, "unreadable JSON"),
    "huge_integer": (
        doc([], root=None).replace('"root": {"ref": -1}', '"root": ' + "9" * 5000),
        "unreadable JSON",
    ),
    "int_out_of_range": (
        doc([["IntImm", {"dtype": {"dtype": "int8"}, "value": 300}]]),
        "does not fit in int8",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_DOCUMENTS))
def test_malformed_document_raises_a_clear_ir_error(name: str) -> None:
    text, message = BAD_DOCUMENTS[name]
    with pytest.raises(SerializeError, match=message) as info:
        from_json(text)
    assert isinstance(info.value, IRError)
    assert str(info.value).startswith("from_json")


def _mutate(value: Any, rng: random.Random) -> Any:
    """Replace one random leaf or list item of a decoded JSON document with junk."""
    junk = [None, True, -1, 10**6, "x", "Var", [], {}, {"ref": 0}, {"dtype": "int32"}, 1.5]
    if isinstance(value, list) and value and rng.random() < 0.8:
        k = rng.randrange(len(value))
        value[k] = _mutate(value[k], rng)
        return value
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        if rng.random() < 0.1:
            del value[key]
        else:
            value[key] = _mutate(value[key], rng)
        return value
    return rng.choice(junk)


def test_random_corruptions_only_ever_raise_ir_errors() -> None:
    base = json.loads(to_json(matmul(4)))
    rng = random.Random(1234)
    failures = 0
    for _ in range(300):
        text = json.dumps(_mutate(json.loads(json.dumps(base)), rng))
        try:
            from_json(text)
        except IRError:
            failures += 1
    assert failures > 100  # most corruptions are caught; the rest still decode to valid IR

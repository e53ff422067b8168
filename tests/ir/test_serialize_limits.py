"""IR JSON on hostile documents: wrong shapes, overflows, depth and size limits."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import tilecraft as tc
from tilecraft.ir import (
    Add,
    Buffer,
    BufferStore,
    Evaluate,
    FloatImm,
    For,
    ForKind,
    IntImm,
    LetStmt,
    PrimFunc,
    SerializeError,
    Var,
    from_json,
    serialize,
    structural_equal,
    to_json,
)

REGION_REFERS_TO_BUFFER = (
    '{"format":"tilecraft.ir","version":1,"nodes":[["IntImm",{"dtype":{"dtype":"int32"},'
    '"value":4}],["Buffer",{"name":"A","shape":[{"ref":0}],"dtype":{"dtype":"float32"},'
    '"scope":"global"}],["BufferRegion",{"buffer":{"ref":1},"region":{"ref":1}}]],'
    '"root":{"ref":2}}'
)


def test_region_referring_to_a_buffer_is_rejected_promptly() -> None:
    """Regression: ``tuple(buffer)`` iterated a 1-D Buffer (subscriptable) without end."""
    assert len(REGION_REFERS_TO_BUFFER) < 300
    code = (
        "import sys, tilecraft as tc\n"
        "try:\n    tc.ir.from_json(sys.stdin.read())\n"
        "except tc.ir.SerializeError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=REGION_REFERS_TO_BUFFER,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "nodes[2] (BufferRegion).region: expected a list" in done.stdout, done.stderr


def _doc(nodes: list[Any], root: int) -> str:
    return json.dumps(
        {"format": "tilecraft.ir", "version": 1, "nodes": nodes, "root": {"ref": root}}
    )


I32 = {"dtype": "int32"}
BUF = ["Buffer", {"name": "A", "shape": [{"ref": 0}], "dtype": {"dtype": "float32"}}]


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (["SeqStmt", {"stmts": {"ref": 1}}], "stmts"),
        (["Buffer", {"name": "B", "shape": {"ref": 1}, "dtype": {"dtype": "int8"}}], "shape"),
        (["BufferLoad", {"buffer": {"ref": 1}, "indices": {"ref": 1}}], "indices"),
        (["PrimFunc", {"params": {"ref": 1}, "body": {"ref": 1}}], "params"),
    ],
)
def test_a_node_where_a_list_belongs_is_rejected(entry: list[Any], field: str) -> None:
    nodes = [["IntImm", {"dtype": I32, "value": 1}], BUF, entry]
    with pytest.raises(SerializeError, match=rf"nodes\[2\] \(\w+\)\.{field}: expected a list"):
        from_json(_doc(nodes, 2))


@pytest.mark.parametrize(
    "entry",
    [
        ["FloatImm", {"dtype": {"dtype": "float32"}, "value": {"float": "0x1p99999"}}],
        ["FloatImm", {"dtype": {"dtype": "float64"}, "value": 10**400}],
    ],
)
def test_overflowing_numbers_are_serialize_errors(entry: list[Any]) -> None:
    """Regression: float.fromhex and float(int) raised a raw OverflowError."""
    with pytest.raises(SerializeError):
        from_json(_doc([entry], 0))


def _chain(n: int) -> dict[str, Any]:
    """Entries 0..n: x, x + x, (x + x) + x, ... (depth n + 1, no sharing blow-up)."""
    nodes: list[Any] = [["Var", {"name": "x", "dtype": I32}]]
    for _ in range(n):
        nodes.append(["Add", {"a": {"ref": len(nodes) - 1}, "b": {"ref": 0}}])
    return {"format": "tilecraft.ir", "version": 1, "nodes": nodes, "root": {"ref": n}}


def test_depth_limit() -> None:
    ok = from_json(json.dumps(_chain(serialize.MAX_DEPTH - 1)))
    assert ok.script().count("+") == serialize.MAX_DEPTH - 1  # deep IR that loads also prints
    assert structural_equal(from_json(to_json(ok)), ok, map_free_vars=True)
    with pytest.raises(SerializeError, match=r"more than 10000 nodes deep"):
        from_json(json.dumps(_chain(serialize.MAX_DEPTH)))
    deeper = Add(ok, Var("y"))
    with pytest.raises(SerializeError, match=r"to_json: Add: the tree is more than"):
        to_json(deeper)


def test_shared_entries_cannot_describe_an_exponential_tree() -> None:
    nodes: list[Any] = [["Var", {"name": "x", "dtype": I32}]]
    for _ in range(100):
        k = len(nodes) - 1
        nodes.append(["Add", {"a": {"ref": k}, "b": {"ref": k}}])
    with pytest.raises(SerializeError, match=r"more than 4000000 nodes once shared entries"):
        from_json(_doc(nodes, 100))
    root_tuple = json.loads(_doc(nodes[:20], 19))
    root_tuple["root"] = [{"ref": 19}] * 10
    with pytest.raises(SerializeError, match=r"from_json: root: the tree holds more than"):
        from_json(json.dumps(root_tuple))


def _let_chain(n: int) -> PrimFunc:
    out = Buffer("O", (1,), "int32")
    body: Any = BufferStore(out, IntImm("int32", 0), (0,))
    for k in range(n):
        body = LetStmt(Var("x"), IntImm("int32", k), body)
    return PrimFunc((out,), body)


def test_statement_depth_limit_and_deep_statements_print() -> None:
    ok = _let_chain(serialize.MAX_STMT_DEPTH - 1)
    back = from_json(to_json(ok))
    text = back.script()
    assert text.count("x_") == serialize.MAX_STMT_DEPTH - 2  # flat lets, all named apart
    assert structural_equal(tc.script.parse(text), ok)
    with pytest.raises(SerializeError, match=r"statements nest more than 1000 deep"):
        to_json(_let_chain(serialize.MAX_STMT_DEPTH))


def test_deep_loop_nest_prints_with_deep_indentation() -> None:
    body: Any = Evaluate(IntImm("int32", 0))
    for _ in range(300):
        body = For(Var("i"), IntImm("int32", 0), IntImm("int32", 2), ForKind.PARALLEL, body)
    text = from_json(to_json(PrimFunc((), body))).script()
    assert text.splitlines()[-1] == " " * 4 * 301 + "T.evaluate(0)"


def test_document_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = to_json(FloatImm("float32", 1.0))
    monkeypatch.setattr(serialize, "MAX_DOCUMENT_CHARS", len(doc) - 1)
    with pytest.raises(SerializeError, match=r"exceeds the limit"):
        from_json(doc)

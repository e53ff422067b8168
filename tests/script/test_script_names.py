"""Unusual names survive print/parse: characters outside the BMP, non-ASCII letters, keywords."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.errors import IRError
from tilecraft.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Evaluate,
    FloatImm,
    For,
    ForKind,
    IntImm,
    IRModule,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Var,
    structural_equal,
)

ODD = ["𝑥", "x𝑥", "𠀀", "ñ", "Ω", "ﬁ", "ª", "x\u0301", "ⅰ", "K", "_", "a-b", "0x", "lambda",
       "match", "type", "T", "range", "float", "print", "max", "exp", "int32", "grid",
       "Buffer", "block", "cls", "R", "i_1", "v", "丁"]  # fmt: skip


def _roundtrip(func: PrimFunc | IRModule) -> str:
    text = func.script()
    back = tc.script.parse(text)
    assert structural_equal(back, func), text
    assert back.script() == text
    return text


@pytest.mark.parametrize("name", ODD)
def test_variable_and_buffer_names(name: str) -> None:
    """Each odd name, and a clash with its folded form, prints as distinct valid names."""
    n, i, x = Var(name + "n"), Var(name), Var("x")
    a = Buffer(name, (16,), "float32")
    b = Buffer(name + "B", (16,), "float32")
    store = BufferStore(a, b[i + n + x], (i,))
    body = For(i, 0, 4, ForKind.SERIAL, LetStmt(Var(name), n, store))
    _roundtrip(PrimFunc((a, b, n, x), body))


def test_names_print_as_python_reads_them() -> None:
    text = PrimFunc((Var("𝑥"), Var("x"), Var("ñ")), Evaluate(0)).script()
    assert "def main(x: T.int32, x_1: T.int32, ñ: T.int32):" in text  # NFKC: 𝑥 is x


@pytest.mark.parametrize(
    "name", ["𝑥blk", "\U0001f600", "\ud800", 'q"uote', "back\\slash", "tab\tnl\n", "\x7f", "é"]
)
def test_block_names_and_attribute_strings_are_exact(name: str) -> None:
    """Regression: a JSON-style surrogate pair escape came back as two characters."""
    a = Buffer("A", (1,), "float32")
    writes = (BufferRegion.point(a, [IntImm("int32", 0)]),)
    inner = Block(name, (), (), writes, BufferStore(a, FloatImm("float32", 1.0), (0,)))
    blk = Block("root", (), (), (), BlockRealize((), True, inner), annotations={name: name})
    func = PrimFunc((a,), BlockRealize((), True, blk), attrs={"s": [name, "𝑥"]})
    text = _roundtrip(func)
    assert text.isascii() or name == "é"


def test_function_names_must_read_back_unchanged() -> None:
    func = PrimFunc((), SeqStmt((Evaluate(0), Evaluate(1))), name="f𠀀")
    text = _roundtrip(IRModule({"f𠀀": func, "ñ": func}))
    assert "def f𠀀():" in text
    with pytest.raises(IRError, match="NFKC"):
        PrimFunc((), Evaluate(0), name="f𝑥")  # Python would read it as fx
    with pytest.raises(IRError, match="NFKC"):
        IRModule({"ﬁ": func})
    doc = tc.ir.to_json(func).replace("f\\ud840\\udc00", "f\\ud835\\udc65")
    with pytest.raises(tc.ir.SerializeError, match="NFKC"):
        tc.ir.from_json(doc)


def test_graph_tensor_names_fold_without_clashing() -> None:
    from tilecraft.graph import GraphBuilder
    from tilecraft.graph import script as gscript
    from tilecraft.graph.ir import Binding, Function, OpCall, TensorVar

    bb = GraphBuilder()
    x = bb.param("x", (4,), "float32")
    fancy = TensorVar("𝑥", x.type)
    out = TensorVar("y", x.type)
    func = Function((x, fancy), (Binding(out, OpCall("add", (fancy, x))),), out, name="main")
    text = gscript.to_script(func)
    assert 'def main(x: R.Tensor((4,), "float32"), x_1: R.Tensor' in text
    assert "R.add(x_1, x)" in text
    assert structural_equal(gscript.parse(text), func)
    del bb

"""``bind_symbol``: an extent read from a tensor at run time, and ``nonzero`` built on it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import GraphError, IRError, ScriptParseError
from tilecraft.graph import GraphBuilder, TensorType, TensorVar
from tilecraft.graph import script as gscript
from tilecraft.graph.dynamic import emit_nonzero
from tilecraft.graph.ir import Binding
from tilecraft.graph.ir_bind import BindSymbol
from tilecraft.ir import IRModule, Var
from tilecraft.lower.graph_program_json import program_from_json, program_to_json
from tilecraft.runtime.export import extract_c

SLICE = """
@R.function
def main(x: R.Tensor(("n", 3), "float32"), k: R.Tensor((), "int64")) -> R.Tensor(("u", 3), "float32"):
    with R.dataflow():
        k1 = R.reshape(k, shape=(1,))
        u_c = R.bind_symbol(k1, "u", lower=0, upper="n")
        gv = R.strided_slice(x, u_c, axis=0, begin=0, shape=('u', 3), step=1)
        R.output(gv)
    return gv
"""  # noqa: E501


def _slice_module(upper: int | str = "n") -> IRModule:
    """``x[:k]``, ``k`` read from a 0-d input, bounded by ``upper``."""
    func = gscript.parse(SLICE.replace('upper="n"', f"upper={upper!r}".replace("'", '"')))
    assert isinstance(func, tc.graph.Function)
    return IRModule({"main": func})


def _nonzero_module(shape: tuple[int | str, ...], dtype: str, upper: int = -1) -> IRModule:
    bb = GraphBuilder()
    x = bb.param("x", shape, dtype)
    prims: dict[str, tc.PrimFunc] = {}
    idx, _ = emit_nonzero(bb, x, "u0", upper, prims)
    return IRModule({"main": bb.finish(idx), **prims})


@pytest.fixture(scope="module")
def slice_exe() -> tc.graph.Executable:
    return tc.compile(_slice_module(), target="cpu")


def test_script_round_trip_structural_hash_and_json() -> None:
    func = gscript.parse(SLICE)
    assert func.script() == SLICE.strip()
    bind = func.bindings[1].value
    assert isinstance(bind, BindSymbol)
    assert bind.upper is func.params[0].type.shape[0]  # the parameter's own extent
    assert func.ret.type.shape[0] is bind.symbol
    back = tc.ir.from_json(tc.ir.to_json(func))
    assert tc.ir.structural_equal(back, func)
    assert tc.ir.structural_hash(back) == tc.ir.structural_hash(func)
    other = gscript.parse(SLICE.replace('upper="n"', "upper=7"))
    assert not tc.ir.structural_equal(other, func)
    assert tc.ir.structural_hash(other) != tc.ir.structural_hash(func)
    assert gscript.parse(other.script()).script() == other.script()


def test_graph_ir_refuses_ill_formed_binds() -> None:
    bb = GraphBuilder()
    f = bb.param("f", (1,), "float32")
    pair = bb.param("pair", (2,), "int64")
    n = bb.param("n", ("s",), "int64")
    u = Var("u", "int32")
    with pytest.raises(IRError, match="one integer"):
        BindSymbol((f,), u)
    with pytest.raises(IRError, match="one integer"):
        BindSymbol((pair,), u)
    one = bb.emit("strided_slice", [pair], {"axis": 0, "begin": 0, "shape": (1,), "step": 1})
    with pytest.raises(IRError, match="0 <= lower <= upper"):
        BindSymbol((one,), u, 5, 3)
    with pytest.raises(IRError, match="int32 Var"):
        BindSymbol((one,), Var("w", "int64"))
    with pytest.raises(IRError, match="names the symbol itself"):
        BindSymbol((one,), u, 0, u + 1)
    with pytest.raises(IRError, match=r"gives Tensor\(\(u, 0\), int64\)"):
        Binding(TensorVar("c", TensorType((u, 1), "int64")), BindSymbol((one,), u))
    s = n.type.shape[0]
    assert isinstance(s, Var)
    bb.emit_bind_symbol(one, s)  # s already comes from a parameter
    with pytest.raises(IRError, match="already binds"):
        bb.finish(one)
    text = SLICE.replace('upper="n"', 'upper="m"')
    with pytest.raises(ScriptParseError, match="no parameter's shape"):
        gscript.parse(text)
    with pytest.raises(ScriptParseError, match="bind_symbol"):
        gscript.parse(SLICE.replace('lower=0, upper="n"', "lower=0"))


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((7,), "float32"), ((4, 5), "int32"), ((2, 3, 4), "bool"), ((3, 4), "float64")],
)
def test_nonzero_matches_numpy(shape: tuple[int, ...], dtype: str) -> None:
    exe = tc.compile(_nonzero_module(shape, dtype), target="cpu")
    rng = np.random.default_rng(0)
    for density in (0.0, 0.3, 1.0):  # none, some, all non-zero
        x = (rng.random(shape) < density) * rng.integers(1, 5, shape)
        x = x.astype(dtype)
        got = exe["main"](x)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.argwhere(x))


def test_nonzero_of_a_symbolic_shape_feeds_later_kernels() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 3), "float32")
    prims: dict[str, tc.PrimFunc] = {}
    idx, _ = emit_nonzero(bb, x, "u0", -1, prims)
    rows = bb.emit("astype", [idx], {"dtype": "float32"})
    out = bb.emit("multiply", [rows, rows])
    mod = IRModule({"main": bb.finish(out), **prims})
    assert tc.ir.structural_equal(tc.script.parse(mod.script()), mod)
    exe = tc.compile(mod, target="cpu")
    rng = np.random.default_rng(1)
    for n in (1, 6, 40):
        x = np.where(rng.random((n, 3)) < 0.5, 0.0, rng.standard_normal((n, 3))).astype("float32")
        np.testing.assert_array_equal(exe["main"](x), np.argwhere(x).astype("float32") ** 2)


def test_nonzero_count_above_its_bound_is_an_error() -> None:
    exe = tc.compile(_nonzero_module((6,), "float32", upper=2), target="cpu")
    np.testing.assert_array_equal(exe["main"](np.array([0, 1, 0, 2, 0, 0], "float32")), [[1], [3]])
    with pytest.raises(GraphError, match=r"extent u0 read at run time is 3, outside its bounds"):
        exe["main"](np.array([1, 1, 0, 2, 0, 0], "float32"))


def test_read_extent_is_checked_before_any_kernel_uses_it(slice_exe) -> None:
    x = np.arange(15, dtype="float32").reshape(5, 3)
    for k in (0, 2, 5):
        got = slice_exe["main"](x, np.array(k, "int64"))  # a 0-d input stays 0-d
        np.testing.assert_array_equal(got, x[:k])
    names = [k for k, _ in slice_exe.profile("main", x, np.array(2, "int64"))]
    assert names.index("tc.bind_symbol") == len(names) - 2  # the read, then the slice kernel
    for bad in (6, -1, 2**40):
        with pytest.raises(GraphError, match=r"extent u read at run time is .*bounds \[0, 5\]"):
            slice_exe["main"](x, np.array(bad, "int64"))


def test_static_upper_bound() -> None:
    exe = tc.compile(_slice_module(upper=3), target="cpu")
    x = np.ones((5, 3), "float32")
    assert exe["main"](x, np.array(3, "int64")).shape == (3, 3)
    with pytest.raises(GraphError, match=r"bounds \[0, 3\]"):
        exe["main"](x, np.array(4, "int64"))


def test_program_json_keeps_bind_steps(slice_exe) -> None:
    prog = slice_exe.functions["main"].program
    assert prog.has_bind_steps
    text = program_to_json(prog)
    back = program_from_json(text, list(prog.constants))
    (step,) = [s for s in back.steps if s.is_bind]
    assert step.bind is not None
    assert step.bind[0] == 0
    assert step.bind[1] is back.shape_vars[0]  # the upper bound is the input's extent n
    assert back.bound_symbol(step).name == "u"
    for bad in ([], [{"lower": 0}]):  # no bounds entry; bounds where the ir document has them
        doc = json.loads(text)
        doc["steps"] = [[*s[:4], *bad] if s[0] == "tc.bind_symbol" else s for s in doc["steps"]]
        with pytest.raises(tc.errors.LowerError, match="bind_symbol"):
            program_from_json(json.dumps(doc), list(prog.constants))


def test_no_native_entry_export_refuses_the_c_entry(slice_exe, tmp_path) -> None:
    f = slice_exe.functions["main"]
    assert f.native is None
    assert f.param_formats() is None
    path = slice_exe.export_library(tmp_path / "slice.tc")
    loaded = tc.runtime.load_module(path)
    x = np.arange(12, dtype="float32").reshape(4, 3)
    np.testing.assert_array_equal(loaded["main"](x, np.array(2, "int64")), x[:2])
    with pytest.raises(GraphError, match="outside its bounds"):
        loaded["main"](x, np.array(5, "int64"))
    with pytest.raises(tc.runtime.ExportError, match=r"reads the extents \['u'\] from tensors"):
        extract_c(path, tmp_path / "c")


def test_extent_lower_bound_checks_equality() -> None:
    text = SLICE.replace('lower=0, upper="n"', 'lower="(n - 1)", upper="n"')
    func = gscript.parse(text)
    assert func.script() == text.strip()
    exe = tc.compile(IRModule({"main": func}), target="cpu")
    x = np.ones((4, 3), "float32")
    assert exe["main"](x, np.array(3, "int64")).shape == (3, 3)
    assert exe["main"](x, np.array(4, "int64")).shape == (4, 3)
    with pytest.raises(
        GraphError, match=r"extent u read at run time is 2, outside its bounds \[3, 4\]"
    ):
        exe["main"](x, np.array(2, "int64"))

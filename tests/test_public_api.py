"""The "Public API at a glance" of DESIGN.md runs as written (CPU parts, small sizes)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.script import T

TEXT = """
@T.prim_func
def add_one(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for i in range(128):
        with T.block("B"):
            vi = T.axis.spatial(128, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] + T.float32(1.0)
"""


def test_script_ir_and_arith_surface() -> None:
    func = tc.script.parse(TEXT)
    text = func.script()
    assert tc.ir.structural_equal(tc.script.parse(text), func)
    assert tc.ir.structural_hash(func) == tc.ir.structural_hash(tc.script.parse(text))
    assert tc.ir.structural_equal(tc.ir.from_json(tc.ir.to_json(func)), func)

    i, j = tc.ir.Var("i", "int32"), tc.ir.Var("j", "int32")
    expr = (i * 16 + j) // 16
    cond = i * 16 + j < 256
    assert isinstance(cond, tc.ir.LT)
    ana = tc.arith.Analyzer()
    ana.bind(i, tc.ir.Range(0, 16))
    ana.bind(j, tc.ir.Range(0, 16))
    assert ana.simplify(expr) is i
    assert tc.arith.evaluate(expr, {i: 3, j: 5}) == 3


def test_te_schedule_trace_build_surface() -> None:
    n = 64
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.placeholder((n, n), "float32", name="B")
    k = tc.te.reduce_axis((0, n), name="k")
    C = tc.te.compute((n, n), lambda i, j: tc.te.sum(A[i, k] * B[k, j], axis=k), name="C")
    func = tc.te.create_prim_func([A, B, C])
    assert func.name == "main"

    sch = tc.Schedule(func, seed=0)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, factors=[None, 32])
    sch.reorder(io, j, ii)
    sch.parallel(io)
    assert "sch.split" in sch.trace.as_python()
    js = sch.trace.as_json()
    sch2 = tc.Schedule(func)
    tc.schedule.Trace.from_json(js).apply_to_schedule(sch2)
    assert tc.ir.structural_equal(sch2.func, sch.func)
    assert isinstance(sch.mod, tc.ir.IRModule)

    lib = tc.build(sch.mod, target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    c = np.zeros((n, n), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert "main" in lib.source
    assert lib.time_evaluator("main", number=2, repeat=2)(a, b, c).median > 0
    tc.testing.check_numeric(func, lambda a, b: a @ b)


def test_model_surface() -> None:
    from tilecraft.frontend import nn

    class Model(nn.Module):
        def __init__(self) -> None:
            self.fc1 = nn.Linear(16, 8)
            self.relu = nn.ReLU()

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return self.relu(self.fc1(x))

    mod, params = Model().export({"forward": {"x": nn.spec.Tensor((1, 16), "float32")}})
    exported = mod
    with tc.Target("cpu"):
        mod = tc.graph.get_pipeline("zero")(mod)
    exe = tc.build(mod, target="cpu")
    x = np.random.default_rng(1).standard_normal((1, 16)).astype("float32")
    out = exe["forward"](x, *params.values())
    w, bias = params["fc1.weight"], params["fc1.bias"]
    assert w.shape == (8, 16)
    want = np.maximum(x @ w.T + bias, 0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)

    # the default path: zero + fold parameter-only work + default rules + build
    mod = exported
    exe = tc.compile(mod, target="cpu", params=params)  # params bound: exe["forward"](x)
    np.testing.assert_allclose(exe["forward"](x), want, rtol=1e-5, atol=1e-5)
    exe = tc.compile(mod, target="cpu")  # unbound: exe["forward"](x, *params.values())
    np.testing.assert_allclose(exe["forward"](x, *params.values()), want, rtol=1e-5, atol=1e-5)


def test_decorator_form() -> None:
    @T.prim_func
    def add_one(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):  # noqa: N803
        for i in range(128):
            with T.block("B"):
                vi = T.axis.spatial(128, i)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] + T.float32(1.0)

    assert tc.ir.structural_equal(add_one, tc.script.parse(TEXT))


# --- hygiene a new user hits (issue 10, item 7) --------------------------------------------


def test_dir_lists_only_names_that_resolve_and_help_works() -> None:
    import pydoc

    names = dir(tc)
    for sub in (
        "ir",
        "te",
        "topi",
        "schedule",
        "runtime",
        "build",
        "compile",
        "Schedule",
        "Target",
    ):
        assert sub in names
    for name in names:
        assert getattr(tc, name) is not None, name  # no ModuleNotFoundError, no AttributeError
    assert not [n for n in names if n in ("TYPE_CHECKING", "annotations", "importlib")]
    text = pydoc.render_doc(tc)
    assert "tensor-program compiler" in text


def test_lazy_names_are_typed_for_static_checkers() -> None:
    """Every lazily resolved name is also imported under TYPE_CHECKING (concrete types)."""
    import ast
    import pathlib

    init = pathlib.Path(tc.__file__)
    tree = ast.parse(init.read_text(encoding="utf-8"))
    guarded = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)] + list(guarded.body)
    typed = {a.asname or a.name for imp in imports for a in imp.names}  # type: ignore[attr-defined]
    lazy = set(tc._LAZY_ATTRS) | set(tc._SUBMODULES)
    assert lazy <= typed, sorted(lazy - typed)
    assert (init.parent / "py.typed").is_file()
    pyproject = (init.parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert 'tilecraft = ["py.typed"]' in pyproject


def test_numpy_dtypes_are_accepted_wherever_a_dtype_is() -> None:
    A = tc.te.placeholder((4,), np.float32, name="A")
    assert str(A.dtype) == "float32"
    assert str(tc.ir.Buffer("B", (4,), np.dtype("float16")).dtype) == "float16"
    assert str(tc.ir.op.cast(tc.ir.Var("x"), np.int8).dtype) == "int8"
    assert str(tc.topi.cast(A, np.dtype(np.float64)).dtype) == "float64"
    assert str(tc.ir.dtype(np.bool_)) == "bool"
    assert str(tc.ir.Var("n", np.int64).dtype) == "int64"

    @T.prim_func
    def copy(A: T.Buffer((4,), np.float32), B: T.Buffer((4,), np.dtype("float32"))):  # noqa: N803
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi]

    assert str(copy.buffer_params[0].dtype) == "float32"
    for bad in (np.dtype(">f4"), np.dtype("complex64"), np.dtype(object), float):
        with pytest.raises(tc.errors.IRError, match="dtype"):
            tc.ir.dtype(bad)  # type: ignore[arg-type]


def test_library_warnings_go_through_the_tilecraft_logger(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging
    import subprocess

    from tilecraft.runtime import compiler

    real = compiler.run_compiler

    def no_openmp(command: list[str]) -> subprocess.CompletedProcess[str]:
        if "-fopenmp" in command:
            return subprocess.CompletedProcess(command, 1, "", "unsupported option '-fopenmp'")
        return real(command)

    monkeypatch.setattr(compiler, "run_compiler", no_openmp)
    monkeypatch.setattr(compiler, "_flag_cache", {})
    with caplog.at_level(logging.WARNING, logger="tilecraft"):
        flags = compiler.compile_flags(compiler.find_compiler())
    assert "-fopenmp" not in flags
    records = [r for r in caplog.records if "OpenMP" in r.getMessage()]
    assert len(records) == 1
    assert records[0].name.startswith("tilecraft.")
    assert "one core" in records[0].getMessage()
    assert capsys.readouterr() == ("", "")  # no prints


def test_lower_error_suggests_a_call_that_works() -> None:
    text = """
@T.prim_func
def double(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        with T.block("B"):
            vi = T.axis.spatial(64, tx)
            B[vi] = A[vi] * T.float32(2.0)
"""
    func = tc.script.parse(text)
    with pytest.raises(tc.errors.LowerError, match=r"tc\.build\(\.\.\., emulate=True\)"):
        tc.build(func)
    lib = tc.build(func, emulate=True)  # the suggestion, as written
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    lib["double"](a, b)
    np.testing.assert_array_equal(b, a * 2)

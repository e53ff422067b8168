"""The "Public API at a glance" of DESIGN.md runs as written (CPU parts, small sizes)."""

from __future__ import annotations

import numpy as np

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
    with tc.Target("cpu"):
        mod = tc.graph.get_pipeline("zero")(mod)
    exe = tc.build(mod, target="cpu")
    x = np.random.default_rng(1).standard_normal((1, 16)).astype("float32")
    out = exe["forward"](x, *params.values())
    w, bias = params["fc1.weight"], params["fc1.bias"]
    assert w.shape == (8, 16)
    np.testing.assert_allclose(out, np.maximum(x @ w.T + bias, 0), rtol=1e-5, atol=1e-5)


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

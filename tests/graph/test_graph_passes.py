"""Legalize, AnnotateOpPattern, FuseOps, FuseTIR, DCE and the pass context."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.graph import (
    AnnotateOpPattern,
    DeadCodeElimination,
    FuseOps,
    FuseTIR,
    GraphBuilder,
    GraphError,
    Legalize,
    OpPattern,
    PassContext,
    build_graph_module,
    get_pipeline,
)
from tilecraft.graph import script as gscript
from tilecraft.graph.transform import RecordPasses


def _mlp_module() -> tc.IRModule:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 16), "float32")
    w = bb.param("w", (16, 8), "float32")
    b = bb.param("b", (8,), "float32")
    bb.emit("sigmoid", [x])  # dead
    y = bb.emit("relu", [bb.emit("add", [bb.emit("matmul", [x, w]), b])])
    s = bb.emit("softmax", [y], {"axis": -1})
    out = bb.emit("multiply", [s, y])
    return tc.IRModule({"main": bb.finish(out, "main", {"num_input": 1})})


def test_legalize_leaves_input_untouched_and_names_functions() -> None:
    mod = _mlp_module()
    before = gscript.to_script(mod)
    legal = Legalize()(mod)
    assert gscript.to_script(mod) == before
    assert sorted(n for n, _ in legal.prim_funcs()) == [
        "add",
        "matmul",
        "multiply",
        "relu",
        "sigmoid",
        "softmax",
    ]


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("add", OpPattern.BROADCAST),
        ("relu", OpPattern.ELEMWISE),
        ("matmul", OpPattern.OUT_EWISE_FUSABLE),
        ("softmax", OpPattern.COMM_REDUCE),
        ("multiply", OpPattern.ELEMWISE),
    ],
)
def test_annotate_op_pattern(name: str, pattern: OpPattern) -> None:
    mod = AnnotateOpPattern()(Legalize()(_mlp_module()))
    assert mod[name].attrs["op_pattern"] == int(pattern)


def test_fusion_keeps_reductions_alone_and_dce_drops_dead_code() -> None:
    mod = _mlp_module()
    out = get_pipeline("zero")(mod)
    calls = [b.value.func for b in out["main"].bindings]
    # relu's result is used twice (softmax and multiply), so the chain ends at relu
    assert calls == ["fused_matmul_add_relu", "softmax", "multiply"]
    assert sorted(out.functions) == ["fused_matmul_add_relu", "main", "multiply", "softmax"]
    fused = out["fused_matmul_add_relu"]
    assert [p.name for p in fused.params] == ["x", "w", "b", "relu"]


def test_fuse_ops_then_fuse_tir_steps() -> None:
    legal = AnnotateOpPattern()(Legalize()(_mlp_module()))
    grouped = FuseOps()(legal)
    group = grouped["fused_matmul_add_relu"]
    assert type(group).__name__ == "Function"
    assert group.attrs["primitive"] is True
    merged = FuseTIR()(grouped)
    assert isinstance(merged["fused_matmul_add_relu"], tc.ir.PrimFunc)
    assert "matmul" in merged  # orphaned until DCE
    assert "matmul" not in DeadCodeElimination()(merged)


def test_fused_module_matches_numpy_and_pool_reuses_buffers() -> None:
    mod = get_pipeline("zero")(_mlp_module())
    exe = build_graph_module(mod, "cpu")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype("float32")
    b = rng.standard_normal(8).astype("float32")
    for n in (2, 5):
        x = rng.standard_normal((n, 16)).astype("float32")
        y = np.maximum(x @ w + b, 0)
        e = np.exp(y - y.max(-1, keepdims=True))
        np.testing.assert_allclose(
            exe["main"](x, w, b), e / e.sum(-1, keepdims=True) * y, rtol=1e-5, atol=1e-6
        )


def test_pass_context_records_passes() -> None:
    rec = RecordPasses()
    with PassContext(instruments=[rec]):
        get_pipeline("zero")(_mlp_module())
    assert rec.names == [
        "Legalize",
        "AnnotateOpPattern",
        "FuseOps",
        "FuseTIR",
        "DeadCodeElimination",
        "zero",
    ]


def test_unknown_pipeline() -> None:
    with pytest.raises(GraphError, match="unknown pipeline 'fast'"):
        get_pipeline("fast")


def test_executable_rejects_wrong_inputs() -> None:
    exe = build_graph_module(get_pipeline("zero")(_mlp_module()), "cpu")
    x = np.zeros((3, 16), "float32")
    w = np.zeros((16, 8), "float32")
    b = np.zeros(8, "float32")
    with pytest.raises(GraphError, match=r"main: expected 3 arguments \(x, w, b\), got 2"):
        exe["main"](x, w)
    with pytest.raises(
        GraphError,
        match=r"argument 1 \(w\) has shape \(16, 9\), expected "
        r"Tensor\(\(16, 8\), float32\)",
    ):
        exe["main"](x, np.zeros((16, 9), "float32"), b)
    with pytest.raises(GraphError, match=r"argument 0 \(x\) has dtype float64, expected float32"):
        exe["main"](x.astype("float64"), w, b)
    with pytest.raises(GraphError, match=r"argument 0 \(x\) has shape \(3,\)"):
        exe["main"](np.zeros(3, "float32"), w, b)
    with pytest.raises(GraphError, match="no function 'forward'"):
        exe["forward"]


def test_symbolic_extent_must_agree_across_inputs() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 4), "float32")
    y = bb.param("y", ("n", 4), "float32")
    mod = tc.IRModule({"main": bb.finish(bb.emit("add", [x, y]), "main")})
    with tc.Target("cpu"):  # build runs no pipeline: legalize and fuse first
        mod = get_pipeline("zero")(mod)
    exe = build_graph_module(mod, "cpu")
    with pytest.raises(GraphError, match=r"argument 1 \(y\).*dimension 0 should be 3"):
        exe["main"](np.zeros((3, 4), "float32"), np.zeros((5, 4), "float32"))
    out = exe["main"](np.ones((3, 4), "float32"), np.ones((3, 4), "float32"))
    np.testing.assert_array_equal(out, np.full((3, 4), 2, "float32"))


def test_fuse_tir_reuses_one_prim_func_for_equal_groups() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 8), "float32")
    y = bb.param("y", ("n", 8), "float32")
    b = bb.param("b", (8,), "float32")
    w = bb.param("w", (8, 4), "float32")
    u = bb.emit("relu", [bb.emit("add", [x, b])])
    v = bb.emit("relu", [bb.emit("add", [y, b])])
    out = bb.emit("add", [bb.emit("matmul", [u, w]), bb.emit("matmul", [v, w])])
    mod = get_pipeline("zero")(tc.IRModule({"main": bb.finish(out, "main")}))
    calls = [b.value.func for b in mod["main"].bindings]
    assert calls == ["fused_add_relu", "fused_add_relu", "matmul", "fused_matmul_add1"]
    assert "fused_add_relu1" not in mod
    exe = build_graph_module(mod, "cpu")
    rng = np.random.default_rng(2)
    xv, yv = (rng.standard_normal((3, 8)).astype("float32") for _ in range(2))
    bv = rng.standard_normal(8).astype("float32")
    wv = rng.standard_normal((8, 4)).astype("float32")
    expected = np.maximum(xv + bv, 0) @ wv + np.maximum(yv + bv, 0) @ wv
    np.testing.assert_allclose(exe["main"](xv, yv, bv, wv), expected, rtol=1e-5, atol=1e-5)


def test_fuse_tir_keeps_block_and_buffer_names_unique() -> None:
    bb = GraphBuilder()
    x = bb.param("x", (4, 8), "float32")
    h = bb.emit("add", [bb.emit("add", [x, x]), x])
    mod = get_pipeline("zero")(tc.IRModule({"main": bb.finish(bb.emit("relu", [h]), "main")}))
    fused = mod["fused_add_add1_relu"]
    blocks: list[str] = []
    tc.ir.post_order_visit(
        fused.body, lambda n: blocks.append(n.name) if isinstance(n, tc.ir.Block) else None
    )
    assert blocks == ["T_add", "T_add_1", "T_relu", "root"]
    assert tc.script.parse(fused.script()).script() == fused.script()

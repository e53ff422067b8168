"""Block analysis of every topi operator: BlockInfos, patterns, einsum, GEMV, reductions, reads.

Each workload's expected analysis is one line per block:
``name dom_kind pattern [einsum C=A:layout*B:layout] [gemv vector=V] [reducer[/inner]]
reads DOMINANT [out]``.
"""

from __future__ import annotations

import pytest
from analysis_workloads import WORKLOADS

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.graph.transform import analyze_op_pattern
from tilecraft.schedule import analysis as an


def summary(b: an.BlockInfo) -> str:
    """The one-line description the table below states."""
    parts = [b.name, b.dom_kind(), b.pattern.name]
    e = an.classify_einsum(b)
    if e is not None:
        lhs, rhs = e.lhs, e.rhs
        layouts = f"{lhs.buffer.name}:{lhs.layout}*{rhs.buffer.name}:{rhs.layout}"
        parts.append(f"einsum {e.output.layout}={layouts}")
    g = an.detect_gemv(b)
    if g is not None:
        parts.append(f"gemv vector={g.vector.buffer.name}")
    r = an.detect_reduction(b)
    if r is not None:
        parts.append(r.reducer.value + ("/inner" if r.reduce_innermost else ""))
    d = an.dominant_read(b)
    parts.append(f"reads {d.region.buffer.name}" if d is not None else "reads nothing")
    if b.is_output:
        parts.append("out")
    return " ".join(parts)


EXPECTED: dict[str, tuple[str, list[str]]] = {
    "matmul": (
        "OUT_EWISE_FUSABLE",
        [
            "matmul SSR OUT_EWISE_FUSABLE einsum IJ=A:IK*B:KJ sum/inner reads A out",
        ],
    ),
    "matmul_symbolic": (
        "OUT_EWISE_FUSABLE",
        [
            "matmul SSR OUT_EWISE_FUSABLE einsum IJ=A:IK*B:KJ sum/inner reads A out",
        ],
    ),
    "matmul_transpose_a": (
        "OUT_EWISE_FUSABLE",
        [
            "matmul SSR OUT_EWISE_FUSABLE einsum IJ=A:KI*B:KJ sum reads A out",
        ],
    ),
    "matmul_transpose_b": (
        "OUT_EWISE_FUSABLE",
        [
            "matmul SSR OUT_EWISE_FUSABLE einsum IJ=A:IK*B:JK sum/inner reads A out",
        ],
    ),
    "batch_matmul": (
        "OUT_EWISE_FUSABLE",
        [
            "matmul SSSR OUT_EWISE_FUSABLE einsum SIJ=A:SIK*B:SKJ sum/inner reads A out",
        ],
    ),
    "batch_matmul_broadcast": (
        "OUT_EWISE_FUSABLE",
        [
            "matmul SSSR OUT_EWISE_FUSABLE einsum IIJ=A:IIK*B:-KJ sum/inner reads A out",
        ],
    ),
    "dense_bias_symbolic": (
        "OUT_EWISE_FUSABLE",
        [
            "dense SSR OUT_EWISE_FUSABLE einsum IJ=x:IK*W:JK sum/inner reads x",
            "T_add SS BROADCAST reads dense out",
        ],
    ),
    "dense_gemv": (
        "OUT_EWISE_FUSABLE",
        [
            "dense SSR OUT_EWISE_FUSABLE einsum IJ=x:IK*W:JK gemv vector=x sum/inner reads W out",
        ],
    ),
    "conv2d": (
        "OUT_EWISE_FUSABLE",
        [
            "pad_temp SSSS INJECTIVE reads X",
            "conv2d SSSSRRR OUT_EWISE_FUSABLE sum reads pad_temp out",
        ],
    ),
    "conv2d_symbolic": (
        "OUT_EWISE_FUSABLE",
        [
            "pad_temp SSSS INJECTIVE reads X",
            "conv2d SSSSRRR OUT_EWISE_FUSABLE sum reads pad_temp out",
        ],
    ),
    "max_pool2d": (
        "COMM_REDUCE",
        [
            "max_pool2d SSSSRR COMM_REDUCE max reads X out",
        ],
    ),
    "avg_pool2d": (
        "COMM_REDUCE",
        [
            "avg_pool2d_sum SSSSRR COMM_REDUCE sum reads X",
            "avg_pool2d SSSS ELEMWISE reads avg_pool2d_sum out",
        ],
    ),
    "softmax_symbolic": (
        "COMM_REDUCE",
        [
            "T_softmax_maxelem SR COMM_REDUCE max/inner reads x",
            "T_softmax_exp SS BROADCAST reads x",  # each exponential computed once
            "T_softmax_expsum SR COMM_REDUCE sum/inner reads T_softmax_exp",
            "T_softmax_norm SS BROADCAST reads T_softmax_exp out",
        ],
    ),
    "log_softmax": (
        "COMM_REDUCE",
        [
            "T_log_softmax_maxelem SR COMM_REDUCE max/inner reads x",
            "T_log_softmax_expsum SR COMM_REDUCE sum/inner reads x",
            "T_log_softmax_norm SS BROADCAST reads x out",
        ],
    ),
    "layer_norm": (
        "COMM_REDUCE",
        [
            "T_layer_norm_sum SR COMM_REDUCE sum/inner reads x",
            "T_layer_norm_var SR COMM_REDUCE sum/inner reads x",
            "T_layer_norm SS BROADCAST reads x out",
        ],
    ),
    "rms_norm": (
        "COMM_REDUCE",
        [
            "T_rms_norm_sqsum SR COMM_REDUCE sum/inner reads x",
            "T_rms_norm SS BROADCAST reads x out",
        ],
    ),
    "group_norm": (
        "COMM_REDUCE",
        [
            "T_group_norm_sum SSRRR COMM_REDUCE sum reads x",
            "T_group_norm_var SSRRR COMM_REDUCE sum reads x",
            "T_group_norm SSSS INJECTIVE reads x out",
        ],
    ),
    "sum_last": (
        "COMM_REDUCE",
        [
            "T_sum SR COMM_REDUCE sum/inner reads x out",
        ],
    ),
    "sum_first": (
        "COMM_REDUCE",
        [
            "T_sum SR COMM_REDUCE sum reads x out",
        ],
    ),
    "sum_all": (
        "COMM_REDUCE",
        [
            "T_sum RR COMM_REDUCE sum/inner reads x out",
        ],
    ),
    "prod": (
        "COMM_REDUCE",
        [
            "T_prod SR COMM_REDUCE prod/inner reads x out",
        ],
    ),
    "max": (
        "COMM_REDUCE",
        [
            "T_max SSR COMM_REDUCE max/inner reads x out",
        ],
    ),
    "min": (
        "COMM_REDUCE",
        [
            "T_min SR COMM_REDUCE min/inner reads x out",
        ],
    ),
    "mean": (
        "COMM_REDUCE",
        [
            "T_mean_sum SR COMM_REDUCE sum/inner reads x",
            "T_mean S ELEMWISE reads T_mean_sum out",
        ],
    ),
    "argmax": (
        "OPAQUE",
        [
            "T_argmax SR OPAQUE reads x out",
        ],
    ),
    "argmin": (
        "OPAQUE",
        [
            "T_argmin SR OPAQUE reads x out",
        ],
    ),
    "relu": (
        "ELEMWISE",
        [
            "T_relu SS ELEMWISE reads x out",
        ],
    ),
    "gelu": (
        "ELEMWISE",
        [
            "T_gelu SS ELEMWISE reads x out",
        ],
    ),
    "silu": (
        "ELEMWISE",
        [
            "T_silu SS ELEMWISE reads x out",
        ],
    ),
    "sigmoid": (
        "ELEMWISE",
        [
            "T_sigmoid SS ELEMWISE reads x out",
        ],
    ),
    "tanh": (
        "ELEMWISE",
        [
            "T_tanh SS ELEMWISE reads x out",
        ],
    ),
    "exp": (
        "ELEMWISE",
        [
            "T_exp SS ELEMWISE reads x out",
        ],
    ),
    "rsqrt": (
        "ELEMWISE",
        [
            "T_rsqrt SS ELEMWISE reads x out",
        ],
    ),
    "abs": (
        "ELEMWISE",
        [
            "T_abs SS ELEMWISE reads x out",
        ],
    ),
    "negative": (
        "ELEMWISE",
        [
            "T_negative SS ELEMWISE reads x out",
        ],
    ),
    "clip": (
        "ELEMWISE",
        [
            "T_clip SS ELEMWISE reads x out",
        ],
    ),
    "cast": (
        "ELEMWISE",
        [
            "T_cast SS ELEMWISE reads x out",
        ],
    ),
    "identity": (
        "ELEMWISE",
        [
            "T_copy SS ELEMWISE reads x out",
        ],
    ),
    "add_same_shape": (
        "ELEMWISE",
        [
            "T_add SS ELEMWISE reads a out",
        ],
    ),
    "add_row_bias": (
        "BROADCAST",
        [
            "T_add SS BROADCAST reads a out",
        ],
    ),
    "multiply_column": (
        "BROADCAST",
        [
            "T_multiply SS BROADCAST reads a out",
        ],
    ),
    "subtract_scalar": (
        "BROADCAST",
        [
            "T_subtract SS BROADCAST reads a out",
        ],
    ),
    "maximum": (
        "ELEMWISE",
        [
            "T_maximum SS ELEMWISE reads a out",
        ],
    ),
    "power": (
        "ELEMWISE",
        [
            "T_power SS ELEMWISE reads a out",
        ],
    ),
    "less": (
        "ELEMWISE",
        [
            "T_less SS ELEMWISE reads a out",
        ],
    ),
    "divide": (
        "BROADCAST",
        [
            "T_divide SS BROADCAST reads a out",
        ],
    ),
    "where": (
        "BROADCAST",
        [
            "T_where SS BROADCAST reads c out",
        ],
    ),
    "transpose": (
        "INJECTIVE",
        [
            "T_transpose SS INJECTIVE reads x out",
        ],
    ),
    "permute": (
        "INJECTIVE",
        [
            "T_transpose SS INJECTIVE reads x out",
        ],
    ),
    "reshape": (
        "INJECTIVE",
        [
            "T_reshape SS INJECTIVE reads x out",
        ],
    ),
    "pad": (
        "INJECTIVE",
        [
            "T_pad SS INJECTIVE reads x out",
        ],
    ),
    "concat": (
        "INJECTIVE",
        [
            "T_concat SS INJECTIVE reads x out",
        ],
    ),
    "split": (
        "INJECTIVE",
        [
            "T_split SS ELEMWISE reads x out",
            "T_split_1 SS INJECTIVE reads x out",
        ],
    ),
    "take": (
        "INJECTIVE",
        [
            "T_take SS INJECTIVE reads x out",
        ],
    ),
    "embedding": (
        "INJECTIVE",
        [
            "T_embedding SSS INJECTIVE reads ids out",
        ],
    ),
    "rotary": (
        "INJECTIVE",
        [
            "T_rotary SSS INJECTIVE reads x out",
        ],
    ),
    "rotary_positions": (
        "INJECTIVE",
        [
            "T_rotary SSSS INJECTIVE reads x out",
        ],
    ),
    "causal_mask": (
        "ELEMWISE",
        [
            "T_causal SSS ELEMWISE reads s out",
        ],
    ),
    "attention": (
        "COMM_REDUCE",
        [
            "attention_scores SSSR OUT_EWISE_FUSABLE einsum SIJ=q:SIK*k:SJK sum/inner reads q",
            "attention_masked SSS ELEMWISE reads attention_scores",
            "attention_softmax_maxelem SSR COMM_REDUCE max/inner reads attention_masked",
            "attention_softmax_exp SSS BROADCAST reads attention_masked",
            "attention_softmax_expsum SSR COMM_REDUCE sum/inner reads attention_softmax_exp",
            "attention_softmax_norm SSS BROADCAST reads attention_softmax_exp",
            "attention SSSR OUT_EWISE_FUSABLE einsum SIJ=attention_softmax_norm:SIK*v:SKJ"
            " sum/inner reads attention_softmax_norm out",
        ],
    ),
    "fused_attention": (
        "COMM_REDUCE",
        [
            "attention_scores SSSR OUT_EWISE_FUSABLE einsum SIJ=q:SIK*k:SJK sum/inner reads q",
            "attention_masked SSS ELEMWISE reads attention_scores",
            "attention_softmax_maxelem SSR COMM_REDUCE max/inner reads attention_masked",
            "attention_softmax_arg SSS BROADCAST reads attention_masked",
            "attention_softmax_exp SSS ELEMWISE reads attention_softmax_arg",
            "attention_softmax_weight SSS ELEMWISE reads attention_softmax_exp",
            "attention_weighted SSSR OUT_EWISE_FUSABLE einsum"
            " SIJ=attention_softmax_weight:SIK*v:SKJ sum/inner reads attention_softmax_weight",
            "attention_softmax_expsum SSR COMM_REDUCE sum/inner reads attention_softmax_weight",
            "attention SSS BROADCAST reads attention_weighted out",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_topi_workload_analysis(name: str) -> None:
    func = WORKLOADS[name]()
    sch = tc.Schedule(func)
    infos = an.normalize_prim_func(sch)
    assert infos is not None, an.why_not_normalized(sch)
    pattern, blocks = EXPECTED[name]
    assert an.classify_prim_func(func).name == pattern
    assert analyze_op_pattern(func).name == pattern  # the graph pass uses the same analysis
    assert [summary(b) for b in infos] == blocks
    assert tc.ir.structural_equal(sch.func, func)  # analysis changes nothing


def test_every_workload_has_an_expectation() -> None:
    assert sorted(EXPECTED) == sorted(WORKLOADS)


UNARY = ["abs", "ceil", "cos", "erf", "exp", "floor", "gelu", "identity", "log", "negative"]
UNARY += ["relu", "rsqrt", "sigmoid", "silu", "sin", "sqrt", "tanh"]
BINARY = ["add", "divide", "equal", "floor_divide", "floor_mod", "greater", "greater_equal"]
BINARY += ["less", "less_equal", "maximum", "minimum", "multiply", "not_equal", "power", "subtract"]
LOGICAL = ["logical_and", "logical_or"]


@pytest.mark.parametrize("op", UNARY + BINARY + LOGICAL)
def test_elementwise_ops_are_elementwise(op: str) -> None:
    dtype = "bool" if op in LOGICAL else "float32"
    x, y = te.placeholder((4, 8), dtype, name="x"), te.placeholder((4, 8), dtype, name="y")
    out = getattr(topi, op)(x) if op in UNARY else getattr(topi, op)(x, y)
    func = te.create_prim_func([x, y, out] if op not in UNARY else [x, out])
    infos = an.normalize_prim_func(tc.Schedule(func))
    assert infos is not None
    assert [(b.dom_kind(), b.is_elementwise(), b.is_injective()) for b in infos] == [
        ("SS", True, True)
    ]
    assert an.classify_prim_func(func) is an.OpPattern.ELEMWISE
    assert an.detect_reduction(infos[0]) is None
    assert an.classify_einsum(infos[0]) is None


# builders, not operators: each is exercised through the operators above
HELPERS = {"broadcast_shape", "elementwise", "unary", "reduce"}
COVERED_BY_WORKLOADS = {
    "matmul", "dense", "conv2d", "max_pool2d", "avg_pool2d", "softmax", "log_softmax",
    "layer_norm", "rms_norm", "group_norm", "sum", "prod", "max", "min", "mean", "argmax",
    "argmin", "clip", "cast", "where", "transpose", "permute", "reshape", "pad", "concat",
    "split", "take", "embedding", "rotary_embedding", "causal_attention", "attention", "rotary",
    "causal_mask",
}  # fmt: skip


def test_every_topi_operator_is_covered() -> None:
    public = {n for n in dir(topi) if not n.startswith("_") and callable(getattr(topi, n))}
    covered = COVERED_BY_WORKLOADS | set(UNARY) | set(BINARY) | set(LOGICAL) | HELPERS
    assert public - covered == set()

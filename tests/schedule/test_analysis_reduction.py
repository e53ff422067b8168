"""detect_reduction and detect_gemv: reducers, iterators, layouts, and what is rejected."""

from __future__ import annotations

import pytest
from analysis_workloads import WORKLOADS

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.schedule import Schedule
from tilecraft.schedule import analysis as an
from tilecraft.script import parse


def _block(func: tc.ir.PrimFunc, name: str) -> an.BlockInfo:
    infos = an.normalize_prim_func(Schedule(func))
    assert infos is not None
    return next(b for b in infos if b.name == name)


def _init(r: an.ReductionInfo) -> float | None:
    return None if r.init is None else r.init.value  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("workload", "block", "reducer", "init", "spatial", "reduce", "inner"),
    [
        ("sum_last", "T_sum", an.ReduceKind.SUM, 0.0, ["vi0"], ["vk0"], True),
        ("sum_first", "T_sum", an.ReduceKind.SUM, 0.0, ["vi0"], ["vk0"], False),
        ("sum_all", "T_sum", an.ReduceKind.SUM, 0.0, [], ["vk0", "vk1"], True),
        ("prod", "T_prod", an.ReduceKind.PROD, 1.0, ["vi0"], ["vk0"], True),
        ("max", "T_max", an.ReduceKind.MAX, float("-inf"), ["vi0", "vi1"], ["vk0"], True),
        ("min", "T_min", an.ReduceKind.MIN, float("inf"), ["vi0"], ["vk0"], True),
        ("softmax_symbolic", "T_softmax_expsum", an.ReduceKind.SUM, 0.0, ["vi0"], ["vk0"], True),
        ("max_pool2d", "max_pool2d", an.ReduceKind.MAX, float("-inf"), 4, ["vry", "vrx"], False),
        ("group_norm", "T_group_norm_sum", an.ReduceKind.SUM, 0.0, 2, 3, False),
        ("matmul", "matmul", an.ReduceKind.SUM, 0.0, ["vi0", "vi1"], ["vk"], True),
        ("conv2d", "conv2d", an.ReduceKind.SUM, 0.0, 4, 3, False),
    ],
)
def test_reductions(
    workload: str,
    block: str,
    reducer: an.ReduceKind,
    init: float,
    spatial: list[str] | int,
    reduce: list[str] | int,
    inner: bool,
) -> None:
    info = _block(WORKLOADS[workload](), block)
    r = an.detect_reduction(info)
    assert r is not None, an.why_not_reduction(info)
    assert an.why_not_reduction(info) is None
    assert (r.block_name, r.reducer, _init(r), r.reduce_innermost) == (block, reducer, init, inner)
    assert r.buffer is info.writes[0].buffer
    got_s, got_r = [v.name for v in r.spatial_iters], [v.name for v in r.reduce_iters]
    assert (got_s if isinstance(spatial, list) else len(got_s)) == spatial
    assert (got_r if isinstance(reduce, list) else len(got_r)) == reduce


def test_folded_value_and_update_without_init() -> None:
    sch = Schedule(WORKLOADS["matmul"]())
    block = sch.get_block("matmul")
    r = an.detect_reduction(sch.get(block))  # type: ignore[arg-type]
    assert r is not None
    assert isinstance(r.value, tc.ir.Mul)
    sch.decompose_reduction(block, sch.get_loops(block)[2])
    r = an.detect_reduction(sch.get(block))  # type: ignore[arg-type]
    assert r is not None
    assert r.init is None
    assert r.reducer is an.ReduceKind.SUM


def _one_block(body: str, init: str = "C[vi] = T.float32(0.0)") -> tc.ir.PrimFunc:
    return parse(f"""
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), C: T.Buffer((16,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(16, k)
            T.reads(A[vi, vk], C[0:16])
            T.writes(C[0:16])
            with T.init():
                {init}
            {body}
""")


@pytest.mark.parametrize(
    ("body", "init", "reason"),
    [
        (
            "C[vi] = C[vi] - A[vi, vk]",
            "C[vi] = T.float32(0.0)",
            "the store is not C = op(C, value)",
        ),
        ("C[vi] = A[vi, vk] + C[vi]", "C[vi] = T.float32(0.0)", None),
        ("C[vi] = T.min(A[vi, vk], C[vi])", "C[vi] = T.float32(0.0)", None),
        ("C[vi] = C[vi] + A[vi, vk] * C[vk]", "C[vi] = T.float32(0.0)", "reads the output C again"),
        ("C[vk] = C[vk] + A[vi, vk]", "C[vk] = T.float32(0.0)", "a reduction iterator indexes"),
        ("C[vi] = C[vi] + A[vi, vk]", "C[0] = T.float32(0.0)", "its init is not one store"),
    ],
)
def test_script_reductions(body: str, init: str, reason: str | None) -> None:
    info = _block(_one_block(body, init), "C")
    why = an.why_not_reduction(info)
    if reason is None:
        assert why is None
        assert an.detect_reduction(info) is not None
    else:
        assert why is not None
        assert why.startswith('block "C"')
        assert reason in why
        assert an.detect_reduction(info) is None


@pytest.mark.parametrize(
    ("workload", "block", "reason"),
    [
        ("argmax", "T_argmax", 'block "T_argmax" does not write a single buffer with one store'),
        ("relu", "T_relu", 'block "T_relu" has no reduction iterator'),
        ("mean", "T_mean", 'block "T_mean" has no reduction iterator'),
    ],
)
def test_not_reductions(workload: str, block: str, reason: str) -> None:
    info = _block(WORKLOADS[workload](), block)
    assert an.detect_reduction(info) is None
    assert an.why_not_reduction(info) == reason


# ---------------------------------------------------------------------------------------
# GEMV
def test_linear_at_batch_one_is_a_gemv() -> None:
    g = an.detect_gemv(_block(WORKLOADS["dense_gemv"](), "dense"))
    assert g is not None
    assert (g.vector.buffer.name, g.matrix.buffer.name, g.vector_is_lhs) == ("x", "W", True)
    assert g.matrix_k_contiguous
    assert g.vector_k_contiguous
    assert g.einsum.lhs is g.vector
    assert g.einsum.rhs is g.matrix


def _gemv_script(c_idx: str, c_shape: str, a: str, b: str, grid: str, axes: str) -> str:
    return f"""
@T.prim_func
def main(M: T.Buffer((32, 16), "float32"), Mt: T.Buffer((16, 32), "float32"),
         v: T.Buffer((16,), "float32"), Q: T.Buffer((4, 16), "float32"),
         K: T.Buffer((4, 32, 16), "float32"), C: T.Buffer({c_shape}, "float32")):
    for {grid}:
        with T.block("C"):
{axes}
            T.reads({a}, {b}, C[{c_idx}])
            T.writes(C[{c_idx}])
            with T.init():
                C[{c_idx}] = T.float32(0.0)
            C[{c_idx}] = C[{c_idx}] + {a} * {b}
"""


_I = "            vi = T.axis.spatial(32, i)\n"
_K = "            vk = T.axis.reduce(16, k)"
_H = "            vh = T.axis.spatial(4, h)\n"


@pytest.mark.parametrize(
    ("a", "b", "extra", "vector", "matrix", "contiguous"),
    [
        ("M[vi, vk]", "v[vk]", "", "v", "M", True),  # y = M x
        ("v[vk]", "Mt[vk, vi]", "", "v", "Mt", False),  # y = x M (matrix K-major)
        ("Q[vh, vk]", "K[vh, vi, vk]", "h", "Q", "K", True),  # decode attention scores
    ],
)
def test_script_gemvs(
    a: str, b: str, extra: str, vector: str, matrix: str, contiguous: bool
) -> None:
    if extra:
        text = _gemv_script("vh, vi", "(4, 32)", a, b, "h, i, k in T.grid(4, 32, 16)", _H + _I + _K)
    else:
        text = _gemv_script("vi", "(32,)", a, b, "i, k in T.grid(32, 16)", _I + _K)
    g = an.detect_gemv(_block(parse(text), "C"))
    assert g is not None
    assert (g.vector.buffer.name, g.matrix.buffer.name) == (vector, matrix)
    assert g.matrix_k_contiguous is contiguous
    assert [v.name for v in g.einsum.batch_iters] == (["vh"] if extra else [])


@pytest.mark.parametrize(
    ("workload", "block", "reason"),
    [
        ("matmul", "matmul", "both operands have non-unit spatial iterators (a matmul)"),
        # a symbolic batch is not known to be 1: low-batch GEMM, not GEMV
        ("dense_bias_symbolic", "dense", "both operands have non-unit spatial iterators"),
        ("sum_last", "T_sum", "the accumulated value is not a product"),
    ],
)
def test_not_gemvs(workload: str, block: str, reason: str) -> None:
    info = _block(WORKLOADS[workload](), block)
    assert an.detect_gemv(info) is None
    why = an.why_not_gemv(info)
    assert why is not None
    assert reason in why


def test_batched_dot_product_is_not_a_gemv() -> None:
    text = _gemv_script("vh", "(4,)", "Q[vh, vk]", "Q[vh, vk]", "h, k in T.grid(4, 16)", _H + _K)
    text = text.replace("Q[vh, vk] * Q[vh, vk]", "Q[vh, vk] * K[vh, 0, vk]")
    text = text.replace("T.reads(Q[vh, vk], Q[vh, vk]", "T.reads(Q[vh, vk], K[vh, 0, vk]")
    info = _block(parse(text), "C")
    assert an.classify_einsum(info) is not None
    assert an.why_not_gemv(info) == (
        'block "C": neither operand has a non-unit spatial iterator (a dot product)'
    )


@pytest.mark.parametrize("fn", [an.detect_reduction, an.why_not_reduction, an.detect_gemv])
def test_misuse_raises_schedule_error(fn: object) -> None:
    with pytest.raises(ScheduleError, match=r"argument 'block': expected a Block or BlockInfo"):
        fn("T_sum")  # type: ignore[operator]

"""classify_einsum: the S/I/J/K groups, operand roles and layouts, and what is rejected."""

from __future__ import annotations

import re

import pytest
from analysis_workloads import WORKLOADS

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.schedule import Schedule
from tilecraft.schedule import analysis as an
from tilecraft.script import parse

IndexRole = an.IndexRole


def _block(func: tc.ir.PrimFunc, name: str) -> an.BlockInfo:
    infos = an.normalize_prim_func(Schedule(func))
    assert infos is not None
    return next(b for b in infos if b.name == name)


def _names(vs: tuple[tc.ir.Var, ...]) -> list[str]:
    return [v.name for v in vs]


def test_matmul() -> None:
    e = an.classify_einsum(_block(WORKLOADS["matmul"](), "matmul"))
    assert e is not None
    assert e.block_name == "matmul"
    assert (e.output.buffer.name, e.lhs.buffer.name, e.rhs.buffer.name) == ("matmul", "A", "B")
    assert (_names(e.batch_iters), _names(e.i_iters)) == ([], ["vi0"])
    assert (_names(e.j_iters), _names(e.k_iters)) == (["vi1"], ["vk"])
    assert e.output.roles == (IndexRole.ROW, IndexRole.COL)
    assert (e.output.layout, e.lhs.layout, e.rhs.layout) == ("IJ", "IK", "KJ")
    assert (e.lhs.region_index, e.rhs.region_index, e.output.region_index) == (0, 1, 0)
    assert e.lhs.reduce_innermost
    assert not e.rhs.reduce_innermost
    assert not e.output.reduce_innermost
    assert not e.is_canonical()
    assert an.why_not_einsum(_block(WORKLOADS["matmul"](), "matmul")) is None


@pytest.mark.parametrize(
    ("workload", "block", "layouts", "inner", "canonical"),
    [
        ("matmul_transpose_a", "matmul", ("IJ", "KI", "KJ"), (False, False), False),
        ("matmul_transpose_b", "matmul", ("IJ", "IK", "JK"), (True, True), True),
        ("matmul_symbolic", "matmul", ("IJ", "IK", "KJ"), (True, False), False),
        ("batch_matmul", "matmul", ("SIJ", "SIK", "SKJ"), (True, False), False),
        # B's batch extent 1 is indexed by the constant 0: the batch iterator is A's alone
        ("batch_matmul_broadcast", "matmul", ("IIJ", "IIK", "-KJ"), (True, False), False),
        ("dense_bias_symbolic", "dense", ("IJ", "IK", "JK"), (True, True), True),
        ("attention", "attention_scores", ("SIJ", "SIK", "SJK"), (True, True), True),
        ("attention", "attention", ("SIJ", "SIK", "SKJ"), (True, False), False),
    ],
)
def test_layouts(
    workload: str,
    block: str,
    layouts: tuple[str, str, str],
    inner: tuple[bool, bool],
    canonical: bool,
) -> None:
    e = an.classify_einsum(_block(WORKLOADS[workload](), block))
    assert e is not None
    assert (e.output.layout, e.lhs.layout, e.rhs.layout) == layouts
    assert (e.lhs.reduce_innermost, e.rhs.reduce_innermost) == inner
    assert e.is_canonical() is canonical


def test_conv2d_is_an_einsum_after_reindexing_its_input() -> None:
    func = WORKLOADS["conv2d"]()
    raw = _block(func, "conv2d")
    assert an.classify_einsum(raw) is None
    assert an.why_not_einsum(raw) == (
        'block "conv2d": an index of operand pad_temp is not a single iterator'
    )
    sch = Schedule(func)
    sch.reindex(sch.get_block("conv2d"), ("read", 0))
    infos = an.normalize_prim_func(sch)
    assert infos is not None
    conv = next(b for b in infos if b.name == "conv2d")
    e = an.classify_einsum(conv)
    assert e is not None
    assert (e.lhs.buffer.name, e.rhs.buffer.name) == ("pad_temp_reindex", "W")
    # implicit GEMM: rows = batch and output pixels, columns = output channels
    assert (e.output.layout, e.lhs.layout, e.rhs.layout) == ("IJII", "IIIKKK", "JKKK")
    assert _names(e.i_iters) == ["vn", "vb", "vd"]
    assert _names(e.j_iters) == ["va"]
    assert _names(e.k_iters) == ["vrc", "vry", "vrx"]
    assert e.lhs.reduce_innermost
    assert e.rhs.reduce_innermost
    assert (e.lhs.region_index, e.rhs.region_index) == (0, 1)


def _script(
    update: str, c_shape: str = "(8, 4)", spatial: str = "i, j", out: str | None = None
) -> tc.ir.PrimFunc:
    """One reduction block over ``vi, vj`` (spatial) and ``vk`` (reduce) with ``update``."""
    axes = "".join(
        f"            v{n} = T.axis.spatial({ext}, {n})\n"
        for n, ext in (("i", 8), ("j", 4))
        if n in spatial
    )
    c_idx = ", ".join(f"v{n}" for n in spatial.split(", ")) if out is None else out
    loads = list(dict.fromkeys(re.findall(r"\w+\[[^\]]*\]", update)))
    reads = ", ".join(x for x in loads if not x.startswith("C[")) + f", C[{c_idx}]"
    extents = ", ".join("8" if n == "i" else "4" for n in spatial.split(", "))
    return parse(f"""
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((16, 4), "float32"),
         A16: T.Buffer((8, 16), "float16"), B16: T.Buffer((16, 4), "float16"),
         D: T.Buffer((16,), "float32"), G: T.Buffer((16, 16), "float32"),
         C: T.Buffer({c_shape}, "float32")):
    for {spatial}, k in T.grid({extents}, 16):
        with T.block("C"):
{axes}            vk = T.axis.reduce(16, k)
            T.reads({reads})
            T.writes(C[{c_idx}])
            with T.init():
                C[{c_idx}] = T.float32(0.0)
            C[{c_idx}] = {update}
""")


def _einsum_of(func: tc.ir.PrimFunc) -> an.EinsumInfo | None:
    return an.classify_einsum(_block(func, "C"))


def test_factor_order_does_not_decide_the_roles() -> None:
    e = _einsum_of(_script("C[vi, vj] + B[vk, vj] * A[vi, vk]"))
    assert e is not None
    assert (e.lhs.buffer.name, e.lhs.layout, e.rhs.buffer.name, e.rhs.layout) == (
        "A",
        "IK",
        "B",
        "KJ",
    )


def test_accumulator_on_the_right_and_casts_are_accepted() -> None:
    e = _einsum_of(
        _script("T.Cast('float32', A16[vi, vk]) * T.Cast('float32', B16[vk, vj]) + C[vi, vj]")
    )
    assert e is not None
    assert (e.lhs.buffer.name, e.rhs.buffer.name) == ("A16", "B16")


def test_gram_matrix_of_one_buffer_is_an_einsum() -> None:
    e = _einsum_of(_script("C[vi, vj] + G[vi, vk] * G[vj, vk]", c_shape="(8, 4)"))
    assert e is not None
    assert (e.lhs.layout, e.rhs.layout) == ("IK", "JK")
    assert e.lhs.buffer is e.rhs.buffer


def test_update_block_without_init_is_classified() -> None:
    sch = Schedule(WORKLOADS["matmul"]())
    block = sch.get_block("matmul")
    sch.decompose_reduction(block, sch.get_loops(block)[0])
    update = sch.get(block)
    assert isinstance(update, tc.ir.Block)
    assert update.init is None
    e = an.classify_einsum(update)
    assert e is not None
    assert e.lhs.layout == "IK"


@pytest.mark.parametrize(
    ("update", "spatial", "c_shape", "reason"),
    [
        ("C[vi, vj] + A[vi, vk]", "i, j", "(8, 4)", "the accumulated value is not a product"),
        (
            "C[vi, vj] + A[vi, vk] * B[vk, vj] * D[vk]",
            "i, j",
            "(8, 4)",
            "the accumulated value is not a product of two loads",
        ),
        ("C[vi, vj] - A[vi, vk] * B[vk, vj]", "i, j", "(8, 4)", "the update is not C = C + ..."),
        (
            "T.max(C[vi, vj], A[vi, vk] * B[vk, vj])",
            "i, j",
            "(8, 4)",
            "the update is not C = C + ...",
        ),
        (
            "C[vi] + A[vi, vk] * A[vi, vk]",
            "i",
            "(8,)",
            "both factors are the same access A (a square)",
        ),
        ("C[vi] + G[vk, vk] * A[vi, vk]", "i", "(8,)", "operand G is indexed twice by vk"),
        (
            "C[vi] + A[vi, vk] * D[vi]",
            "i",
            "(8,)",
            "reduce iterator vk does not index both operands",
        ),
        (
            "C[vi, vj] + A[vi, vk] * D[vk]",
            "i, j",
            "(8, 4)",
            "spatial iterator vj indexes the output only",
        ),
        (
            "C[vi] + A[vi, vk] * B[vk, vj]",
            "i, j",
            "(8,)",
            "spatial iterator vj does not index the output",
        ),
        ("C[vi, vk] + A[vi, vk] * D[vk]", "i", "(8, 16)", "reduce iterator vk indexes the output"),
        (
            "C[vi] + A[vi, vk + 0 * vi] * D[vk]",
            "i",
            "(8,)",
            "an index of operand A is not a single iterator",
        ),
        ("C[vi, vj] + A[vi, vk] * B[vk, vj]", "i, j", "(8, 4)", None),
    ],
)
def test_rejections_name_the_reason(
    update: str, spatial: str, c_shape: str, reason: str | None
) -> None:
    out = re.match(r"C\[([^\]]*)\]", update)  # the accumulator's indices are the output's
    func = _script(update, c_shape=c_shape, spatial=spatial, out=out.group(1) if out else None)
    block = _block(func, "C")
    why = an.why_not_einsum(block)
    if reason is None:
        assert why is None
        assert an.classify_einsum(block) is not None
    else:
        assert why == f'block "C": {reason}'
        assert an.classify_einsum(block) is None


@pytest.mark.parametrize(
    ("workload", "block", "reason"),
    [
        ("relu", "T_relu", "has no reduction iterator"),
        ("sum_last", "T_sum", ": the accumulated value is not a product"),
        ("max_pool2d", "max_pool2d", ": the update is not C = C + ..."),
        ("rms_norm", "T_rms_norm_sqsum", ": both factors are the same access x (a square)"),
        ("argmax", "T_argmax", "does not write a single buffer with one store"),
    ],
)
def test_topi_blocks_that_are_not_einsums(workload: str, block: str, reason: str) -> None:
    info = _block(WORKLOADS[workload](), block)
    assert an.classify_einsum(info) is None
    sep = "" if reason.startswith(":") else " "
    assert an.why_not_einsum(info) == f'block "{block}"{sep}{reason}'


def test_opaque_iterator_is_rejected() -> None:
    func = parse("""
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), D: T.Buffer((16,), "float32"),
         C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("C"):
            vi = T.axis.opaque(8, i)
            vk = T.axis.reduce(16, k)
            C[vi] = C[vi] + A[vi, vk] * D[vk]
""")
    info = _block(func, "C")
    assert info.dom_kind() == "OR"
    assert not info.is_reduction()
    assert not info.is_injective()
    assert an.why_not_einsum(info) == 'block "C" has an opaque iterator'


def test_misuse_raises_schedule_error() -> None:
    with pytest.raises(
        ScheduleError,
        match=r"classify_einsum: argument 'block': expected a Block or BlockInfo, got int",
    ):
        an.classify_einsum(3)  # type: ignore[arg-type]


def test_operands_missing_from_the_block_signature_are_rejected() -> None:
    block = _block(WORKLOADS["matmul"](), "matmul").block
    for stripped in (block.update(reads=()), block.update(writes=())):
        assert an.why_not_einsum(stripped) == (
            'block "matmul": its reads/writes do not list the operands and output'
        )

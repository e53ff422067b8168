"""dominant_read, read_accesses, producers/consumers/output_blocks and op patterns of blocks."""

from __future__ import annotations

import pytest
from analysis_workloads import WORKLOADS

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.errors import ScheduleError
from tilecraft.graph import AnnotateOpPattern, GraphBuilder, Legalize
from tilecraft.schedule import Schedule
from tilecraft.schedule import analysis as an
from tilecraft.script import parse


def _infos(func: tc.ir.PrimFunc) -> list[an.BlockInfo]:
    infos = an.normalize_prim_func(Schedule(func))
    assert infos is not None
    return infos


def _block(func: tc.ir.PrimFunc, name: str) -> an.BlockInfo:
    return next(b for b in _infos(func) if b.name == name)


def _summary(accesses: list[an.ReadAccess]) -> list[tuple[int, str, list[str], int | None]]:
    return [
        (a.index, a.region.buffer.name, [v.name for v in a.iters], a.footprint) for a in accesses
    ]


def test_read_accesses_of_matmul() -> None:
    info = _block(WORKLOADS["matmul"](), "matmul")
    assert _summary(an.read_accesses(info)) == [
        (0, "A", ["vi0", "vk"], 64 * 32),
        (1, "B", ["vi1", "vk"], 32 * 16),
        (2, "matmul", ["vi0", "vi1"], 64 * 16),
    ]
    d = an.dominant_read(info)
    assert d is not None
    assert d.region.buffer.name == "A"


def test_more_iterators_beat_a_larger_footprint() -> None:
    x = te.placeholder((4, 1024), "float32", name="x")
    s = te.placeholder((4,), "float32", name="s")
    out = te.compute(
        (4, 8), lambda i, j: x[i, 0] + s[i] * tc.ir.const(float(1), "float32") + x[i, j], name="y"
    )
    info = _block(te.create_prim_func([x, s, out]), "y")
    d = an.dominant_read(info)
    assert d is not None
    assert d.region.buffer.name == "x"


def test_ties_on_iterators_go_to_the_largest_footprint() -> None:
    # take: idx[i] (5 elements) and the gathered table x[0:8, j] (512) both use one iterator
    d = an.dominant_read(_block(WORKLOADS["take"](), "T_take"))
    assert d is not None
    assert (d.region.buffer.name, d.footprint, d.index) == ("x", 512, 1)
    # the smaller first operand loses to a larger second one
    a, b = (
        te.placeholder((16, 32), "float32", name="A"),
        te.placeholder((32, 64), "float32", name="B"),
    )
    d = an.dominant_read(_block(te.create_prim_func([a, b, topi.matmul(a, b)]), "matmul"))
    assert d is not None
    assert d.region.buffer.name == "B"


def test_footprint_is_capped_at_the_buffer_and_symbolic_is_none() -> None:
    accesses = an.read_accesses(_block(WORKLOADS["concat"](), "T_concat"))
    # x[i, j] and y[i, j - 64] over j in [0, 96): capped at 64 and 32 columns
    assert [(a.region.buffer.name, a.footprint) for a in accesses] == [("x", 512), ("y", 256)]
    info = _block(WORKLOADS["dense_bias_symbolic"](), "dense")
    assert [a.footprint for a in an.read_accesses(info)] == [None, 16 * 32, None]
    d = an.dominant_read(info)  # a symbolic footprint among the tied: the first read
    assert d is not None
    assert d.region.buffer.name == "x"


def test_blocks_reading_nothing_or_only_their_output() -> None:
    func = parse("""
@T.prim_func
def main(B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("fill"):
            vi = T.axis.spatial(8, i)
            T.reads()
            T.writes(B[vi])
            B[vi] = T.float32(0.0)
    for i in range(8):
        with T.block("double"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(B[vi])
            B[vi] = B[vi] * T.float32(2.0)
""")
    fill, double = _infos(func)
    assert an.dominant_read(fill) is None
    d = an.dominant_read(double)
    assert d is not None
    assert d.region.buffer.name == "B"
    assert fill.is_elementwise()
    assert double.is_elementwise()
    assert [b.name for b in an.producers([fill, double], double)] == ["fill"]
    assert [b.name for b in an.consumers([fill, double], fill)] == ["double"]
    assert [b.name for b in an.output_blocks([fill, double])] == ["fill", "double"]


def test_producers_consumers_outputs_of_softmax() -> None:
    infos = _infos(WORKLOADS["softmax_symbolic"]())
    mx, ex, es, norm = infos  # max, exp (computed once), sum of exp, normalised

    def names(bs: list[an.BlockInfo]) -> list[str]:
        return [b.name for b in bs]

    assert names(an.producers(infos, mx)) == []
    assert names(an.producers(infos, ex)) == ["T_softmax_maxelem"]
    assert names(an.producers(infos, es)) == ["T_softmax_exp"]
    assert names(an.producers(infos, norm)) == ["T_softmax_exp", "T_softmax_expsum"]
    assert names(an.consumers(infos, mx)) == ["T_softmax_exp"]
    assert names(an.consumers(infos, ex)) == ["T_softmax_expsum", "T_softmax_norm"]
    assert names(an.consumers(infos, norm)) == []
    assert names(an.output_blocks(infos)) == ["T_softmax_norm"]


def test_dataflow_misuse_raises_schedule_error() -> None:
    infos = _infos(WORKLOADS["relu"]())
    with pytest.raises(ScheduleError, match=r"producers: argument 'info': expected a BlockInfo"):
        an.producers(infos, "T_relu")  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match=r"output_blocks: argument 'infos'"):
        an.output_blocks(None)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match=r"dominant_read: argument 'block'"):
        an.dominant_read(infos)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# op patterns of hand-written blocks
def _pattern_func(body: str, params: str = "") -> tc.ir.PrimFunc:
    return parse(f"""
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((16, 4), "float32"),
         A16: T.Buffer((8, 16), "float16"), C: T.Buffer((8, 4), "float32"){params}):
{body}
""")


MAC = """
    for i, j, k in T.grid(8, 4, 16):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            vj = T.axis.spatial(4, j)
            vk = T.axis.reduce(16, k)
            T.reads(A16[vi, vk], B[vk, vj], A[vi, vk], C[vi, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + {update}
"""

SPATIAL = """
    for i, j in T.grid(8, 4):
        with T.block("D"):
            vi = T.axis.{kind}(8, i)
            vj = T.axis.spatial(4, j)
            T.reads(A[0:8, 0:16], C[vi, vj])
            T.writes(D[vi, vj])
            D[vi, vj] = {value}
"""


@pytest.mark.parametrize(
    ("update", "pattern"),
    [
        ("T.Cast('float32', A16[vi, vk]) * B[vk, vj]", an.OpPattern.OUT_EWISE_FUSABLE),
        (
            "T.Cast('float32', A16[vi, vk] * T.float16(2.0)) * B[vk, vj]",
            an.OpPattern.OUT_EWISE_FUSABLE,
        ),
        ("A[vi, vk] * A[vi, vk]", an.OpPattern.COMM_REDUCE),
        ("A[vi, vk] * B[vk, vj] * A[vi, vk]", an.OpPattern.COMM_REDUCE),
        ("T.exp(A[vi, vk])", an.OpPattern.COMM_REDUCE),
    ],
)
def test_reduction_patterns(update: str, pattern: an.OpPattern) -> None:
    func = _pattern_func(MAC.format(update=update))
    (info,) = _infos(func)
    assert info.pattern is pattern
    assert an.block_op_pattern(info.block) is pattern
    assert an.is_multiply_accumulate(info.block) is (pattern is an.OpPattern.OUT_EWISE_FUSABLE)
    assert an.classify_prim_func(func) is pattern


@pytest.mark.parametrize(
    ("kind", "value", "pattern"),
    [
        ("spatial", "C[vi, vj] * T.float32(2.0)", an.OpPattern.ELEMWISE),
        ("spatial", "C[vi, vj] + A[vi, 0]", an.OpPattern.BROADCAST),
        ("spatial", "C[vi, vj] + A[0, vj]", an.OpPattern.BROADCAST),
        ("spatial", "C[vi, vj] + A[vj, vi]", an.OpPattern.INJECTIVE),
        ("spatial", "C[vi, vj] + A[vi, vj + 1]", an.OpPattern.INJECTIVE),
        ("opaque", "C[vi, vj] * T.float32(2.0)", an.OpPattern.OPAQUE),
    ],
)
def test_spatial_patterns(kind: str, value: str, pattern: an.OpPattern) -> None:
    func = _pattern_func(SPATIAL.format(kind=kind, value=value), ', D: T.Buffer((8, 4), "float32")')
    (info,) = _infos(func)
    assert info.pattern is pattern
    assert an.classify_prim_func(func) is pattern


def test_function_patterns_combine_blocks() -> None:
    mac = MAC.format(update="A[vi, vk] * B[vk, vj]")
    relu = SPATIAL.format(kind="spatial", value="T.max(C[vi, vj], T.float32(0.0))")
    extra = ', D: T.Buffer((8, 4), "float32")'
    assert an.classify_prim_func(_pattern_func(mac + relu, extra)) is an.OpPattern.OUT_EWISE_FUSABLE
    two_macs = mac + mac.replace('block("C")', 'block("C2")')
    assert an.classify_prim_func(_pattern_func(two_macs)) is an.OpPattern.COMM_REDUCE
    no_blocks = "    for i in range(8):\n        C[i, 0] = A[i, 0]"
    assert an.classify_prim_func(_pattern_func(no_blocks)) is an.OpPattern.OPAQUE


NESTED = """
    with T.block("outer"):
        T.reads(A[0:8, 0:4])
        T.writes(C[0:8, 0:4])
        for i, j in T.grid(8, 4):
            with T.block("inner"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(4, j)
                T.reads(A[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = A[vi, vj]
"""


def test_nested_blocks_make_the_function_opaque() -> None:
    # a top-level block without iterators is the function's root, whatever its name
    as_root = _pattern_func(NESTED)
    assert [b.name for b in _infos(as_root)] == ["inner"]
    assert an.classify_prim_func(as_root) is an.OpPattern.ELEMWISE
    # under a root, the block holding another block is opaque
    nested = _pattern_func(
        '    with T.block("root"):\n' + "\n".join("    " + ln for ln in NESTED.splitlines())
    )
    (outer,) = _infos(nested)
    assert outer.name == "outer"
    assert outer.dom_kind() == ""
    assert outer.is_opaque()
    assert outer.is_injective()
    assert not outer.is_reduction()
    assert an.classify_prim_func(nested) is an.OpPattern.OPAQUE


def test_annotate_op_pattern_records_the_analysis() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 16), "float32")
    w = bb.param("w", (16, 8), "float32")
    y = bb.emit("softmax", [bb.emit("relu", [bb.emit("matmul", [x, w])])], {"axis": -1})
    mod = AnnotateOpPattern()(Legalize()(tc.IRModule({"main": bb.finish(y, "main")})))
    got = {name: f.attrs["op_pattern"] for name, f in mod.prim_funcs()}
    assert got == {name: int(an.classify_prim_func(f)) for name, f in mod.prim_funcs()}
    assert got == {"matmul": 4, "relu": 0, "softmax": 3}


def test_pattern_misuse_raises_schedule_error() -> None:
    with pytest.raises(
        ScheduleError, match=r"classify_prim_func: argument 'func': expected a PrimFunc"
    ):
        an.classify_prim_func(tc.IRModule({}))  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match=r"block_op_pattern: argument 'block'"):
        an.block_op_pattern(None)  # type: ignore[arg-type]

"""normalize_prim_func: BlockInfo/IterInfo contents, handles, traces, and when it declines."""

from __future__ import annotations

import pytest
from analysis_workloads import WORKLOADS, N

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import IterKind
from tilecraft.schedule import Schedule, Trace
from tilecraft.schedule import analysis as an
from tilecraft.script import parse

# loops k, i, j (outermost first) bound to iterators declared i, j, k
PERMUTED = """
@T.prim_func
def main(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 4), "float32"),
         C: T.Buffer((16, 4), "float32")):
    for k, i, j in T.grid(8, 16, 4):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            vj = T.axis.spatial(4, j)
            vk = T.axis.reduce(8, k)
            T.reads(A[vi, vk], B[vk, vj], C[vi, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def _normalized(func: tc.ir.PrimFunc) -> tuple[Schedule, list[an.BlockInfo]]:
    sch = Schedule(func)
    infos = an.normalize_prim_func(sch)
    assert infos is not None, an.why_not_normalized(sch)
    return sch, infos


def test_matmul_block_info() -> None:
    assert tc.schedule.analysis.normalize_prim_func is an.normalize_prim_func  # DESIGN's spelling
    sch, infos = _normalized(WORKLOADS["matmul"]())
    (info,) = infos
    assert info.name == "matmul"
    assert sch.get(info.block_rv) is info.block
    assert [it.kind for it in info.iters] == [IterKind.SPATIAL, IterKind.SPATIAL, IterKind.REDUCE]
    assert info.dom() == [64, 16, 32]
    assert info.dom_kind() == "SSR"
    assert [it.var.name for it in info.iters] == ["vi0", "vi1", "vk"]
    loops = sch.get_loops(info.block_rv)
    assert [lp.var for lp in info.loops] == [lp.var for lp in loops]
    for it, loop in zip(info.iters, loops, strict=True):
        assert it.binding is sch.get(loop).loop_var  # type: ignore[union-attr]
        assert info.iter_info(it.var) is it
    assert info.is_reduction()
    assert not info.is_injective()
    assert not info.is_elementwise()
    assert info.is_output
    assert info.pattern is an.OpPattern.OUT_EWISE_FUSABLE
    assert [r.buffer.name for r in info.reads] == ["A", "B", "matmul"]
    assert [w.buffer.name for w in info.writes] == ["matmul"]


def test_symbolic_extent_is_an_expression() -> None:
    _, infos = _normalized(WORKLOADS["softmax_symbolic"]())
    assert [b.dom_kind() for b in infos] == ["SR", "SS", "SR", "SS"]  # max, exp, sum, norm
    for b in infos:
        assert b.iters[0].dom is N
        assert b.iters[1].dom == 64
        assert not b.iters[0].is_unit


def test_iters_follow_loop_order_not_declaration_order() -> None:
    sch, (info,) = _normalized(parse(PERMUTED))
    assert info.dom_kind() == "RSS"
    assert [it.var.name for it in info.iters] == ["vk", "vi", "vj"]
    assert info.dom() == [8, 16, 4]
    assert [sch.get(lp).loop_var.name for lp in info.loops] == ["k", "i", "j"]  # type: ignore[union-attr]


def test_unit_extent_and_output_flags() -> None:
    _, infos = _normalized(WORKLOADS["dense_gemv"]())
    assert infos[0].iters[0].is_unit
    assert infos[0].iters[0].is_spatial
    assert infos[0].iters[2].is_reduce
    _, infos = _normalized(WORKLOADS["dense_bias_symbolic"]())
    assert [(b.name, b.is_output) for b in infos] == [("dense", False), ("T_add", True)]


def test_normalization_traces_only_queries_and_replays() -> None:
    func = WORKLOADS["dense_bias_symbolic"]()
    sch, infos = _normalized(func)
    assert tc.ir.structural_equal(sch.func, func)
    calls = [line.split("sch.")[1].split("(")[0] for line in sch.trace.as_python().splitlines()]
    assert calls == ["get_block", "get_child_blocks", "get_loops", "get_loops"]
    # a rule acts on the handles; the trace replays on a fresh schedule
    dense = infos[0]
    i, j, _ = dense.loops
    sch.parallel(sch.fuse(i, j))
    sch.vectorize(infos[1].loops[1])
    fresh = Schedule(func)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(fresh)
    assert tc.ir.structural_equal(fresh.func, sch.func)


def test_fused_graph_function_normalizes() -> None:
    from tilecraft.graph import GraphBuilder, get_pipeline

    bb = GraphBuilder()
    x = bb.param("x", ("n", 16), "float32")
    w = bb.param("w", (16, 8), "float32")
    b = bb.param("b", (8,), "float32")
    out = bb.emit("relu", [bb.emit("add", [bb.emit("matmul", [x, w]), b])])
    mod = get_pipeline("zero")(tc.IRModule({"main": bb.finish(out, "main")}))
    _, infos = _normalized(mod["fused_matmul_add_relu"])
    assert [(b.name, b.dom_kind(), b.pattern.name) for b in infos] == [
        ("matmul", "SSR", "OUT_EWISE_FUSABLE"),
        ("T_add", "SS", "BROADCAST"),
        ("T_relu", "SS", "ELEMWISE"),
    ]
    assert [b.name for b in an.output_blocks(infos)] == ["T_relu"]


def _after(steps: str) -> Schedule:
    sch = Schedule(WORKLOADS["matmul"]())
    block = sch.get_block("matmul")
    i, j, _k = sch.get_loops(block)
    if steps == "split":
        sch.split(i, factors=[None, 8])
    elif steps == "fuse":
        sch.fuse(i, j)
    elif steps == "unit_loop":
        sch.add_unit_loop(block)
    elif steps == "non_dividing_split":
        sch.split(i, factors=[None, 5])
    return sch


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        ("split", r'block "matmul": iterator vi0 is not bound to one loop variable'),
        ("fuse", r'block "matmul": iterator vi0 is not bound to one loop variable'),
        ("unit_loop", r'block "matmul": loop u\w* binds none of its iterators'),
        ("non_dividing_split", r'block "matmul" has a predicate'),
    ],
)
def test_scheduled_functions_do_not_normalize(steps: str, reason: str) -> None:
    sch = _after(steps)
    before = len(sch.trace)
    assert an.normalize_prim_func(sch) is None
    assert len(sch.trace) == before  # nothing traced when it declines
    why = an.why_not_normalized(sch)
    assert why is not None
    assert __import__("re").fullmatch(reason, why), why


BARE_STORE = """
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = A[i]
"""

CONST_BINDING = """
@T.prim_func
def main(A: T.Buffer((1, 4), "float32"), B: T.Buffer((1, 4), "float32")):
    for j in range(4):
        with T.block("B"):
            vi = T.axis.spatial(1, 0)
            vj = T.axis.spatial(4, j)
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj]
"""

SHORT_LOOP = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
"""

IF_UNDER_ROOT = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), flag: T.int32):
    if flag > 0:
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi]
"""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (BARE_STORE, "a statement (BufferStore) under the root lies outside every block"),
        (CONST_BINDING, 'block "B": iterator vi is not bound to one loop variable'),
        (SHORT_LOOP, 'block "B": loop i and iterator vi differ in extent'),
        (IF_UNDER_ROOT, "a statement (IfThenElse) under the root lies outside every block"),
    ],
)
def test_script_functions_that_do_not_normalize(text: str, reason: str) -> None:
    sch = Schedule(parse(text))
    assert an.normalize_prim_func(sch) is None
    assert an.why_not_normalized(sch) == reason
    assert len(sch.trace) == 0


def test_misuse_raises_schedule_error() -> None:
    func = WORKLOADS["matmul"]()
    with pytest.raises(
        ScheduleError,
        match=r"normalize_prim_func: argument 'sch': expected a Schedule, got PrimFunc",
    ):
        an.normalize_prim_func(func)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match=r"why_not_normalized: argument 'sch'"):
        an.why_not_normalized(None)  # type: ignore[arg-type]

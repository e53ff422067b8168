"""blockize: expected IR, numerics, trace round trip and one failure per requirement."""

from __future__ import annotations

from compute_workloads import assert_script, matmul

import tilecraft as tc
from tilecraft.ir import PrimFunc
from tilecraft.schedule import Schedule
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip

te = tc.te


def _scale(rows: int | str = 8, cols: int = 8) -> PrimFunc:
    n = tc.ir.Var("n") if isinstance(rows, str) else rows
    x = te.placeholder((n, cols), "float32", name="A")
    return te.create_prim_func([x, te.compute(x.shape, lambda i, j: x[i, j] * 2.0, name="B")])


def _parse(text: str) -> PrimFunc:
    func = tc.script.parse(text)
    assert isinstance(func, PrimFunc)
    return func


BLOCKIZED = """\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        for i_0, j_0 in T.grid(2, 2):
            with T.block("B_o"):
                vi_o = T.axis.spatial(2, i_0)
                vj_o = T.axis.spatial(2, j_0)
                T.reads(A[vi_o * 4:vi_o * 4 + 4, vj_o * 4:vj_o * 4 + 4])
                T.writes(B[vi_o * 4:vi_o * 4 + 4, vj_o * 4:vj_o * 4 + 4])
                for i_1, j_1 in T.grid(4, 4):
                    with T.block("B"):
                        vi_i = T.axis.spatial(4, i_1)
                        vj_i = T.axis.spatial(4, j_1)
                        T.reads(A[vi_o * 4 + vi_i, vj_o * 4 + vj_i])
                        T.writes(B[vi_o * 4 + vi_i, vj_o * 4 + vj_i])
                        B[vi_o * 4 + vi_i, vj_o * 4 + vj_i] = A[vi_o * 4 + vi_i, vj_o * 4 + vj_i] * T.float32(2.0)
"""  # noqa: E501


def _tiled(func: PrimFunc) -> tuple[Schedule, list[tc.schedule.LoopRV]]:
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i0, j0, i1, j1)
    return sch, [i0, j0, i1, j1]


def test_blockize_tile_of_elementwise() -> None:
    before = _scale()
    sch, (_, _, i1, j1) = _tiled(before)
    outer = sch.blockize(i1)
    assert sch.get(outer).name == "B_o"
    assert_script(sch.func, BLOCKIZED)
    assert sch.get(j1).extent.value == 4  # the loops inside the new block keep their handles
    check_numeric(before, sch.func)
    verify_trace_roundtrip(sch, before)
    assert "sch.blockize(" in sch.trace.as_python()


def test_blockize_reduction_moves_the_init_to_the_outer_block() -> None:
    before = matmul(32)
    sch = Schedule(before)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    outer = sch.get(sch.blockize(i1))
    assert isinstance(outer, tc.ir.Block)
    assert [iv.kind.value for iv in outer.iter_vars] == ["spatial", "spatial", "reduce"]
    assert [iv.dom.extent.value for iv in outer.iter_vars] == [2, 4, 2]
    assert outer.init is not None  # once per outer reduction ...
    assert sch.get(sch.get_block("C")).init is None  # ... not once per inner one
    assert "C_init" in tc.schedule._tree.block_names(sch.func)
    check_numeric(before, sch.func)
    verify_trace_roundtrip(sch, before)
    text = sch.func.script()
    assert tc.ir.structural_equal(tc.script.parse(text), sch.func)


def test_blockize_iterator_without_inner_loop_keeps_its_full_domain() -> None:
    before = _scale()
    sch = Schedule(before)
    _, j = sch.get_loops(sch.get_block("B"))
    _, j1 = sch.split(j, [None, 4])
    outer = sch.get(sch.blockize(j1))
    assert [iv.dom.extent.value for iv in outer.iter_vars] == [8, 2]  # vi: E = 1
    check_numeric(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_blockize_keeps_a_symbolic_domain_without_inner_loop() -> None:
    """An iterator with no inner part keeps its domain even when it is symbolic (every
    extent is a multiple of 1); the rows stay ``n``."""
    before = _scale("n")
    sch = Schedule(before)
    _, j = sch.get_loops(sch.get_block("B"))
    _, j1 = sch.split(j, [None, 4])
    outer = sch.get(sch.blockize(j1))
    assert isinstance(outer, tc.ir.Block)
    assert str(outer.iter_vars[0].dom.extent) == "n"
    assert outer.iter_vars[1].dom.extent.value == 2
    tc.ir.verify(sch.func)
    check_numeric(before, sch.func, shape_vars={"n": 5})
    verify_trace_roundtrip(sch, before)


# ------------------------------------------------------------------------------------------
# one failure per requirement
def test_blockize_requires_a_perfect_nest_around_one_block() -> None:
    sch = Schedule(matmul(8, relu=True))
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.reverse_compute_at(sch.get_block("D"), i)
    assert_fails_unchanged(sch, "blockize", i, match="perfect nest around one block")


def test_blockize_rejects_a_thread_bound_loop_inside() -> None:
    sch, (_, _, i1, j1) = _tiled(_scale())
    sch.bind(j1, "threadIdx.x")
    assert_fails_unchanged(sch, "blockize", i1, match="is thread_binding")


RERUN_SUM = """\
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), S: T.Buffer((4,), "float32")):
    with T.block("root"):
        for i, r, k in T.grid(4, 3, 8):
            with T.block("S"):
                vi = T.axis.spatial(4, i)
                vk = T.axis.reduce(8, k)
                T.reads(A[vi, vk], S[vi])
                T.writes(S[vi])
                with T.init():
                    S[vi] = T.float32(0.0)
                S[vi] = S[vi] + A[vi, vk]
"""


def test_blockize_rejects_an_inner_loop_that_binds_no_iterator() -> None:
    """Loop ``r`` binds nothing: the sum runs three times, its init restarting it each time.
    One block above ``r`` would init once and sum three times, so blockize refuses (what a
    compute_at under a consumer's loop leaves behind)."""
    before = _parse(RERUN_SUM)
    sch = Schedule(before)
    i, r, _ = sch.get_loops(sch.get_block("S"))
    assert_fails_unchanged(sch, "blockize", r, match='loop "r" binds no iterator')
    assert_fails_unchanged(sch, "blockize", i, match='loop "r" binds no iterator')
    _, k = sch.get_loops(sch.get_block("S"))[1:]
    sch.blockize(k)  # below r: each rerun is one inner block with its init, as before
    check_numeric(before, sch.func)


def test_blockize_requires_constant_extents() -> None:
    sch = Schedule(_scale("n"))
    i, _ = sch.get_loops(sch.get_block("B"))
    assert_fails_unchanged(sch, "blockize", i, match="constant range from 0")


def test_blockize_rejects_a_predicate_on_inner_loops() -> None:
    sch = Schedule(_scale(10, 8))
    i, _ = sch.get_loops(sch.get_block("B"))
    _, i1 = sch.split(i, [None, 4])  # 10 = 3 * 4 - 2: guarded by a predicate on i1
    assert_fails_unchanged(sch, "blockize", i1, match="predicate")


def test_blockize_rejects_a_binding_that_does_not_divide() -> None:
    sch = Schedule(_scale(4, 6))
    i, j = sch.get_loops(sch.get_block("B"))
    fused = sch.fuse(i, j)
    _, inner = sch.split(fused, [None, 4])  # vi = (f0 * 4 + f1) // 6
    assert_fails_unchanged(sch, "blockize", inner, match="does not divide")


BAD_DOMAIN = """\
@T.prim_func
def main(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    with T.block("root"):
        for i0, i1 in T.grid(2, 4):
            with T.block("B"):
                vi = T.axis.spatial(10, i0 * 4 + i1)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi]
"""

BAD_OFFSET = """\
@T.prim_func
def main(A: T.Buffer((12,), "float32"), B: T.Buffer((12,), "float32")):
    with T.block("root"):
        for i0, i1 in T.grid(2, 4):
            with T.block("B"):
                vi = T.axis.spatial(12, i0 * 4 + i1 + 2)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi]
"""


def test_blockize_requires_a_domain_multiple_of_the_inner_extent() -> None:
    sch = Schedule(_parse(BAD_DOMAIN))
    _, i1 = sch.get_loops(sch.get_block("B"))
    assert_fails_unchanged(sch, "blockize", i1, match="not a multiple of 4 from 0")


def test_blockize_requires_an_outer_part_multiple_of_the_inner_extent() -> None:
    sch = Schedule(_parse(BAD_OFFSET))
    _, i1 = sch.get_loops(sch.get_block("B"))
    assert_fails_unchanged(sch, "blockize", i1, match="outer part")


def test_blockize_a_symbolic_domain_provably_a_multiple_of_the_inner_extent() -> None:
    # a domain padded to whole tiles, as pad_einsum makes it for a symbolic extent
    n = tc.ir.Var("n")
    x = te.placeholder(((n + 3) // 4 * 4,), "float32", name="A")
    func = te.create_prim_func([x, te.compute(x.shape, lambda i: x[i] * 2.0, name="B")])
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    _, i1 = sch.split(i, [None, 4])
    sch.blockize(i1)
    assert "vi_o = T.axis.spatial((n + 3) // 4, i_0)" in sch.func.script()
    check_numeric(sch.func, func, shape_vars={"n": 5})
    verify_trace_roundtrip(sch, func)

"""storage_align through lowering: padded strides and sizes, numerics unchanged (CPU)."""

import pytest

import tilecraft as tc
from tilecraft.errors import LowerError, ScheduleError
from tilecraft.ir import Allocate, Block, IntImm, Mutator, Var, post_order_visit
from tilecraft.lower import (
    STORAGE_ALIGN_ATTR,
    CollectStorageAlign,
    aligned_strides,
    lower,
)
from tilecraft.lower.collect_storage_align import drop_axes, storage_align_table
from tilecraft.script import parse
from tilecraft.testing import assert_ir_equal, check_numeric

# B = 2 * A, then C reads B transposed: the classic case for a padded row stride
TWO_STAGE = """
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((64, 64), "float32")
        for i, j in T.grid(64, 64):
            with T.block("B"):
                vi = T.axis.spatial(64, i)
                vj = T.axis.spatial(64, j)
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2.0)
        for i, j in T.grid(64, 64):
            with T.block("C"):
                vi = T.axis.spatial(64, i)
                vj = T.axis.spatial(64, j)
                T.reads(B[vj, vi])
                T.writes(C[vi, vj])
                C[vi, vj] = B[vj, vi] + T.float32(1.0)
"""

TWO_STAGE_LOWERED = """
@T.prim_func
def main(A: T.Buffer((4096,), "float32"), C: T.Buffer((4096,), "float32")):
    T.func_attr({"tc.lowered": True})
    B = T.allocate((4160,), "float32")
    for i, j in T.grid(64, 64):
        B[i * 65 + j] = A[i * 64 + j] * T.float32(2.0)
    for i, j in T.grid(64, 64):
        C[i * 64 + j] = B[j * 65 + i] + T.float32(1.0)
"""

# a 3-d intermediate, to align two axes at once
THREE_D = """
@T.prim_func
def main(A: T.Buffer((4, 8, 8), "float32"), C: T.Buffer((4, 8, 8), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((4, 8, 8), "float32")
        for i, j, k in T.grid(4, 8, 8):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(8, j)
                vk = T.axis.spatial(8, k)
                T.reads(A[vi, vj, vk])
                T.writes(B[vi, vj, vk])
                B[vi, vj, vk] = A[vi, vj, vk] + T.float32(1.0)
        for i, j, k in T.grid(4, 8, 8):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(8, j)
                vk = T.axis.spatial(8, k)
                T.reads(B[3 - vi, vk, vj])
                T.writes(C[vi, vj, vk])
                C[vi, vj, vk] = B[3 - vi, vk, vj] * T.float32(3.0)
"""

SYMBOLIC = """
@T.prim_func
def main(A: T.Buffer((16, n), "float32"), C: T.Buffer((16, n), "float32")):
    n = T.int32()
    with T.block("root"):
        B = T.alloc_buffer((16, n), "float32")
        for i, j in T.grid(16, n):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                vj = T.axis.spatial(n, j)
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2.0)
        for i, j in T.grid(16, n):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                vj = T.axis.spatial(n, j)
                T.reads(B[15 - vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = B[15 - vi, vj] + T.float32(1.0)
"""


def allocations(func):
    out = {}
    post_order_visit(func.body, lambda n: out.update({n.buffer.name: n.buffer}) if isinstance(
        n, Allocate) else None)  # fmt: skip
    return out


def ints(exprs):
    assert all(isinstance(e, IntImm) for e in exprs)
    return tuple(e.value for e in exprs)


def test_intermediate_row_stride_is_padded():
    before = parse(TWO_STAGE)
    sch = tc.Schedule(before)
    sch.storage_align(sch.get_block("B"), 0, 0, 32, 1)
    low = lower(sch.func)
    assert_ir_equal(low, parse(TWO_STAGE_LOWERED))
    check_numeric(before, sch.func)
    src = tc.build(sch.mod, target="cpu").source
    assert "(size_t)(4160)" in src
    assert "* 65) + j" in src


def test_unaligned_function_lowers_as_before():
    low = lower(parse(TWO_STAGE))
    assert ints(allocations(low)["B"].shape) == (4096,)
    assert STORAGE_ALIGN_ATTR not in low.attrs


def test_alignment_survives_buffer_compaction():
    before = parse(TWO_STAGE)
    sch = tc.Schedule(before)
    c = sch.get_block("C")
    io, _ = sch.split(sch.get_loops(c)[0], factors=[None, 8])
    cache = sch.cache_read(c, 0, "local")
    sch.compute_at(cache, io)
    sch.storage_align(cache, 0, 0, 16, 1)
    low = lower(sch.func)
    # compacted to a (64, 8) box; its row stride 8 is padded to 17
    assert ints(allocations(low)["B_local"].shape) == (64 * 17,)
    text = low.script()
    assert "B_local[ax0_1 * 17 + ax1_1] = " in text
    assert "= B_local[j * 17 + i_1] + " in text
    check_numeric(before, sch.func)


def test_alignments_on_two_axes_compose():
    before = parse(THREE_D)
    sch = tc.Schedule(before)
    blk = sch.get_block("B")
    sch.storage_align(blk, 0, 1, 8, 1)
    sch.storage_align(blk, 0, 0, 16, 3)
    low = lower(sch.func)
    # last stride 1; stride(1) = 8 -> 9 (9 % 8 == 1); stride(0) = 9 * 8 = 72 -> 83 (% 16 == 3)
    assert ints(allocations(low)["B"].shape) == (83 * 4,)
    assert "i * 83 + j * 9 + k" in low.script()
    check_numeric(before, sch.func)


def test_aligned_strides_formula():
    shape = (IntImm("int32", 4), IntImm("int32", 8), IntImm("int32", 8))
    strides, size = aligned_strides(shape, ((0, 16, 3), (1, 8, 1)))
    assert ints(strides) == (83, 9, 1)
    assert size.value == 332
    strides, size = aligned_strides(shape, ((2, 2, 0),))  # even the last stride can be padded
    assert ints(strides) == (128, 16, 2)
    assert size.value == 512
    strides, _ = aligned_strides(shape, ((1, 8, 0),))  # already aligned: no padding
    assert ints(strides) == (64, 8, 1)


@pytest.mark.parametrize("n", [1, 5, 8, 13])
def test_symbolic_stride_is_padded(n):
    m = Var("m")
    strides, size = aligned_strides((IntImm("int32", 16), m), ((0, 8, 3),))
    row = tc.arith.evaluate(strides[0], {m: n})
    assert row >= n
    assert row - n < 8
    assert row % 8 == 3
    assert tc.arith.evaluate(size, {m: n}) == 16 * row
    before = parse(SYMBOLIC)
    sch = tc.Schedule(before)
    sch.storage_align(sch.get_block("B"), 0, 0, 8, 3)
    check_numeric(before, sch.func, shape_vars={"n": n})


def test_collect_moves_annotations_to_the_table():
    sch = tc.Schedule(parse(THREE_D))
    sch.storage_align(sch.get_block("B"), 0, 1, 8, 1)
    sch.storage_align(sch.get_block("B"), 0, 0, 16, 3)
    after = CollectStorageAlign()(sch.func)
    blocks = []
    post_order_visit(after.body, lambda n: blocks.append(n) if isinstance(n, Block) else None)
    assert all("buffer_dim_align" not in b.annotations for b in blocks)
    assert storage_align_table(after) == {"B": ((0, 16, 3), (1, 8, 1))}
    assert CollectStorageAlign()(after) is after


def test_parameters_cannot_be_aligned():
    sch = tc.Schedule(parse(TWO_STAGE))
    with pytest.raises(ScheduleError, match=r"storage_align: .*function parameter"):
        sch.storage_align(sch.get_block("C"), 0, 0, 32, 1)
    # an annotation written by hand on a block writing a parameter is rejected when lowering
    func = parse(TWO_STAGE.replace('T.writes(C[vi, vj])', 'T.writes(C[vi, vj])\n'
                                   '                T.block_attr({"buffer_dim_align": '
                                   '((0, 0, 32, 1),)})'))  # fmt: skip
    with pytest.raises(LowerError, match=r"block 'C'.*parameter"):
        lower(func)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("((1, 0, 32, 1),)", r"write index 1 is out of range"),
        ("((0, 2, 32, 1),)", r"needs 0 <= axis < 2"),
        ("((0, 0, 4, 4),)", r"0 <= offset < factor"),
        ("((0, 0, 32),)", r"expected \(write_index, axis, factor, offset\)"),
    ],
)
def test_malformed_annotations_are_rejected(value, match):
    text = TWO_STAGE.replace(
        "T.writes(B[vi, vj])",
        f'T.writes(B[vi, vj])\n                T.block_attr({{"buffer_dim_align": {value}}})',
    )
    with pytest.raises(LowerError, match=match):
        lower(parse(text))


def test_conflicting_requests_for_one_axis_are_rejected():
    base = parse(TWO_STAGE)
    sch = tc.Schedule(base)
    c = sch.get_block("C")
    cache = sch.cache_read(c, 0, "local")
    sch.storage_align(cache, 0, 0, 16, 1)
    sch.storage_align(sch.get_block("B"), 0, 0, 16, 2)  # another buffer: fine
    lower(sch.func)
    # the same buffer written by two blocks asking for different layouts
    text = TWO_STAGE.replace(
        "T.writes(B[vi, vj])",
        'T.writes(B[vi, vj])\n                T.block_attr({"buffer_dim_align": ((0, 0, 16, 1),)})',
    ).replace(
        "T.writes(C[vi, vj])",
        "T.writes(C[vi, vj], B[vi, vj])\n"
        '                T.block_attr({"buffer_dim_align": ((1, 0, 16, 5),)})\n'
        "                B[vi, vj] = B[vi, vj]",
    )
    with pytest.raises(LowerError, match=r"aligned twice"):
        lower(parse(text))


def test_aligned_buffer_sharing_a_name_is_renamed():
    before = parse(TWO_STAGE)
    sch = tc.Schedule(before)
    sch.storage_align(sch.get_block("B"), 0, 0, 32, 1)
    func = sch.func
    # rename parameter A to "B": the aligned intermediate must not share its table key
    a = func.params[0]
    renamed = a.update(name="B")
    m = Mutator()
    m.buffer_map[id(a)] = renamed
    func = func.update(params=(renamed, func.params[1]), body=m.visit(func.body))
    after = CollectStorageAlign()(func)
    assert storage_align_table(after) == {"B_1": ((0, 32, 1),)}
    low = lower(func)
    assert ints(low.params[0].shape) == (4096,)
    assert ints(allocations(low)["B_1"].shape) == (4160,)
    check_numeric(before, func)


def test_drop_axes_renumbers_and_drops():
    entries = ((0, 4, 1), (2, 32, 1), (3, 2, 0))
    assert drop_axes(entries, (0, 1)) == ((0, 32, 1), (1, 2, 0))
    assert drop_axes(entries, (2,)) == ((0, 4, 1), (2, 2, 0))
    assert drop_axes(entries, ()) == entries


def test_table_is_consumed_by_flattening():
    sch = tc.Schedule(parse(TWO_STAGE))
    sch.storage_align(sch.get_block("B"), 0, 0, 32, 1)
    seen = {}
    lower(sch.func, hooks=[lambda name, _b, after: seen.update({name: dict(after.attrs)})])
    assert STORAGE_ALIGN_ATTR in seen["ConvertBlocksToLoops"]
    assert STORAGE_ALIGN_ATTR not in seen["FlattenBuffer"]

"""cache_read, cache_write, set_scope, storage_align, reindex, transform_layout."""

from __future__ import annotations

import pytest
from compute_workloads import assert_same_result, assert_script, elementwise_chain, matmul
from named_calls import (
    cache_read,
    cache_write,
    decompose_reduction,
    reindex,
    set_scope,
    storage_align,
    transform_layout,
)

from tilecraft.errors import ScheduleError
from tilecraft.schedule import _tree
from tilecraft.schedule.primitives.index_map import IndexMap

CACHE_WRITE = """\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    with T.block("root"):
        C_local = T.alloc_buffer((4, 4), "float32", scope="local")
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(4, j)
                vk = T.axis.reduce(4, k)
                T.reads(A[vi, vk], B[vk, vj], C_local[vi, vj])
                T.writes(C_local[vi, vj])
                with T.init():
                    C_local[vi, vj] = T.float32(0.0)
                C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]
        for ax0, ax1 in T.grid(4, 4):
            with T.block("C_local"):
                v0 = T.axis.spatial(4, ax0)
                v1 = T.axis.spatial(4, ax1)
                T.reads(C_local[v0, v1])
                T.writes(C[v0, v1])
                C[v0, v1] = C_local[v0, v1]"""  # noqa: E501


def test_cache_write_expected() -> None:
    before = matmul(4)
    after, name = cache_write(before, "C", 0, "local")
    assert name == "C_local"
    assert_script(after, CACHE_WRITE)
    assert_same_result(before, after)


def test_cache_read_param_and_intermediate() -> None:
    before = matmul(8, relu=True)
    f1, n1 = cache_read(before, "C", 0, "shared")
    assert n1 == "A_shared"
    assert _tree.block_names(f1)[1] == "A_shared"  # placed first, before "C"
    assert_same_result(before, f1)
    f2, n2 = cache_read(f1, "D", 0, "local")
    names = _tree.block_names(f2)
    assert names.index(n2) == names.index("C") + 1  # right after the producer
    assert_same_result(before, f2)


def test_cache_read_selected_consumers() -> None:
    before = elementwise_chain()
    after, _name = cache_read(before, "C", 0, "local", consumer_blocks=["C"])
    assert_same_result(before, after)


def test_cache_errors() -> None:
    f = matmul(4)
    with pytest.raises(ScheduleError, match=r"cache_write: argument 'write_buffer_index'"):
        cache_write(f, "C", 3, "local")
    with pytest.raises(ScheduleError, match=r"cache_write: argument 'storage_scope'"):
        cache_write(f, "C", 0, "texture")
    with pytest.raises(ScheduleError, match=r"cache_read: argument 'read_buffer_index'"):
        cache_read(f, "C", 7, "shared")
    g = matmul(4, relu=True)
    with pytest.raises(ScheduleError, match=r'cache_read: "D" do not read "A"'):
        cache_read(g, "C", 0, "shared", consumer_blocks=["D"])
    with pytest.raises(ScheduleError, match=r'get_block: no block named "Q"'):
        cache_read(f, "Q", 0, "shared")


def test_cache_write_rejects_second_writer() -> None:
    f = matmul(4)
    g, _ = decompose_reduction(f, "C", _tree.loops_above(f, "C")[0].loop_var)
    with pytest.raises(ScheduleError, match=r"cache_write: .*also written by"):
        cache_write(g, "C", 0, "local")


def test_set_scope() -> None:
    before = elementwise_chain()
    after = set_scope(before, "B", 0, "shared")
    assert 'scope="shared"' in after.script()
    assert_same_result(before, after)
    with pytest.raises(ScheduleError, match=r'set_scope: buffer "C" is a function parameter'):
        set_scope(before, "C", 0, "shared")
    with pytest.raises(ScheduleError, match=r"set_scope: argument 'storage_scope'"):
        set_scope(before, "B", 0, "nowhere")


def test_storage_align() -> None:
    before = elementwise_chain()
    after = storage_align(before, "B", 0, -2, 32, 8)
    blk = _tree.find_block(after, "B")[0].block
    assert blk.annotations["buffer_dim_align"] == ((0, 0, 32, 8),)
    again = storage_align(after, "B", 0, 0, 16, 1)
    blk = _tree.find_block(again, "B")[0].block
    assert blk.annotations["buffer_dim_align"] == ((0, 0, 16, 1),)
    with pytest.raises(ScheduleError, match=r"storage_align: argument 'axis'"):
        storage_align(before, "B", 0, 2, 32, 8)
    with pytest.raises(ScheduleError, match=r"storage_align: arguments 'factor'/'offset'"):
        storage_align(before, "B", 0, 0, 8, 8)
    with pytest.raises(ScheduleError, match=r"storage_align: .*function parameter"):
        storage_align(before, "C", 0, 0, 8, 1)


def test_transform_layout_transpose_and_split() -> None:
    before = elementwise_chain()
    after = transform_layout(before, "B", ("write", 0), IndexMap.from_func(lambda i, j: (j, i)))
    assert_same_result(before, after)
    split = IndexMap.from_func(lambda i, j: (i // 4, j, i % 4))
    after2 = transform_layout(before, "B", ("write", 0), split)
    assert "T.alloc_buffer((2, 8, 4)" in after2.script()
    assert_same_result(before, after2)


def test_index_map_inverse() -> None:
    from tilecraft.ir import IntImm
    from tilecraft.schedule.primitives.index_map import simplify_index

    shape = (IntImm("int32", 8), IntImm("int32", 16))
    m = IndexMap.from_func(lambda i, j: (j // 4, i, j % 4))
    inv = m.inverse(shape)
    # inverse(map(i, j)) == (i, j) for every point of the shape
    for i in range(8):
        for j in range(16):
            out = inv.map_indices(m.map_indices((IntImm("int32", i), IntImm("int32", j))))
            assert [simplify_index(o).value for o in out] == [i, j]
    with pytest.raises(ScheduleError, match=r"not a recognised bijection"):
        IndexMap.from_func(lambda i, j: (i + j, j)).inverse(shape)


def test_transform_layout_errors() -> None:
    f = elementwise_chain()
    with pytest.raises(ScheduleError, match=r"transform_layout: .*function parameter"):
        transform_layout(f, "C", ("write", 0), IndexMap.from_func(lambda i, j: (j, i)))
    with pytest.raises(ScheduleError, match=r"transform_layout: index map takes 1"):
        transform_layout(f, "B", ("write", 0), IndexMap.from_func(lambda i: (i,)))
    with pytest.raises(ScheduleError, match=r"transform_layout: argument 'buffer'"):
        transform_layout(f, "B", ("both", 0), IndexMap.from_func(lambda i, j: (j, i)))


def test_reindex_read_and_write() -> None:
    before = elementwise_chain()
    after, name = reindex(before, "C", ("read", 0))
    assert name == "B_reindex"
    assert_same_result(before, after)
    after2, name2 = reindex(before, "C", ("write", 0))
    assert _tree.block_names(after2)[-1] == name2
    assert_same_result(before, after2)


def test_reindex_rejects_mixed_access() -> None:
    f = matmul(4)
    # C reads C[vi, vj] in body and init identically, so it is fine; A is fine too.
    g, _ = reindex(f, "C", ("read", 0))
    assert_same_result(f, g)
    with pytest.raises(ScheduleError, match=r"reindex: argument 'read_buffer_index'"):
        reindex(f, "C", ("read", 9))


def test_reindex_refuses_a_guarded_access_it_would_copy_out_of_range() -> None:
    """Regression: after the padding of a conv2d is inlined, the block reads X only under the
    padding condition; reindex made an unguarded copy X_reindex[...] = X[h + r - 1, ...] that
    read past X (found by tc.ir.verify on random schedules)."""
    import tilecraft as tc
    from tilecraft.testing import assert_fails_unchanged

    x = tc.te.placeholder((1, 4, 8, 8), "float32", name="X")
    w = tc.te.placeholder((8, 4, 3, 3), "float32", name="W")
    sch = tc.Schedule(tc.te.create_prim_func([x, w, tc.topi.conv2d(x, w, padding=1)]))
    sch.compute_inline(sch.get_block("pad_temp"))
    conv = sch.get_block("conv2d")
    assert_fails_unchanged(
        sch, "reindex", conv, ("read", 0), match=r'reindex: the copy of "X" would access index 2'
    )
    staged = sch.reindex(conv, ("read", 1))  # W is read in range everywhere: fine
    assert sch.get(staged).name == "W_reindex"

"""CompactBufferAllocation: allocated buffers shrink to the box their accesses cover."""

import numpy as np

import tilecraft as tc
from tilecraft.ir import (
    Allocate,
    Buffer,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    PrimFunc,
    Var,
    post_order_visit,
    seq,
)
from tilecraft.lower import (
    CompactBufferAllocation,
    ConvertBlocksToLoops,
    LowerInitBlock,
    PlanAllocations,
    lower,
)
from tilecraft.testing import check_numeric


def allocations(func):
    out = {}

    def fn(n):
        if isinstance(n, Allocate):
            out[n.buffer.name] = tuple(s.value for s in n.buffer.shape)

    post_order_visit(func.body, fn)
    return out


def tiled_matmul(n=64, mr=4, nr=16):
    a = tc.te.placeholder((n, n), "float32", name="A")
    b = tc.te.placeholder((n, n), "float32", name="B")
    func = tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])
    sch = tc.Schedule(func)
    mm = sch.get_block("matmul")
    i, j, k = sch.get_loops(mm)
    io, ii = sch.split(i, [None, mr])
    jo, ji = sch.split(j, [None, nr])
    sch.reorder(io, jo, k, ii, ji)
    acc = sch.cache_write(mm, 0, "local")
    sch.reverse_compute_at(acc, jo)
    return func, sch


def to_loops(func):
    return ConvertBlocksToLoops()(PlanAllocations()(LowerInitBlock()(func)))


def test_register_tile_becomes_tile_sized():
    func, sch = tiled_matmul()
    before = to_loops(sch.func)
    assert allocations(before) == {"matmul_local": (64, 64)}
    after = CompactBufferAllocation()(before)
    assert allocations(after) == {"matmul_local": (4, 16)}
    check_numeric(sch.func, func)


def test_compacted_indices_are_offsets_from_the_box():
    _, sch = tiled_matmul(n=32, mr=2, nr=8)
    src = tc.codegen.c_source(sch.func)
    assert "float matmul_local[16] __attribute__((aligned(64)));" in src
    # the tile is indexed by the inner loops only
    assert "matmul_local[((i0_1 * 8) + i1_1)]" in src


def test_cache_read_panel_compacts_under_compute_at():
    func, sch = tiled_matmul(n=32, mr=2, nr=8)
    packed = sch.cache_read(sch.get_block("matmul"), 1, "global")
    sch.compute_at(packed, sch.get_loops(sch.get_block("matmul"))[1])
    assert allocations(lower(sch.func))["B_global"] == (32 * 8,)
    check_numeric(sch.func, func)


def test_whole_buffer_access_is_left_alone():
    A = Buffer("A", (8,), "float32")
    tmp = Buffer("tmp", (8,), "float32")
    i = Var("i")
    body = Allocate(tmp, For(i, 0, 8, ForKind.SERIAL, seq(
        BufferStore(tmp, FloatImm("float32", 2.0), (i,)),
        BufferStore(A, tmp[i], (i,)))))  # fmt: skip
    func = PrimFunc((A,), body)
    assert CompactBufferAllocation()(func).body is body


def test_symbolic_extent_is_left_alone():
    n = Var("n")
    A = Buffer("A", (n,), "float32")
    tmp = Buffer("tmp", (64,), "float32")
    i = Var("i")
    body = Allocate(tmp, For(i, 0, n, ForKind.SERIAL, seq(
        BufferStore(tmp, FloatImm("float32", 2.0), (i,)),
        BufferStore(A, tmp[i], (i,)))))  # fmt: skip
    func = PrimFunc((A,), body)
    assert allocations(CompactBufferAllocation()(func)) == {"tmp": (64,)}


def test_guarded_register_tile_of_a_symbolic_extent_becomes_tile_sized():
    # regression: rows split by 4 under a symbolic row count are guarded (i * 4 + ii < m);
    # the tile's box is 4 rows whatever m, but "4 <= m" is unprovable, so the local tile kept
    # the whole symbolic (m, 16) shape: a heap allocation per tile, no registers (the Llama
    # prefill's projections ran at a quarter of their speed)
    m = Var("m", "int32")
    a = tc.te.placeholder((m, 32), "float32", name="A")
    b = tc.te.placeholder((32, 16), "float32", name="B")
    func = tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])
    sch = tc.Schedule(func)
    mm = sch.get_block("matmul")
    i, j, k = sch.get_loops(mm)
    io, ii = sch.split(i, [None, 4])
    sch.reorder(io, j, k, ii)
    acc = sch.cache_write(mm, 0, "local")
    sch.reverse_compute_at(acc, io)
    lowered = CompactBufferAllocation()(to_loops(sch.func))
    assert allocations(lowered) == {"matmul_local": (4, 16)}
    for rows in (1, 5, 8):
        check_numeric(sch.func, func, shape_vars={"m": rows}, rtol=1e-5, atol=1e-5)


def test_offset_box_inside_outer_loop_runs_correctly():
    # tmp is allocated per outer iteration o and touched at [o * 4 + 1, o * 4 + 4]
    A = Buffer("A", (32,), "float32")
    tmp = Buffer("tmp", (40,), "float32")
    o, i = Var("o"), Var("i")
    idx = o * 4 + i + 1
    inner = For(i, 0, 4, ForKind.SERIAL, seq(
        BufferStore(tmp, A[o * 4 + i] * FloatImm("float32", 3.0), (idx,)),
        BufferStore(A, tmp[idx], (o * 4 + i,))))  # fmt: skip
    func = PrimFunc((A,), For(o, 0, 8, ForKind.SERIAL, Allocate(tmp, inner)))
    assert allocations(CompactBufferAllocation()(func)) == {"tmp": (4,)}
    lib = tc.build(func, target="cpu")
    a = np.arange(32, dtype=np.float32)
    lib["main"](a)
    np.testing.assert_array_equal(a, np.arange(32, dtype=np.float32) * 3)


def test_only_dimensions_with_a_constant_smaller_box_shrink():
    n = Var("n")
    A = Buffer("A", (n, 32), "float32")
    tmp = Buffer("tmp", (n, 32), "float32")
    o, i, j = Var("o"), Var("i"), Var("j")
    col = o * 4 + j
    inner = For(i, 0, n, ForKind.SERIAL, For(j, 0, 4, ForKind.SERIAL, seq(
        BufferStore(tmp, A[i, col] + FloatImm("float32", 1.0), (i, col)),
        BufferStore(A, tmp[i, col], (i, col)))))  # fmt: skip
    func = PrimFunc((A,), For(o, 0, 8, ForKind.SERIAL, Allocate(tmp, inner)))
    compacted = CompactBufferAllocation()(func)
    alloc = compacted.body.body
    assert isinstance(alloc, Allocate)
    assert alloc.buffer.shape[0] is n
    assert alloc.buffer.shape[1].value == 4
    lib = tc.build(func, target="cpu")
    a = np.arange(5 * 32, dtype=np.float32).reshape(5, 32)
    lib["main"](a)
    np.testing.assert_array_equal(a, np.arange(5 * 32, dtype=np.float32).reshape(5, 32) + 1)

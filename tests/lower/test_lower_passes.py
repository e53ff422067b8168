"""Before/after tests of each lowering pass, on IR built by hand."""

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import LowerError
from tilecraft.ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Var,
    block_realize,
    post_order_visit,
    seq,
)
from tilecraft.lower import (
    ConvertBlocksToLoops,
    ExposeShapeVars,
    FlattenBuffer,
    LowerInitBlock,
    LowerThreadBindings,
    PlanAllocations,
    Simplify,
    lower,
)
from tilecraft.testing import assert_ir_equal


def iv(name, extent, kind=IterKind.SPATIAL):
    return IterVar(Var(name), Range(0, extent), kind)


def f32(v):
    return FloatImm("float32", v)


def root(body, allocs=()):
    return block_realize(Block("root", (), (), (), body, alloc_buffers=allocs))


def matmul_func(n=8, outer=ForKind.SERIAL):
    A, B, C = (Buffer(x, (n, n), "float32") for x in "ABC")
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = iv("vi", n), iv("vj", n), iv("vk", n, IterKind.REDUCE)
    a, b, c = vi.var, vj.var, vk.var
    blk = Block(
        "C", (vi, vj, vk),
        (BufferRegion.point(A, [a, c]), BufferRegion.point(B, [c, b])),
        (BufferRegion.point(C, [a, b]),),
        BufferStore(C, C[a, b] + A[a, c] * B[c, b], (a, b)),
        init=BufferStore(C, f32(0.0), (a, b)),
    )  # fmt: skip
    nest = For(i, 0, n, outer, For(j, 0, n, ForKind.SERIAL, For(k, 0, n, ForKind.SERIAL,
               block_realize(blk, [i, j, k]))))  # fmt: skip
    return PrimFunc((A, B, C), root(nest)), (A, B, C), blk


def nodes_of(node, cls):
    out = []
    post_order_visit(node, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def test_lower_init_block_guards_init_on_reduce_iterators():
    func, (_, _, C), blk = matmul_func()
    after = LowerInitBlock()(func)
    new_blk = nodes_of(after.body, Block)[0]
    assert new_blk.init is None
    a, b, c = (x.var for x in blk.iter_vars)
    expected = seq(IfThenElse(c.eq(0), BufferStore(C, f32(0.0), (a, b))), blk.body)
    assert_ir_equal(new_blk.body, expected)
    assert nodes_of(func.body, Block)[0].init is not None  # input untouched


def test_convert_blocks_to_loops_substitutes_bindings():
    func, (A, B, C), _ = matmul_func(4)
    after = ConvertBlocksToLoops()(LowerInitBlock()(func))
    assert not nodes_of(after.body, Block)
    i, j, k = Var("i"), Var("j"), Var("k")
    body = seq(
        IfThenElse(k.eq(0), BufferStore(C, f32(0.0), (i, j))),
        BufferStore(C, C[i, j] + A[i, k] * B[k, j], (i, j)),
    )
    expected = For(i, 0, 4, ForKind.SERIAL, For(j, 0, 4, ForKind.SERIAL,
                   For(k, 0, 4, ForKind.SERIAL, body)))  # fmt: skip
    assert_ir_equal(after.body, expected)


def test_convert_blocks_to_loops_keeps_predicate_as_if():
    A = Buffer("A", (10,), "float32")
    i = Var("i")
    v = iv("v", 10)
    blk = Block(
        "A", (v,), (), (BufferRegion.point(A, [v.var]),), BufferStore(A, f32(1.0), (v.var,))
    )
    func = PrimFunc((A,), For(i, 0, 16, ForKind.SERIAL, BlockRealize((i,), i < 10, blk)))
    after = ConvertBlocksToLoops()(func)
    expected = For(i, 0, 16, ForKind.SERIAL, IfThenElse(i < 10, BufferStore(A, f32(1.0), (i,))))
    assert_ir_equal(after.body, expected)


def test_convert_blocks_rejects_remaining_init():
    func, _, _ = matmul_func()
    with pytest.raises(LowerError, match="LowerInitBlock"):
        ConvertBlocksToLoops()(func)


def two_stage(local_under_i):
    """B = A * 2 (intermediate T) then C = T + 1; T per row when local_under_i."""
    n = 6
    A, C = Buffer("A", (n, n), "float32"), Buffer("C", (n, n), "float32")
    T = Buffer("T", (n,) if local_under_i else (n, n), "float32")
    i, j, j2, i2 = Var("i"), Var("j"), Var("j2"), Var("i2")

    def stage(name, out, idx_out, value, a, b):
        vi, vj = iv("vi", n), iv("vj", n)
        m = {id(i): vi.var, id(j): vj.var, id(j2): vj.var, id(i2): vi.var}
        sub = tc.ir.substitute
        vm = {k_: m[id(k_)] for k_ in (a, b)}
        (src,) = {x.buffer for x in nodes_of(value, BufferLoad)}
        blk = Block(
            name,
            (vi, vj),
            (BufferRegion.full(src),),
            (BufferRegion.full(out),),
            BufferStore(out, sub(value, vm), tuple(sub(x, vm) for x in idx_out)),
        )
        return block_realize(blk, [a, b])

    tidx = (j,) if local_under_i else (i, j)
    s1 = stage("T", T, tidx, A[i, j] * 2.0, i, j)
    tload = T[j2] if local_under_i else T[i2, j2]
    s2 = stage(
        "C", C, (i if local_under_i else i2, j2), tload + 1.0, i if local_under_i else i2, j2
    )
    if local_under_i:
        body = For(i, 0, n, ForKind.SERIAL, seq(For(j, 0, n, ForKind.SERIAL, s1),
                                                For(j2, 0, n, ForKind.SERIAL, s2)))  # fmt: skip
    else:
        body = seq(For(i, 0, n, ForKind.SERIAL, For(j, 0, n, ForKind.SERIAL, s1)),
                   For(i2, 0, n, ForKind.SERIAL, For(j2, 0, n, ForKind.SERIAL, s2)))  # fmt: skip
    return PrimFunc((A, C), root(body, (T,))), T


def test_plan_allocations_wraps_both_nests_at_top():
    func, T = two_stage(local_under_i=False)
    tc.ir.verify(func)
    after = PlanAllocations()(func)
    assert all(not b.alloc_buffers for b in nodes_of(after.body, Block))
    rb = after.body.block.body
    assert isinstance(rb, Allocate)
    assert rb.buffer is T
    assert isinstance(rb.body, SeqStmt)


def test_plan_allocations_places_local_buffer_inside_loop():
    func, T = two_stage(local_under_i=True)
    after = PlanAllocations()(func)
    tc.ir.verify(func)
    tc.ir.verify(after)
    loop = after.body.block.body
    assert isinstance(loop, For)
    assert loop.loop_var.name == "i"
    assert isinstance(loop.body, Allocate)
    assert loop.body.buffer is T
    tc.testing.check_numeric(func, lambda a: a * 2.0 + 1.0)


def test_plan_allocations_keeps_accumulator_outside_reduction_loop():
    # for k: { acc += A[k] (reduction block); B[0] = acc[0] } -- all accesses under `for k`
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (1,), "float32")
    acc = Buffer("acc", (1,), "float32", scope="local")
    k = Var("k")
    vk = iv("vk", 8, IterKind.REDUCE)
    red = Block(
        "acc",
        (vk,),
        (BufferRegion.full(A),),
        (BufferRegion.full(acc),),
        BufferStore(acc, acc[0] + A[vk.var], (0,)),
        init=BufferStore(acc, f32(0.0), (0,)),
    )
    out = Block(
        "B", (), (BufferRegion.full(acc),), (BufferRegion.full(B),), BufferStore(B, acc[0], (0,))
    )
    body = For(k, 0, 8, ForKind.SERIAL, seq(block_realize(red, [k]), block_realize(out)))
    func = PrimFunc((A, B), root(body, (acc,)))
    after = PlanAllocations()(LowerInitBlock()(func))
    tc.ir.verify(func)
    tc.ir.verify(after)
    top = after.body.block.body
    assert isinstance(top, Allocate)
    assert isinstance(top.body, For)
    tc.testing.check_numeric(func, lambda a: a.sum(keepdims=True))


def test_flatten_buffer_row_major():
    A = Buffer("A", (3, 4, 5), "float32")
    i, j, k = Var("i"), Var("j"), Var("k")
    func = PrimFunc((A,), BufferStore(A, f32(1.0), (i, j, k)))
    after = FlattenBuffer()(func)
    flat = after.params[0]
    assert flat.shape[0].value == 60
    store = after.body
    assert_ir_equal(store.indices[0], (i * 4 + j) * 5 + k)
    assert func.params[0].ndim == 3


def test_expose_shape_vars_appends_symbolic_extents():
    n, m = Var("n"), Var("m")
    A, B = Buffer("A", (n, m), "float32"), Buffer("B", (m,), "float32")
    func = PrimFunc((A, B), BufferStore(B, A[0, 0], (0,)))
    after = ExposeShapeVars()(func)
    assert after.params[2:] == (n, m) or [p.name for p in after.params[2:]] == ["n", "m"]
    assert after.params[2] is n
    assert after.params[3] is m


def thread_func():
    A = Buffer("A", (32,), "float32")
    t = Var("t")
    body = For(
        t, 0, 32, ForKind.THREAD_BINDING, BufferStore(A, f32(3.0), (t,)), thread="threadIdx.x"
    )
    return PrimFunc((A,), body)


def test_thread_bindings_rejected_on_cpu():
    with pytest.raises(LowerError, match=r"threadIdx.x.*emulate_gpu=True"):
        lower(thread_func(), "cpu")


def test_thread_bindings_serial_under_emulation():
    after = LowerThreadBindings(emulate_gpu=True)(thread_func())
    assert after.body.kind is ForKind.SERIAL
    assert after.body.thread is None
    out = tc.testing.check_numeric(thread_func(), lambda: np.full(32, 3.0, "float32"),
                                   emulate_gpu=True)  # fmt: skip
    assert out[0][5] == 3.0


def test_simplify_uses_loop_ranges():
    A = Buffer("A", (16,), "float32")
    i = Var("i")
    func = PrimFunc(
        (A,), For(i, 0, 16, ForKind.SERIAL, BufferStore(A, f32(0.0), ((i * 16 + 3) // 16 * 1 + 0,)))
    )
    after = Simplify()(func)
    assert_ir_equal(after.body.body.indices[0], i)


def test_lower_pipeline_hooks_and_module():
    func, _, _ = matmul_func(32, ForKind.PARALLEL)  # 32**3 statements: enough for threads
    text_before = func.script()
    seen = []
    low = lower(func, hooks=[lambda name, before, after: seen.append(name)])
    assert seen[:5] == [
        "ExpandWarpTiles",
        "CollectStorageAlign",
        "LowerInitBlock",
        "PlanAllocations",
        "ConvertBlocksToLoops",
    ]
    assert not nodes_of(low.body, Block)
    assert all(len(b.shape) == 1 for b in nodes_of(low.body, BufferLoad) for b in [b.buffer])
    assert nodes_of(low.body, For)[-1].kind is ForKind.PARALLEL
    assert func.script() == text_before
    mod = lower(tc.ir.IRModule({"mm": func}))
    assert mod["mm"].attrs["tc.lowered"] is True


def test_plan_allocations_drops_block_local_buffers_from_the_signature():
    # a cache whose only access is inside one block gets its Allocate inside that block's body;
    # the block's T.writes must stop naming it (it would name a buffer not yet defined there)
    func = tc.script.parse("""
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    with T.block("root"):
        A_local = T.alloc_buffer((4, 4), "float32", scope="local")
        for i, j in T.grid(4, 4):
            with T.block("A_local"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(4, j)
                T.reads(A[vi, vj])
                T.writes(A_local[vi, vj])
                A_local[vi, vj] = A[vi, vj]
""")
    after = PlanAllocations()(func)
    (blk,) = [b for b in nodes_of(after.body, Block) if b.name == "A_local"]
    assert isinstance(blk.body, Allocate)
    assert [r.buffer.name for r in blk.reads] == ["A"]
    assert blk.writes == ()
    tc.ir.verify(after)

"""Structure of the PrimFuncs ``te.create_prim_func`` builds (no compiler needed)."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft import te
from tilecraft.errors import TilecraftError
from tilecraft.ir import (
    Block,
    BlockRealize,
    BufferLoad,
    BufferRegion,
    BufferStore,
    FloatImm,
    For,
    IntImm,
    IterKind,
    LetStmt,
    Max,
    Node,
    Select,
    Var,
    post_order_visit,
)


def blocks(func: tc.ir.PrimFunc) -> list[Block]:
    found: list[Block] = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return found


def block(func: tc.ir.PrimFunc, name: str) -> Block:
    (b,) = [b for b in blocks(func) if b.name == name]
    return b


def loops_above(func: tc.ir.PrimFunc, name: str) -> list[For]:
    """The For nest directly enclosing block ``name``."""

    def walk(node: Node, path: list[For]) -> list[For] | None:
        if isinstance(node, BlockRealize) and node.block.name == name:
            return path
        if isinstance(node, For):
            return walk(node.body, [*path, node])
        if isinstance(node, BlockRealize):
            return walk(node.block.body, [])
        if isinstance(node, tc.ir.SeqStmt):
            for s in node.stmts:
                got = walk(s, [])
                if got is not None:
                    return got
        return None

    got = walk(func.body, [])
    assert got is not None
    return got


def region_of(r: BufferRegion) -> tuple[str, list[object]]:
    """A region as (buffer name, [(min var or int, extent int)...]) for comparisons."""
    dims: list[object] = []
    for rng in r.region:
        lo = rng.min
        lo_v = lo.value if isinstance(lo, IntImm) else lo
        ext = rng.extent.value if isinstance(rng.extent, IntImm) else rng.extent
        dims.append((lo_v, ext))
    return r.buffer.name, dims


def matmul_func() -> tc.ir.PrimFunc:
    A = te.placeholder((1024, 1024), "float32", name="A")
    B = te.placeholder((1024, 1024), "float32", name="B")
    k = te.reduce_axis((0, 1024), name="k")
    C = te.compute((1024, 1024), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def test_matmul_design_example() -> None:
    func = matmul_func()
    assert func.name == "main"
    assert [p.name for p in func.params] == ["A", "B", "C"]
    assert isinstance(func.body, BlockRealize)
    root = func.body.block
    assert root.name == "root"
    assert root.iter_vars == ()
    assert root.alloc_buffers == ()
    c = block(func, "C")
    assert [iv.var.name for iv in c.iter_vars] == ["vi", "vj", "vk"]
    assert [iv.kind for iv in c.iter_vars] == [IterKind.SPATIAL, IterKind.SPATIAL, IterKind.REDUCE]
    assert all(iv.dom.extent.value == 1024 and iv.dom.min.value == 0 for iv in c.iter_vars)
    vi, vj, vk = (iv.var for iv in c.iter_vars)
    assert [region_of(r) for r in c.reads] == [
        ("A", [(vi, 1), (vk, 1)]),
        ("B", [(vk, 1), (vj, 1)]),
        ("C", [(vi, 1), (vj, 1)]),
    ]
    assert [region_of(r) for r in c.writes] == [("C", [(vi, 1), (vj, 1)])]
    # init stores the reducer's identity, the body accumulates
    assert isinstance(c.init, BufferStore)
    assert isinstance(c.init.value, FloatImm)
    assert c.init.value.value == 0.0
    assert isinstance(c.body, BufferStore)
    assert c.body.indices == (vi, vj)
    loops = loops_above(func, "C")
    assert [lp.loop_var.name for lp in loops] == ["i", "j", "k"]
    assert [lp.extent.value for lp in loops] == [1024, 1024, 1024]
    realize = loops[-1].body
    assert isinstance(realize, BlockRealize)
    assert realize.iter_values == tuple(lp.loop_var for lp in loops)
    # loop and block variables are distinct objects
    assert all(lp.loop_var is not iv.var for lp, iv in zip(loops, c.iter_vars, strict=True))


def test_elementwise_has_no_init_and_no_self_read() -> None:
    A = te.placeholder((4, 5), "float16", name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2.0 + 1, name="B")
    func = te.create_prim_func([A, B])
    b = block(func, "B")
    assert b.init is None
    assert [iv.kind for iv in b.iter_vars] == [IterKind.SPATIAL] * 2
    assert [region_of(r)[0] for r in b.reads] == ["A"]
    assert isinstance(b.body, BufferStore)
    assert b.body.value.dtype == tc.ir.dtype("float16")


def test_intermediate_stages_are_root_allocations_in_topological_order() -> None:
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * B[i], name="C")
    D = te.compute((8,), lambda i: C[i] - B[i], name="D")
    func = te.create_prim_func([A, D])
    assert [p.name for p in func.params] == ["A", "D"]
    assert [b.name for b in func.body.block.alloc_buffers] == ["B", "C"]
    assert [b.name for b in blocks(func)] == ["B", "C", "D", "root"]


def test_unique_block_and_buffer_names() -> None:
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="T")
    C = te.compute((8,), lambda i: B[i] + 1.0, name="T")
    func = te.create_prim_func([A, C])
    assert [b.name for b in blocks(func)] == ["T", "T_1", "root"]
    names = [b.name for b in func.params] + [b.name for b in func.body.block.alloc_buffers]
    assert len(set(names)) == len(names)


def test_symbolic_shapes_bind_from_buffers() -> None:
    n = Var("n")
    A = te.placeholder((n, "m"), "float32", name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] + 1.0, name="B")
    func = te.create_prim_func([A, B])
    assert [p.name for p in func.params] == ["A", "B"]
    assert func.params[0].shape[0] is n
    assert func.params[0].shape[1] is te.size_var("m")
    b = block(func, "B")
    assert b.iter_vars[0].dom.extent is n
    assert loops_above(func, "B")[0].extent is n


def test_variable_not_bound_by_a_shape_becomes_scalar_param() -> None:
    n = Var("n")
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n * 2,), lambda i: A[i // 2], name="B")
    off = Var("off")
    C = te.compute((n * 2,), lambda i: B[i] + tc.ir.cast(off, "float32"), name="C")
    func = te.create_prim_func([A, C])
    assert [p.name for p in func.params] == ["A", "C", "off"]
    # n appears only inside the compound extent n * 2: it must be passed explicitly
    X = te.placeholder((n * 2,), "float32", name="X")
    Y = te.compute(X.shape, lambda i: X[i] + 1.0, name="Y")
    assert [p.name for p in te.create_prim_func([X, Y]).params] == ["X", "Y", "n"]


def test_reduction_with_offset_domain_and_where() -> None:
    A = te.placeholder((10, 10), "float32", name="A")
    k = te.reduce_axis((2, 9), name="k")
    B = te.compute((10,), lambda i: te.max(A[i, k], axis=k, where=k < i), name="B")
    func = te.create_prim_func([A, B])
    b = block(func, "B")
    vk = b.iter_vars[1]
    assert vk.kind is IterKind.REDUCE
    assert (vk.dom.min.value, vk.dom.extent.value) == (2, 7)
    assert isinstance(b.init, BufferStore)
    assert b.init.value.value == float("-inf")
    assert isinstance(b.body.value, Max)
    assert isinstance(b.body.value.b, Select)
    loop_k = loops_above(func, "B")[1]
    assert (loop_k.min.value, loop_k.extent.value) == (2, 7)


def test_argmax_tuple_reduction() -> None:
    A = te.placeholder((6, 9), "float32", name="A")
    k = te.reduce_axis(9, name="k")
    idx, val = te.compute((6,), lambda i: te.argmax((k, A[i, k]), axis=k), name="am")
    assert (idx.dtype, val.dtype) == (tc.ir.dtype("int32"), tc.ir.dtype("float32"))
    assert idx.op is val.op
    assert (idx.name, val.name) == ("am", "am_v1")
    func = te.create_prim_func([A, idx, val])
    b = block(func, "am")
    assert [region_of(w)[0] for w in b.writes] == ["am", "am_v1"]
    assert [region_of(r)[0] for r in b.reads] == ["A", "am", "am_v1"]
    assert isinstance(b.init, tc.ir.SeqStmt)
    assert len(b.init.stmts) == 2
    assert isinstance(b.body, LetStmt)
    assert isinstance(b.body.body, LetStmt)
    # only the index listed: the value buffer is an intermediate allocation
    func2 = te.create_prim_func([A, idx])
    assert [a.name for a in func2.body.block.alloc_buffers] == ["am_v1"]


def test_custom_comm_reducer_and_multi_axis() -> None:
    absmax = te.comm_reducer(
        lambda x, y: tc.ir.op.max(x, tc.ir.op.fabs(y)), lambda d: tc.ir.const(0.0, d), "absmax"
    )
    A = te.placeholder((3, 4, 5), "float32", name="A")
    r1, r2 = te.reduce_axis(4, "r1"), te.reduce_axis(5, "r2")
    B = te.compute((3,), lambda i: absmax(A[i, r1, r2], axis=[r1, r2]), name="B")
    b = block(te.create_prim_func([A, B]), "B")
    assert [iv.kind for iv in b.iter_vars] == [IterKind.SPATIAL, IterKind.REDUCE, IterKind.REDUCE]


def test_stencil_read_region_is_hull() -> None:
    A = te.placeholder((10,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + A[i + 2] + A[i + 1], name="B")
    b = block(te.create_prim_func([A, B]), "B")
    (vi,) = (iv.var for iv in b.iter_vars)
    assert [region_of(r) for r in b.reads] == [("A", [(vi, 3)])]


def test_data_dependent_read_region_is_whole_dimension() -> None:
    A = te.placeholder((10, 4), "float32", name="A")
    ids = te.placeholder((3,), "int32", name="ids")
    B = te.compute((3, 4), lambda i, j: A[ids[i], j], name="B")
    b = block(te.create_prim_func([A, ids, B]), "B")
    vi, vj = (iv.var for iv in b.iter_vars)
    assert [region_of(r) for r in b.reads] == [("ids", [(vi, 1)]), ("A", [(0, 10), (vj, 1)])]
    assert all(isinstance(x, BufferLoad) for x in [b.body.value])


def test_attrs_become_block_annotations() -> None:
    A = te.placeholder((4,), "float32", name="A")
    B = te.compute((4,), lambda i: A[i], name="B", attrs={"op_pattern": 0})
    assert block(te.create_prim_func([A, B]), "B").annotations["op_pattern"] == 0


def test_tensor_properties_and_errors() -> None:
    A = te.placeholder((4, "n"), "float16", name="A")
    assert A.name == "A"
    assert A.dtype == tc.ir.dtype("float16")
    assert A.ndim == 2
    assert isinstance(A.op, te.PlaceholderOp)
    assert A.shape[1] is te.size_var("n")
    with pytest.raises(TilecraftError, match=r"rank 2 indexed with 1"):
        A[0]
    k = te.reduce_axis(4, "k")
    with pytest.raises(TilecraftError, match="whole body of a compute"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) * 2.0)
    B = te.compute((4,), lambda i: A[i, 0])
    with pytest.raises(TilecraftError, match=r"placeholder .A. is used but not among"):
        te.create_prim_func([B])
    with pytest.raises(TilecraftError, match=r"axis must come from te\.reduce_axis"):
        te.sum(A[0, 0], axis=Var("k"))

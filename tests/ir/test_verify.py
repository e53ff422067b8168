"""``tc.ir.verify``: one failing function per check (message asserted), and the valid forms each
check must accept (guards, symbolic sizes, data-dependent indices, lowered code)."""

from __future__ import annotations

import time

import pytest

import tilecraft as tc
from tilecraft.errors import IRError
from tilecraft.ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IRModule,
    IterKind,
    IterVar,
    LetStmt,
    PrimFunc,
    Range,
    Var,
    const,
    seq,
    verify,
)
from tilecraft.script import parse


def _f(text: str) -> PrimFunc:
    func = parse(text, verify=False)  # these tests call verify themselves
    assert isinstance(func, PrimFunc)
    return func


def _copy(read: str, write: str = "B[vi]", reads: str | None = None, n: str = "128") -> str:
    """A copy kernel ``B[vi] = <read>`` over ``range(n)`` (``n`` may be a shape variable)."""
    decl = "    n = T.int32()\n" if n == "n" else ""
    return f"""
@T.prim_func
def main(A: T.Buffer(({n},), "float32"), B: T.Buffer(({n},), "float32")):
{decl}    for i in range({n}):
        with T.block("B"):
            vi = T.axis.spatial({n}, i)
            T.reads({reads if reads is not None else read})
            T.writes({write})
            {write} = {read}
"""


# reads / writes agree with the body -----------------------------------------------------------
def test_load_missing_from_reads() -> None:
    f = _f(_copy("A[vi]", reads=""))
    with pytest.raises(
        IRError,
        match=r"^verify: function 'main', block 'B': load A\[vi\] reads 'A', which is in "
        r"neither T.reads nor T.writes$",
    ):
        verify(f)


def test_store_missing_from_writes() -> None:
    text = _copy("A[vi]").replace("T.writes(B[vi])", "T.writes()")
    with pytest.raises(
        IRError, match=r"block 'B': store B\[vi\] writes 'B', which is not in T.writes"
    ):
        verify(_f(text))


def test_reduction_update_may_be_covered_by_writes_only() -> None:
    verify(
        _f("""
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(16, k)
            T.reads(A[vi, vk])
            T.writes(C[vi])
            with T.init():
                C[vi] = T.float32(0.0)
            C[vi] = C[vi] + A[vi, vk]
""")
    )


def test_access_outside_the_declared_region() -> None:
    text = _copy("A[vi + 1]", reads="A[vi]").replace("range(128)", "range(127)")
    text = text.replace("spatial(128, i)", "spatial(127, i)")
    with pytest.raises(
        IRError,
        match=r"block 'B': load A\[vi \+ 1\] lies outside the region A\[vi\] the block "
        r"declares for 'A' at i = 126$",
    ):
        verify(_f(text))


def test_over_approximated_regions_are_fine() -> None:
    verify(_f(_copy("A[vi]", reads="A[0:128]", write="B[vi]")))


def test_store_outside_the_declared_write_region() -> None:
    text = _copy("A[vi]", write="B[vi]").replace("B[vi] = A[vi]", "B[127 - vi] = A[vi]")
    with pytest.raises(IRError, match=r"store B\[127 - vi\] lies outside the region B\[vi\]"):
        verify(_f(text))


# provable out-of-bounds accesses --------------------------------------------------------------
def test_out_of_bounds_past_the_end() -> None:
    with pytest.raises(
        IRError,
        match=r"^verify: function 'main', block 'B': load A\[vi \+ 1\] is out of bounds: index 0 "
        r"reaches 128, outside \[0, 128\) of buffer 'A' at i = 127$",
    ):
        verify(_f(_copy("A[vi + 1]", reads="A[vi + 1]")))


def test_out_of_bounds_below_zero() -> None:
    with pytest.raises(
        IRError, match=r"load A\[vi - 1\] is out of bounds: index 0 reaches -1, .* at i = 0"
    ):
        verify(_f(_copy("A[vi - 1]", reads="A[vi - 1]")))


def test_out_of_bounds_for_every_symbolic_size() -> None:
    with pytest.raises(
        IRError,
        match=r"load A\[vi \+ 1\] is out of bounds: index 0 reaches 1, outside \[0, n\) of "
        r"buffer 'A' at i = 0 \(with n = 1\)",
    ):
        verify(_f(_copy("A[vi + 1]", reads="A[vi + 1]", n="n")))


def test_sizes_that_only_may_differ_are_not_reported() -> None:
    # B has m elements, the loop runs n times: wrong only when m < n, so nothing is proved
    verify(
        _f("""
@T.prim_func
def main(A: T.Buffer((n,), "float32"), B: T.Buffer((m,), "float32")):
    n = T.int32()
    m = T.int32()
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
""")
    )


def test_guards_make_accesses_safe() -> None:
    verify(
        _f("""
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for i in range(128):
        with T.block("B"):
            vi = T.axis.spatial(128, i)
            T.reads(A[0:128])
            T.writes(B[vi])
            B[vi] = T.Select(vi >= 1, A[vi - 1], T.float32(0.0))
            if vi < 127:
                B[vi] = B[vi] + A[vi + 1]
            else:
                B[vi] = B[vi] + A[vi]
""")
    )


def test_the_wrong_branch_is_still_checked() -> None:
    text = _copy("T.Select(vi >= 1, A[vi - 1], A[vi - 2])", reads="A[0:128]")
    with pytest.raises(IRError, match=r"load A\[vi - 2\] is out of bounds: index 0 reaches -2"):
        verify(_f(text))


def test_init_runs_at_the_first_reduction_step_only() -> None:
    # the init indexes with the reduce iterator: only vk == 0 runs it, so C[vk] is in range
    verify(
        _f("""
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(16, k)
            T.reads(A[vi, vk])
            T.writes(C[0:8])
            with T.init():
                C[vk + vi] = T.float32(0.0)
            C[vi] = C[vi] + A[vi, vk]
""")
    )


def test_data_dependent_indices_are_not_reported() -> None:
    x = tc.te.placeholder((10, 4), "float32", name="x")
    ids = tc.te.placeholder((3,), "int32", name="ids")
    verify(tc.te.create_prim_func([x, ids, tc.topi.take(x, ids)]))  # clamped indices
    verify(
        _f("""
@T.prim_func
def main(X: T.Buffer((10, 4), "float32"), ids: T.Buffer((3,), "int32"),
         Y: T.Buffer((3, 4), "float32")):
    for i, j in T.grid(3, 4):
        with T.block("Y"):
            vi = T.axis.spatial(3, i)
            vj = T.axis.spatial(4, j)
            T.reads(ids[vi], X[0:10, vj])
            T.writes(Y[vi, vj])
            Y[vi, vj] = X[ids[vi], vj]
""")
    )  # unclamped: the values of ids are unknown, so nothing is provable


# block iterator bindings ----------------------------------------------------------------------
def test_binding_outside_the_domain() -> None:
    text = _copy("A[vi]").replace("spatial(128, i)", "spatial(100, i)")
    with pytest.raises(
        IRError,
        match=r"block 'B': iterator 'vi' is bound to i, which reaches 127 outside its domain "
        r"\[0, 100\) at i = 127",
    ):
        verify(_f(text))


def test_a_predicate_guards_the_binding() -> None:
    verify(
        _f("""
@T.prim_func
def main(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
    for i0, i1 in T.grid(4, 32):
        with T.block("B"):
            vi = T.axis.spatial(100, i0 * 32 + i1)
            T.where(i0 * 32 + i1 < 100)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
""")
    )


def test_a_split_without_its_predicate() -> None:
    split = """
@T.prim_func
def main(A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32")):
    SIZES
    for i0, i1 in T.grid(OUTER, 32):
        with T.block("B"):
            vi = T.axis.spatial(N, i0 * 32 + i1)
            T.where(i0 * 32 + i1 < N)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
"""
    static = split.replace("    SIZES\n", "").replace("OUTER", "4").replace("N", "100")
    verify(_f(static))
    with pytest.raises(
        IRError,
        match=r"iterator 'vi' is bound to i0 \* 32 \+ i1, which reaches 127 .* at i0 = 3, i1 = 31",
    ):
        verify(_f(static.replace("            T.where(i0 * 32 + i1 < 100)\n", "")))
    sym = split.replace("SIZES", "n = T.int32()").replace("OUTER", "(n + 31) // 32")
    sym = sym.replace("N", "n")
    verify(_f(sym))
    # without the predicate it is wrong only when n is not a multiple of 32: not reported
    verify(_f(sym.replace("            T.where(i0 * 32 + i1 < n)\n", "")))


# unique block names ---------------------------------------------------------------------------
def test_block_names_are_unique() -> None:
    f = _f(_copy("A[vi]"))
    twice = f.update(body=seq(f.body, f.body))
    with pytest.raises(
        IRError, match=r"^verify: function 'main': block name 'B' is used twice \(block names"
    ):
        verify(twice)


# definitions before use -----------------------------------------------------------------------
def _store_loop(body_index: object, *, outside: bool = False) -> PrimFunc:
    a = Buffer("A", (const(8),), "float32")
    i = Var("i")
    store = BufferStore(a, const(1.0, "float32"), (body_index if not outside else i,))
    loop = For(i, const(0), const(8), ForKind.SERIAL, BufferStore(a, const(0.0, "float32"), (i,)))
    return PrimFunc((a,), seq(loop, store) if outside else loop)


def test_loop_variable_used_after_its_loop() -> None:
    with pytest.raises(
        IRError,
        match=r"^verify: function 'main': variable 'i' is used in store A\[i\] but is not "
        r"defined there",
    ):
        verify(_store_loop(None, outside=True))


def test_free_variable_in_an_index() -> None:
    a = Buffer("A", (const(8),), "float32")
    k = Var("k")
    with pytest.raises(IRError, match="variable 'k' is used in store A\\[k\\] but is not defined"):
        verify(PrimFunc((a,), BufferStore(a, const(1.0, "float32"), (k,))))
    verify(PrimFunc((a, k), BufferStore(a, const(1.0, "float32"), (k % 8,))))  # a parameter


def test_let_variable_used_outside_its_let() -> None:
    a = Buffer("A", (const(8),), "float32")
    x = Var("x")
    let = LetStmt(x, const(3), BufferStore(a, const(1.0, "float32"), (x,)))
    verify(PrimFunc((a,), let))
    with pytest.raises(IRError, match="variable 'x' is used in store A\\[x\\]"):
        verify(PrimFunc((a,), seq(let, BufferStore(a, const(2.0, "float32"), (x,)))))


def test_block_iterator_used_outside_its_block() -> None:
    f = _f(_copy("A[vi]"))
    loop = f.body
    assert isinstance(loop, For)
    realize = loop.body
    assert isinstance(realize, BlockRealize)
    vi = realize.block.iter_vars[0].var
    b = f.buffer_params[1]
    bad = loop.update(body=seq(realize, BufferStore(b, const(0.0, "float32"), (vi,))))
    with pytest.raises(
        IRError, match="variable 'vi' is used in store B\\[vi\\] but is not defined"
    ):
        verify(f.update(body=bad))


def test_buffers_must_be_allocated_where_used() -> None:
    a = Buffer("A", (const(8),), "float32")
    tmp = Buffer("tmp", (const(8),), "float32")
    i = Var("i")
    use = For(i, const(0), const(8), ForKind.SERIAL, BufferStore(a, tmp[i], (i,)))
    fill = For(i, const(0), const(8), ForKind.SERIAL, BufferStore(tmp, const(0.0, "float32"), (i,)))
    verify(PrimFunc((a,), Allocate(tmp, seq(fill, use))))
    with pytest.raises(
        IRError,
        match=r"function 'main': buffer 'tmp' is used in load tmp\[i\] but is not defined here "
        r"\(not a parameter, an alloc_buffer of an enclosing block or an enclosing allocation\)",
    ):
        verify(PrimFunc((a,), seq(Allocate(tmp, fill), use)))


def test_shape_variables_of_parameters_are_defined() -> None:
    n = Var("n")
    a = Buffer("A", (n, const(4)), "float32")
    i = Var("i")
    verify(
        PrimFunc(
            (a,),
            For(
                i, const(0), n, ForKind.SERIAL, BufferStore(a, const(0.0, "float32"), (i, const(0)))
            ),
        )
    )
    m = Var("m")
    tmp = Buffer("tmp", (m,), "float32")
    bad = Allocate(tmp, BufferStore(tmp, const(0.0, "float32"), (const(0),)))
    with pytest.raises(IRError, match="variable 'm' is used in the shape of allocation 'tmp'"):
        verify(PrimFunc((a,), bad))


def test_block_regions_name_defined_buffers() -> None:
    a = Buffer("A", (const(8),), "float32")
    ghost = Buffer("ghost", (const(8),), "float32")
    v = Var("v")
    blk = Block(
        "B",
        (IterVar(v, Range(const(0), const(8)), IterKind.SPATIAL),),
        (BufferRegion.full(ghost),),
        (BufferRegion.point(a, [v]),),
        BufferStore(a, const(1.0, "float32"), (v,)),
    )
    i = Var("i")
    realize = BlockRealize((i,), const(True, "bool"), blk)
    with pytest.raises(
        IRError, match=r"block 'B': buffer 'ghost' is used in T.reads region ghost\[0:8\] but"
    ):
        verify(PrimFunc((a,), For(i, const(0), const(8), ForKind.SERIAL, realize)))


# lowered and scheduled IR ---------------------------------------------------------------------
def test_lowered_out_of_bounds_store_names_no_block() -> None:
    f = _f("""
@T.prim_func
def main(A: T.Buffer((64,), "float32")):
    for i, j in T.grid(8, 8):
        A[i * 8 + j + 1] = T.float32(0.0)
""")
    with pytest.raises(
        IRError,
        match=r"^verify: function 'main': store A\[i \* 8 \+ j \+ 1\] is out of bounds: index 0 "
        r"reaches 64, outside \[0, 64\) of buffer 'A' at i = 7, j = 7$",
    ):
        verify(f)


def test_gpu_lowered_and_scheduled_functions_verify() -> None:
    import verify_corpus  # noqa: F401  (puts the GPU kernels on sys.path)
    from kernels import make_scale_symbolic, make_softmax

    for func, _ in (make_softmax(), make_scale_symbolic()):
        verify(func)
        verify(tc.lower.lower_gpu_function(func, tc.Target("cuda")))
        verify(tc.lower.lower(func, "cpu", emulate_gpu=True))


def test_module_verify_checks_every_prim_func() -> None:
    good, bad = _f(_copy("A[vi]")), _f(_copy("A[vi]", reads=""))
    verify(IRModule({"a": good}))
    with pytest.raises(IRError, match="function 'b', block 'B'"):
        verify(IRModule({"a": good, "b": bad}))
    with pytest.raises(IRError, match="verify: expected a PrimFunc or IRModule, got str"):
        verify("main")  # type: ignore[arg-type]


def test_deep_ir_gives_no_recursion_error() -> None:
    a = Buffer("A", (const(8),), "float32")
    value = const(0.0, "float32")
    for _ in range(3000):
        value = value + const(1.0, "float32")
    body: tc.ir.Stmt = BufferStore(a, value, (const(0),))
    for k in range(1500):
        body = LetStmt(Var(f"x{k}"), const(k), body)
    verify(PrimFunc((a,), body))


def test_verify_is_fast_on_a_scheduled_matmul() -> None:
    a = tc.te.placeholder((1024, 1024), "float32", name="A")
    b = tc.te.placeholder((1024, 1024), "float32", name="B")
    sch = tc.Schedule(tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)]))
    blk = sch.get_block("matmul")
    i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, [None, 32])
    jo, ji = sch.split(j, [None, 32])
    sch.reorder(io, jo, k, ii, ji)
    sch.reverse_compute_at(sch.cache_write(blk, 0, "local"), jo)
    sch.decompose_reduction(blk, k)
    verify(sch.func)
    start = time.perf_counter()
    for _ in range(10):
        verify(sch.func)
    assert (time.perf_counter() - start) / 10 < 0.05  # ~2 ms measured; generous for CI


def test_a_binding_is_evaluated_in_the_enclosing_block() -> None:
    # idx[i] in the binding of "inner" is read by "outer" (which declares idx[0:4]); checking it
    # against inner's own idx[0:1] would report a region error that does not exist
    verify(
        _f("""
@T.prim_func
def main(idx: T.Buffer((4,), "int32"), A: T.Buffer((10,), "float32"),
         B: T.Buffer((4,), "float32")):
    with T.block("outer"):
        T.reads(idx[0:4], A[0:10])
        T.writes(B[0:4])
        for i in range(4):
            with T.block("inner"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.opaque(10, idx[i])
                T.reads(A[vj], idx[0:1])
                T.writes(B[vi])
                B[vi] = A[vj]
""")
    )


# where verify runs ----------------------------------------------------------------------------
_UNLISTED_READ = _copy("A[vi]", reads="")


def test_parse_verifies_unless_told_not_to() -> None:
    with pytest.raises(IRError, match=r"block 'B': load A\[vi\] reads 'A'"):
        parse(_UNLISTED_READ)
    assert isinstance(parse(_UNLISTED_READ, verify=False), PrimFunc)


def test_from_json_verifies_functions_and_modules_unless_told_not_to() -> None:
    bad = parse(_UNLISTED_READ, verify=False)
    for doc in (tc.ir.to_json(bad), tc.ir.to_json(IRModule({"f": bad}))):
        with pytest.raises(IRError, match=r"block 'B': load A\[vi\] reads 'A'"):
            tc.ir.from_json(doc)
        assert tc.ir.from_json(doc, verify=False) is not None
    expr = tc.ir.from_json(tc.ir.to_json(Var("x") + 1))  # not a function: nothing to verify
    assert isinstance(expr, tc.ir.Add)


def test_build_verifies_before_lowering() -> None:
    bad = parse(_UNLISTED_READ, verify=False)
    with pytest.raises(IRError, match=r"block 'B': load A\[vi\] reads 'A'"):
        tc.build(bad, "cpu")
    with pytest.raises(IRError, match=r"block 'B': load A\[vi\] reads 'A'"):
        tc.build(IRModule({"f": bad}), "cpu")


def test_schedule_debug_switch_verifies_after_every_primitive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tilecraft.schedule import Schedule

    func = parse(_copy("A[vi]"))
    calls: list[str] = []

    def counting(f: PrimFunc | IRModule) -> None:
        calls.append("verify")
        verify(f)

    monkeypatch.setattr("tilecraft.schedule.schedule.verify_ir", counting)
    sch = Schedule(func, verify=True)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 8])
    assert calls == ["verify"]  # the query changed nothing; the split was verified
    monkeypatch.setenv("TILECRAFT_VERIFY", "1")
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 8])
    assert calls == ["verify", "verify"]
    monkeypatch.setenv("TILECRAFT_VERIFY", "0")
    sch = Schedule(func)
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 8])
    assert calls == ["verify", "verify"]


def test_a_primitive_whose_result_fails_verification_fails_cleanly() -> None:
    from tilecraft.errors import ScheduleError
    from tilecraft.schedule import Schedule

    func = parse(_copy("A[vi]"))
    sch = Schedule(func, verify=True)

    def broken(f: PrimFunc | IRModule) -> None:
        raise IRError("verify: function 'main': a planted failure")

    sch.state.post_commit_check = broken
    (i,) = sch.get_loops(sch.get_block("B"))
    before = sch.func
    with pytest.raises(ScheduleError, match=r"split: .*planted failure"):
        sch.split(i, [None, 8])
    assert sch.func is before
    assert len(sch.trace) == 2  # get_block, get_loops: the failed split left nothing

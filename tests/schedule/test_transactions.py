"""A primitive is all or nothing: snapshot/restore, internal errors as ScheduleError.

Covers ``ScheduleState.snapshot``/``restore``, ``run_primitive`` (a composite primitive that
commits several times and then fails leaves nothing behind; IRError and RecursionError
become ScheduleError naming the primitive; a genuine bug propagates unchanged), the
post-commit hook, ``try_`` and an all-or-nothing trace replay.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sched_loop_helpers import matmul, two_stage

import tilecraft as tc
from tilecraft import ir
from tilecraft.errors import IRError, ScheduleError
from tilecraft.schedule import INSTRUCTION_KINDS, LoopRV, Schedule, ScheduleState, primitive
from tilecraft.schedule.primitives import loop as loop_prims


@pytest.fixture
def composite() -> Iterator[Any]:
    """Register test-only primitives (removed afterwards so the registry stays as shipped)."""
    names = ["test_split_then_fail", "test_commit_then_irerror", "test_bug", "test_deep"]

    @primitive("test_split_then_fail", inputs=("loop",))
    def split_then_fail(state: ScheduleState, loop: LoopRV) -> None:
        _outer, inner = loop_prims.split(state, loop, [None, 4])
        loop_prims.split(state, inner, [None, 2])  # a second commit
        loop_prims.fuse(state, loop)  # stale handle: fails after two commits

    @primitive("test_commit_then_irerror", inputs=("loop",))
    def commit_then_irerror(state: ScheduleState, loop: LoopRV) -> None:
        loop_prims.split(state, loop, [None, 4])
        ir.IntImm(ir.dtype("int32"), 2**40)  # what an overflowing extent does

    @primitive("test_bug", inputs=("loop",))
    def bug(state: ScheduleState, loop: LoopRV) -> None:
        loop_prims.split(state, loop, [None, 4])
        _ = state.no_such_attribute  # type: ignore[attr-defined]

    @primitive("test_deep")
    def deep(state: ScheduleState) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    yield split_then_fail, commit_then_irerror, bug, deep
    for name in names:
        del INSTRUCTION_KINDS[name]


def _state_of(sch: Schedule) -> tuple[object, int, dict[str, int], object]:
    st = sch.state
    return st.func, len(st.trace), dict(st.block_gen), st.rng.getstate()


def test_composite_failing_after_two_commits_leaves_nothing(composite: Any) -> None:
    split_then_fail = composite[0]
    sch = Schedule(matmul(16, 16, 16), seed=3)
    i = sch.get_loops(sch.get_block("C"))[0]
    before = _state_of(sch)
    with pytest.raises(ScheduleError, match=r"^test_split_then_fail: fuse: loop handle") as info:
        split_then_fail(sch.state, i)
    assert _state_of(sch) == before
    assert sch.state.func is before[0]
    assert isinstance(info.value.__cause__, ScheduleError)
    assert info.value.__cause__.primitive == "fuse"
    assert sch.state.depth == 0
    assert sch.state.primitive == "schedule"


def test_internal_irerror_becomes_schedule_error(composite: Any) -> None:
    sch = Schedule(matmul(16, 16, 16))
    i = sch.get_loops(sch.get_block("C"))[0]
    before = _state_of(sch)
    with pytest.raises(ScheduleError, match=r"^test_commit_then_irerror: .*IRError") as info:
        composite[1](sch.state, i)
    assert isinstance(info.value.__cause__, IRError)
    assert _state_of(sch) == before


def test_recursion_error_becomes_schedule_error(composite: Any) -> None:
    sch = Schedule(matmul(8, 8, 8))
    before = _state_of(sch)
    with pytest.raises(ScheduleError, match=r"^test_deep: .*nested too deeply") as info:
        composite[3](sch.state)
    assert isinstance(info.value.__cause__, RecursionError)
    assert _state_of(sch) == before


def test_a_genuine_bug_is_not_swallowed_but_state_is_restored(composite: Any) -> None:
    sch = Schedule(matmul(16, 16, 16))
    i = sch.get_loops(sch.get_block("C"))[0]
    before = _state_of(sch)
    with pytest.raises(AttributeError, match="no_such_attribute"):
        composite[2](sch.state, i)
    assert _state_of(sch) == before
    assert sch.state.depth == 0


def _deep_nest(depth: int) -> ir.PrimFunc:
    """B = A + 1 under ``depth`` unit loops, built directly (no primitive in between)."""
    func = two_stage(4)
    root = func.body
    assert isinstance(root, ir.BlockRealize)
    body = root.block.body
    for k in range(depth):
        body = ir.For(ir.Var(f"u{k}", "int32"), ir.const(0), ir.const(1), ir.ForKind.SERIAL, body)
    return func.update(body=root.update(block=root.block.update(body=body)))


def test_deep_ir_is_a_schedule_error_not_a_crash() -> None:
    sch = Schedule(_deep_nest(1500))
    before = sch.func
    # the tree index walks without recursion: queries work at any depth
    block = sch.get_block("B")
    assert len(sch.get_loops(block)) == 1502
    # a primitive whose helpers recurse fails cleanly and leaves the schedule as it was
    with pytest.raises(ScheduleError, match=r"^cache_read: .*nested too deeply"):
        sch.cache_read(block, 0, "local")
    assert sch.func is before
    assert [i.kind for i in sch.trace.insts] == ["get_block", "get_loops"]


def _symbolic_two_stage() -> ir.PrimFunc:
    n, m = ir.Var("n", "int32"), ir.Var("m", "int32")
    A = tc.te.placeholder((n, m), "float32", name="A")
    B = tc.te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = tc.te.compute((n, m), lambda i, j: B[i, j] * 2.0, name="C")
    return tc.te.create_prim_func([A, C])


@pytest.mark.parametrize(
    "prim", ["cache_read", "cache_write", "compute_at", "reverse_compute_at", "sample_location"]
)
def test_symbolic_fused_extents_never_raise_raw_errors(prim: str) -> None:
    """After fusing symbolic loops, building a cache or moving a block once overflowed int32
    inside the primitive (a raw IRError); now it succeeds or fails cleanly."""
    sch = Schedule(_symbolic_two_stage(), seed=0)
    for name in ("B", "C"):
        sch.fuse(*sch.get_loops(sch.get_block(name)))
    b, c = sch.get_block("B"), sch.get_block("C")
    calls = {
        "cache_read": lambda: sch.cache_read(c, 0, "local"),
        "cache_write": lambda: sch.cache_write(b, 0, "local"),
        "compute_at": lambda: sch.compute_at(b, sch.get_loops(c)[0]),
        "reverse_compute_at": lambda: sch.reverse_compute_at(c, sch.get_loops(b)[0]),
        "sample_location": lambda: sch.compute_at(b, sch.sample_compute_location(b)),
    }
    func, n = sch.func, len(sch.trace)
    try:
        calls[prim]()
    except ScheduleError:
        assert sch.func is func
        assert len(sch.trace) <= n + 1


def test_post_commit_check_runs_after_each_changing_primitive() -> None:
    sch = Schedule(matmul(16, 16, 16))
    seen: list[ir.PrimFunc] = []
    sch.state.post_commit_check = seen.append
    blk = sch.get_block("C")
    i = sch.get_loops(blk)[0]
    assert seen == []  # queries do not change the function
    sch.split(i, [None, 4])
    assert seen == [sch.func]

    def reject(func: ir.PrimFunc) -> None:
        raise IRError("verify: block C reads outside its region")

    sch.state.post_commit_check = reject
    outer = sch.get_loops(blk)[0]
    before, n = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match=r"^unroll: .*verify: block C") as info:
        sch.unroll(outer)
    assert isinstance(info.value.__cause__, IRError)
    assert sch.func is before
    assert len(sch.trace) == n
    assert sch.copy().state.post_commit_check is reject


def test_snapshot_and_restore() -> None:
    sch = Schedule(two_stage(16), seed=1)
    st = sch.state
    snap = st.snapshot()
    sch.compute_inline(sch.get_block("B"))  # removes block B: its handles become stale
    sch.sample_categorical([1, 2, 3], [1, 1, 1])
    assert st.block_gen == {"B": 1}
    st.restore(snap)
    assert st.func is snap.func
    assert len(st.trace) == 0
    assert st.block_gen == {}
    assert st.rng.getstate() == snap.rng_state
    sch.get_loops(sch.get_block("B"))  # B is back


def test_try_undoes_everything_and_lets_bugs_through() -> None:
    sch = Schedule(matmul(16, 16, 16))
    i = sch.get_loops(sch.get_block("C"))[0]
    func = sch.func

    def split_then_bug() -> None:
        sch.split(i, [None, 4])
        raise KeyError("bug")

    with pytest.raises(KeyError):
        sch.try_(split_then_bug)
    assert sch.func is func
    assert len(sch.trace) == 2


def test_failed_replay_leaves_the_schedule_unchanged() -> None:
    before = matmul(16, 16, 16)
    sch = Schedule(before)
    i = sch.get_loops(sch.get_block("C"))[0]
    v = sch.sample_perfect_tile(i, n=2, decision=[4, 4])
    sch.split(i, v)
    bad = sch.trace.with_decision(2, [3, 5])  # does not multiply to 16
    fresh = Schedule(before)
    with pytest.raises(ScheduleError, match="no longer fits"):
        bad.apply_to_schedule(fresh)
    assert len(fresh.trace) == 0
    assert tc.ir.structural_equal(fresh.func, before)

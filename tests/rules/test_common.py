"""The rules' one helper library: each helper's contract."""

from __future__ import annotations

import sys

import pytest

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import Evaluate, For, ForKind, IterKind, PrimFunc, Stmt, Var, const
from tilecraft.rules import common


def _two_stage() -> PrimFunc:
    a = tc.te.placeholder((8, 6), "float32", name="A")
    r = tc.te.reduce_axis((0, 6), name="k")
    b = tc.te.compute((8,), lambda i: tc.te.sum(a[i, r] * a[i, r], axis=r), name="B")
    c = tc.te.compute((8,), lambda i: tc.te.exp(b[i]), name="C")
    return tc.te.create_prim_func([a, c])


def test_numbers() -> None:
    assert common.const_int(4) == 4
    assert common.const_int(const(5, "int32")) == 5
    assert common.const_int(Var("n", "int32")) is None
    assert common.product([2, 3, 4]) == 24
    assert common.product([2, None]) is None
    assert common.pick_tile(6, 8) == 6  # the whole loop
    assert common.pick_tile(48, 16, step=8) == 16
    assert common.pick_tile(40, 16, step=8) == 8
    assert common.pick_tile(None, 16) == 16


def test_block_questions_follow_the_schedule() -> None:
    sch = tc.Schedule(_two_stage())
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    assert common.block_node(sch, b) is sch.get(b)
    assert common.loop_kinds(sch, b, [i, k]) == [{IterKind.SPATIAL}, {IterKind.REDUCE}]
    assert common.iter_var_of_loop(sch, b, k) is common.block_node(sch, b).iter_vars[1].var
    assert common.bound_alone(sch, b, i)
    assert common.loop_extent(sch, k) == 6
    assert common.loop_of_iter(sch, b, 1) is not None
    assert not common.writes_param(sch, b)
    assert common.writes_param(sch, sch.get_block("C"))
    assert common.store_dtype(common.block_node(sch, b)) == tc.ir.dtype("float32")
    assert common.has_call(common.block_node(sch, sch.get_block("C")).body)
    assert not common.has_call(common.block_node(sch, b).body)
    loads = common.loads_of(common.block_node(sch, b).body)
    assert [ld.buffer.name for ld in loads] == ["B", "A", "A"]


def test_loops_below() -> None:
    sch = tc.Schedule(_two_stage())
    b, c = sch.get_block("B"), sch.get_block("C")
    i, k = sch.get_loops(b)
    (ci,) = sch.get_loops(c)
    assert [lp.var for lp in common.loops_below(sch, b)] == [i.var, k.var]  # all of them
    assert [lp.var for lp in common.loops_below(sch, b, i)] == [k.var]
    assert common.loops_below(sch, b, k) == []
    assert common.loops_below(sch, c, i) == []  # not under the loop: none
    assert common.loops_below(sch, c, ci) == []


def test_a_stale_handle_is_a_schedule_error_for_every_question() -> None:
    a = tc.te.placeholder((8,), "float32", name="A")
    b = tc.te.compute((8,), lambda i: a[i] * 2.0, name="B")
    c = tc.te.compute((8,), lambda i: b[i] + 1.0, name="C")
    sch = tc.Schedule(tc.te.create_prim_func([a, c]))
    gone = sch.get_block("B")
    (loop,) = sch.get_loops(sch.get_block("C"))
    sch.compute_inline(gone)
    for question in (
        lambda: common.block_node(sch, gone),
        lambda: common.loop_kinds(sch, gone, [loop]),
        lambda: common.iter_var_of_loop(sch, gone, loop),
        lambda: common.writes_param(sch, gone),
        lambda: common.loops_below(sch, gone, loop),
    ):
        with pytest.raises(ScheduleError, match="stale"):
            question()
    assert common.block_node(sch, sch.get_block("C")).name == "C"


def test_loop_of_iter_without_a_loop_is_a_schedule_error() -> None:
    sch = tc.Schedule(_two_stage())
    b = sch.get_block("B")
    i, _ = sch.get_loops(b)
    with pytest.raises(ScheduleError, match="bound to no loop"):
        common.loop_of_iter(sch, b, 0, below=i)


def test_steps_are_atomic() -> None:
    sch = tc.Schedule(_two_stage())
    b = sch.get_block("B")
    before = sch.func
    assert not common.attempt(sch, sch.vectorize, sch.get_loops(b)[1])  # a reduce loop
    assert sch.func is before
    assert common.vectorize_innermost(sch, sch.get_block("C"))
    assert common.non_serial_loop(sch.func.body) is not None


def test_non_serial_loop_in_program_order_and_at_any_depth() -> None:
    sch = tc.Schedule(_two_stage())
    assert common.non_serial_loop(sch.func.body) is None
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    first = common.non_serial_loop(sch.func.body)
    assert first is not None
    assert first.loop_var is sch.get_loops(sch.get_block("B"))[0].var  # B's nest comes first
    body: Stmt = Evaluate(const(0, "int32"))
    body = For(Var("inner", "int32"), 0, 4, ForKind.VECTORIZED, body)
    for n in range(sys.getrecursionlimit() * 3):
        body = For(Var(f"i{n}", "int32"), 0, 1, ForKind.SERIAL, body)
    deep = common.non_serial_loop(body)
    assert deep is not None
    assert deep.loop_var.name == "inner"

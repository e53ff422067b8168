"""``Schedule.get_realize``: the BlockRealize of a block handle, untraced, stale-checked."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import BlockRealize, PrimFunc


def _func() -> PrimFunc:
    a = tc.te.placeholder((8, 6), "float32", name="A")
    b = tc.te.compute((8, 6), lambda i, j: a[i, j] * 2.0, name="B")
    c = tc.te.compute((8, 6), lambda i, j: b[i, j] + 1.0, name="C")
    return tc.te.create_prim_func([a, c])


def test_get_realize_is_the_realize_of_the_block() -> None:
    sch = tc.Schedule(_func())
    block = sch.get_block("C")
    realize = sch.get_realize(block)
    assert isinstance(realize, BlockRealize)
    assert realize.block is sch.get(block)
    i, j = sch.get_loops(block)
    assert [id(v) for v in realize.iter_values] == [id(i.var), id(j.var)]  # bound to the loops


def test_get_realize_follows_the_schedule_and_is_not_traced() -> None:
    sch = tc.Schedule(_func())
    block = sch.get_block("C")
    i, _ = sch.get_loops(block)
    before = len(sch.trace.insts)
    sch.get_realize(block)
    assert len(sch.trace.insts) == before
    i0, i1 = sch.split(i, factors=[None, 4])
    realize = sch.get_realize(block)
    used = tc.ir.collect_vars(realize.iter_values[0])
    assert {id(v) for v in used} == {id(i0.var), id(i1.var)}


def test_get_realize_of_a_stale_handle_is_a_schedule_error() -> None:
    sch = tc.Schedule(_func())
    b = sch.get_block("B")
    sch.compute_inline(b)
    with pytest.raises(ScheduleError, match=r"get_realize: .*stale"):
        sch.get_realize(b)


def test_get_realize_rejects_a_loop_handle() -> None:
    sch = tc.Schedule(_func())
    (i, _) = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"get_realize: argument 'block': expected a BlockRV"):
        sch.get_realize(i)  # type: ignore[arg-type]

"""The random GPU-schedule campaign (tests/gpu/gpu_campaign.py): random GPU schedules of small
workloads, GPU-lowered and run under the race checker, equal the unscheduled function; a short
seeded run by default, a bigger one marked slow; the runner's own verdicts (a race, a missed
race, a crash, a hang) on schedules and children made to produce them; and the campaign's
findings, reduced to minimal schedules."""

from __future__ import annotations

import faulthandler
import os
import signal
import time

import gpu_campaign as gc
import pytest
import schedules as ks
from gpu_campaign_templates import TEMPLATES, Workload

import tilecraft as tc
from tilecraft.errors import LowerError
from tilecraft.ir import PrimFunc
from tilecraft.schedule import Schedule
from tilecraft.testing import check_numeric

ALL_TEMPLATES = {t.__name__ for ts in TEMPLATES.values() for t in ts}


def _no_findings(stats: gc.Stats) -> None:
    shown = "\n\n".join(text for texts in stats.examples.values() for text in texts)
    assert not stats.findings, f"{dict(stats.finding_kinds)}\n{shown}"


def test_short_campaign_is_clean_and_covers_every_template() -> None:
    stats = gc.run_campaign(36, base_seed=0)
    _no_findings(stats)
    assert stats.cases == 36
    assert stats.emulated >= 24, stats.as_dict()
    assert set(stats.passed_by_template) == ALL_TEMPLATES, stats.as_dict()


@pytest.mark.slow
def test_campaign_of_400_cases_is_clean() -> None:
    stats = gc.run_campaign(400, base_seed=100_000)
    _no_findings(stats)
    assert stats.emulated >= 280, stats.as_dict()
    assert stats.expected_races > 0  # redundant fetches were drawn, and reported


# -- the runner's verdicts ------------------------------------------------------------------
def _matmul(n: int = 16) -> PrimFunc:
    a = tc.te.placeholder((n, n), "float32", name="A")
    b = tc.te.placeholder((n, n), "float32", name="B")
    return tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])


def _redundant_fetch(func: PrimFunc) -> Schedule:
    """4 x 4 threads per 8 x 8 tile; the A tile is fetched by threadIdx.x only, so the four
    threads of each threadIdx.x value store the same elements in one barrier phase."""
    sch = Schedule(func)
    c = sch.get_block("matmul")
    i, j, k = sch.get_loops(c)
    by, ty, ii = sch.split(i, [None, 4, 2])
    bx, tx, jj = sch.split(j, [None, 4, 2])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(by, bx, ty, tx, ko, ki, ii, jj)
    for loop, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):  # fmt: skip
        sch.bind(loop, tag)
    shared = sch.cache_read(c, 0, "shared")
    sch.compute_at(shared, ko)
    _, fx = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 4])
    sch.bind(fx, "threadIdx.x")
    return sch


def _case(sch: Schedule, func: PrimFunc, redundant: bool) -> gc.Case:
    return gc.Case(0, Workload("matmul", func), "hand", sch, redundant=redundant)


def test_redundant_shared_stores_are_the_expected_report() -> None:
    func = _matmul()
    sch = _redundant_fetch(func)
    assert gc.judge(_case(sch, func, redundant=True))[0] == "expected"
    verdict, key, detail = gc.judge(_case(sch, func, redundant=False))
    assert (verdict, key) == ("race", "conflict (same value) in A_shared")
    assert "stores A_shared" in detail


def test_a_clean_schedule_passes_and_a_missing_report_is_a_finding() -> None:
    func = ks.gemm_func(64, 64, 32)
    sch = ks.schedule_gemm(func)
    assert gc.judge(_case(sch, func, redundant=False)) == ("ok", "", "")
    assert gc.judge(_case(sch, func, redundant=True))[0] == "missed"


def test_a_crashing_or_hanging_child_is_recorded() -> None:
    def segfault() -> tuple[str, str, str]:
        faulthandler.disable()  # a deliberate crash: no stack dump into the test run's output
        os.kill(os.getpid(), signal.SIGSEGV)
        return ("ok", "", "")

    def hang() -> tuple[str, str, str]:
        time.sleep(30)
        return ("ok", "", "")

    assert gc.run_forked(segfault, timeout=30)[:2] == ("crash", f"signal {signal.SIGSEGV}")
    assert gc.run_forked(hang, timeout=0.5)[:2] == ("crash", "hang (timeout)")


def test_cases_are_reproducible_from_their_seed() -> None:
    first, again = gc.draw(7), gc.draw(7)
    assert (first.template, first.work.spec) == (again.template, again.work.spec)
    assert first.reproducer() == again.reproducer()


# -- findings, reduced ----------------------------------------------------------------------
def _row_sum_decomposed() -> tuple[PrimFunc, Schedule]:
    """One block per row of a row sum, the reduce loop split over 4 threads (thread loop
    inner), the init split off by decompose_reduction (campaign cases 100374, 100815, 101677,
    100679, 101675: softmax/layer norm stages in local or shared memory)."""
    x = tc.te.placeholder((3, 100), "float32", name="X")
    func = tc.te.create_prim_func([x, tc.topi.sum(x, axis=1)])
    sch = Schedule(func)
    (red,) = sch.get_child_blocks(sch.get_block("root"))
    row, k = sch.get_loops(red)
    sch.bind(row, "blockIdx.x")
    ko, tx = sch.split(k, [None, 4])
    sch.bind(tx, "threadIdx.x")
    sch.decompose_reduction(red, ko)
    return func, sch


def test_thread_bound_reduction_without_init_is_refused() -> None:
    """It was lowered as a plain loop: every thread added its share to the row's element with
    no combine (a silent global race: 1.47 instead of 9.66); in 'local' memory every thread
    kept its own partial. The serial meaning is right either way."""
    func, sch = _row_sum_decomposed()
    check_numeric(sch.func, func, emulate_gpu="serial", target=gc.TARGET)
    with pytest.raises(LowerError, match=r"bound to threadIdx.x but the block has no init"):
        tc.build(sch.func, target=gc.TARGET, emulate="racecheck")


def _elementwise_through_shared() -> tuple[PrimFunc, Schedule]:
    """``relu(2 * X)`` for X 3 x 20: the output fused and split over 8 blocks of 8 threads,
    ``2 * X`` computed into shared memory under the block loop, fetched by the 8 threads
    (campaign case 100266). Block 3 stores rows from 20 on, so element 24 is stored by thread
    4 and loaded by thread 0."""
    x = tc.te.placeholder((3, 20), "float32", name="X")
    t = tc.te.compute((3, 20), lambda i, j: x[i, j] * 2.0, name="t")
    func = tc.te.create_prim_func([x, tc.topi.relu(t)])
    sch = Schedule(func)
    producer, last = sch.get_child_blocks(sch.get_block("root"))
    bx, tx = sch.split(sch.fuse(*sch.get_loops(last)), [None, 8])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.set_scope(producer, 0, "shared")
    sch.compute_at(producer, bx)
    _, fx = sch.split(sch.fuse(*sch.get_loops(producer)[1:]), [None, 8])
    sch.bind(fx, "threadIdx.x")
    return func, sch


def test_barrier_between_shared_producer_and_consumer_of_another_block_offset() -> None:
    """Campaign case 100266: whether the thread that stores a shared element is the one that
    loads it changes from block to block (the tile starts at ``bx * 8 % 20``). Deciding from
    blockIdx 0, 1 and 7 only, InsertThreadSync left out the barrier blocks 3 and 5 need; a
    grid of at most 64 blocks is now decided block by block."""
    func, sch = _elementwise_through_shared()
    check_numeric(sch.func, func, emulate_gpu="serial", target=gc.TARGET)
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=gc.TARGET)

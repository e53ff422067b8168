"""The block/loop index cache: per schedule, per thread outside one, correct under threads.

The cache was one module-level dict; threads evicting from it at once raised ``KeyError`` or
``RuntimeError: dictionary changed size during iteration`` from inside primitives.
"""

from __future__ import annotations

import gc
import random
import sys
import threading
from collections.abc import Callable, Iterator

import pytest
from sched_loop_helpers import matmul, two_stage

import tilecraft as tc
from tilecraft.ir import PrimFunc
from tilecraft.schedule import Schedule, _tree


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads as often as possible while the test runs."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _run_threads(target: Callable[[int], None], n: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrapped(k: int) -> None:
        try:
            target(k)
        except BaseException as e:  # noqa: BLE001 - collected and re-raised by the test
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def _elementwise(n: int) -> PrimFunc:
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.compute((n, n), lambda i, j: A[i, j] + 1.0, name="B")
    return tc.te.create_prim_func([A, B])


def test_lookups_from_many_threads_never_fail(busy_switching: None) -> None:
    funcs = [_elementwise(4 + k) for k in range(64)]

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(1500):
            f = rng.choice(funcs)
            assert _tree.index(f).func is f
            assert _tree.has_block(f, "B")

    assert _run_threads(work, 8) == []


def _schedule_once(func: PrimFunc) -> PrimFunc:
    sch = Schedule(func, seed=0)
    c = sch.get_block("C")
    i, j, _k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 8])
    sch.reorder(io, jo, ii, ji)
    sch.cache_write(c, 0, "local")
    sch.parallel(sch.fuse(io, jo))
    return sch.func


def test_threads_driving_their_own_schedules_agree_with_a_serial_run(
    busy_switching: None,
) -> None:
    funcs = [matmul(16 * (1 + k % 3), 32, 16) for k in range(6)]
    want = [_schedule_once(f) for f in funcs]
    got: dict[int, list[PrimFunc]] = {}

    def work(k: int) -> None:
        got[k] = [_schedule_once(funcs[(k + r) % len(funcs)]) for r in range(4)]

    assert _run_threads(work, 6) == []
    for k, results in got.items():
        for r, func in enumerate(results):
            assert tc.ir.structural_equal(func, want[(k + r) % len(funcs)])


def test_each_schedule_uses_its_own_cache() -> None:
    sch = Schedule(two_stage(8))
    other = Schedule(two_stage(8))
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 2])
    assert len(sch.state.index_cache) > 0
    assert len(other.state.index_cache) == 0
    assert sch.copy().state.index_cache is not sch.state.index_cache


def test_an_entry_is_only_returned_for_its_own_function() -> None:
    cache = _tree.IndexCache(size=2)
    gc.freeze()  # collect only what the loop makes, not the whole worker's heap (36 full passes)
    try:
        for n in range(4, 40):
            f = _elementwise(n)
            idx = cache.get(f)
            assert idx.func is f
            assert cache.get(f) is idx
            del f, idx
            gc.collect()  # the id of a dead function may be reused by the next one
    finally:
        gc.unfreeze()
    assert len(cache) <= 2

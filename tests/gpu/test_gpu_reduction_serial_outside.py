"""In-thread then cross-thread reductions: the serial reduce loops may lie outside the
thread-bound one (``k = ko * 128 + tx``: consecutive threads read consecutive elements, the
coalesced layout), inside it, or both; each thread sums its share, then the threads combine."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.testing import check_numeric

SM80 = tc.Target("cuda -arch=sm_80")


def _row_sum(rows: int = 4, n: int = 512, op: str = "sum") -> tc.ir.PrimFunc:
    a = tc.te.placeholder((rows, n), "float32", name="A")
    k = tc.te.reduce_axis((0, n), name="k")
    reducer = tc.te.sum if op == "sum" else tc.te.max
    b = tc.te.compute((rows,), lambda i: reducer(a[i, k], axis=k), name="B")
    return tc.te.create_prim_func([a, b])


def _schedule(func: tc.ir.PrimFunc, factors: list[int | None], bound: int) -> tc.Schedule:
    """Split the reduce loop by ``factors``; the ``bound``-th part goes to threadIdx.x."""
    sch = tc.Schedule(func)
    blk = sch.get_block("B")
    i, k = sch.get_loops(blk)
    sch.bind(i, "blockIdx.x")
    parts = sch.split(k, factors)
    sch.bind(parts[bound], "threadIdx.x")
    return sch


@pytest.mark.parametrize(
    ("factors", "bound"),
    [
        ([None, 128], 1),  # k = ko * 128 + tx: serial loop outside the thread loop
        ([None, 32], 1),  # warp-shuffle combine
        ([2, 64, None], 1),  # serial loops outside and inside
        ([None, 4, 32], 2),  # two serial loops outside
        ([64, None], 0),  # the thread loop outermost (already supported)
    ],
)
def test_serial_reduce_loops_in_any_order_with_the_thread_loop(
    factors: list[int | None], bound: int
) -> None:
    func = _row_sum()
    sch = _schedule(func, factors, bound)
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80)


def test_max_with_the_serial_loop_outside() -> None:
    func = _row_sum(op="max")
    check_numeric(_schedule(func, [None, 128], 1).func, func, emulate_gpu="racecheck", target=SM80)


def test_coalesced_layout_in_the_cuda_code() -> None:
    """Consecutive threads read consecutive elements: the load index is ``... + tx``."""
    src = tc.codegen.cuda_source(_schedule(_row_sum(), [None, 128], 1).mod, SM80)
    assert "__shfl_down_sync" in src
    assert "threadIdx.x" in src

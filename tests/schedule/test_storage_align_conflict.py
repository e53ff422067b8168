"""storage_align: one layout per buffer axis (issue 10, 6h).

Two blocks writing one buffer (the init and update blocks after decompose_reduction) could
ask for different factor/offset on the same axis; both requests were accepted and the build
failed later in CollectStorageAlign with a LowerError. The second request is now rejected at
the primitive; a request that agrees, or one that replaces the block's own, is accepted.
"""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import PrimFunc
from tilecraft.schedule import BlockRV, Schedule
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip


def _reduce_then_scale() -> PrimFunc:
    A = tc.te.placeholder((8, 8, 4), "float32", name="A")
    k = tc.te.reduce_axis((0, 4), name="k")
    B = tc.te.compute((8, 8), lambda i, j: tc.te.sum(A[i, j, k], axis=k), name="B")
    C = tc.te.compute((8, 8), lambda i, j: B[i, j] * 2.0, name="C")
    return tc.te.create_prim_func([A, C])


def _two_writers() -> tuple[Schedule, BlockRV, BlockRV]:
    sch = Schedule(_reduce_then_scale())
    b = sch.get_block("B")
    init = sch.decompose_reduction(b, sch.get_loops(b)[2])
    return sch, init, b


def test_conflicting_request_on_another_block_is_rejected() -> None:
    sch, init, b = _two_writers()
    sch.storage_align(init, 0, 0, 16, 1)
    err = assert_fails_unchanged(
        sch, "storage_align", b, 0, 0, 16, 2, match='buffer "B" axis 0 is already aligned'
    )
    assert err.primitive == "storage_align"
    assert "B_init" in str(err)
    # what was accepted still builds and computes the same values
    check_numeric(sch.func, _reduce_then_scale())


def test_agreeing_requests_and_other_axes_are_accepted() -> None:
    sch, init, b = _two_writers()
    sch.storage_align(init, 0, 0, 16, 1)
    sch.storage_align(b, 0, 0, 16, 1)  # the same layout: fine
    sch.storage_align(b, 0, 1, 8, 3)  # another axis: fine
    check_numeric(sch.func, _reduce_then_scale())
    verify_trace_roundtrip(sch, _reduce_then_scale())


def test_a_block_replaces_its_own_request_unless_another_block_holds_it() -> None:
    sch = Schedule(_reduce_then_scale())
    b = sch.get_block("B")
    sch.storage_align(b, 0, 0, 16, 1)
    sch.storage_align(b, 0, 0, 32, 5)  # replaces the block's own request
    assert sch.get(b).annotations["buffer_dim_align"] == ((0, 0, 32, 5),)  # type: ignore[union-attr]
    init = sch.decompose_reduction(b, sch.get_loops(b)[2])
    sch.storage_align(init, 0, 0, 32, 5)
    with pytest.raises(ScheduleError, match=r'already aligned with factor 32, offset 5 .*"B_init"'):
        sch.storage_align(b, 0, 0, 16, 1)
    check_numeric(sch.func, _reduce_then_scale())

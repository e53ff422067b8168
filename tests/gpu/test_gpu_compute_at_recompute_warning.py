"""``compute_at`` of a global intermediate under a blockIdx loop: its region is relaxed over
blockIdx (one copy for the whole grid), so every block recomputes all of it — right, but R×
the work. The schedule warns, naming the buffer and the remedy."""

from __future__ import annotations

import warnings

import pytest

import tilecraft as tc


def _chain() -> tc.Schedule:
    a = tc.te.placeholder((256,), "float32", name="A")
    b = tc.te.compute((256,), lambda i: a[i] * 2.0, name="B")
    c = tc.te.compute((256,), lambda i: b[i] + 1.0, name="C")
    sch = tc.Schedule(tc.te.create_prim_func([a, c]))
    bx, tx = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def test_global_intermediate_under_blockidx_warns() -> None:
    sch = _chain()
    bx = sch.get_loops(sch.get_block("C"))[0]
    with pytest.warns(UserWarning, match=r"compute_at: every block .* buffer 'B'") as rec:
        sch.compute_at(sch.get_block("B"), bx)
    text = str(rec[0].message)
    assert "blockIdx.x" in text
    assert "4 blocks" in text
    assert "set_scope" in text
    assert "compute_inline" in text


@pytest.mark.parametrize("scope", ["shared", "local"])
def test_block_private_scopes_do_not_warn(scope: str) -> None:
    sch = _chain()
    blk = sch.get_block("B")
    sch.set_scope(blk, 0, scope)
    loops = sch.get_loops(sch.get_block("C"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sch.compute_at(blk, loops[0] if scope == "shared" else loops[1])

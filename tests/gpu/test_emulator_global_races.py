"""``emulate="racecheck"``: conflicts in global memory between threads of one launch.

Two threads of one launch that store one element, or one loading what another stores, are
ordered only by a barrier of their block (``__syncthreads`` orders global memory for the
block's threads too); threads of different blocks are never ordered within a launch.
"""

from __future__ import annotations

import numpy as np
import pytest
from emulator_schedules import GPU

import tilecraft as tc
from tilecraft.errors import RaceCheckError, RaceKind
from tilecraft.ir import Evaluate, IntImm, Mutator, PrimFunc, Stmt
from tilecraft.lower.gpu_nodes import ThreadSync

BARRIER = "T.evaluate(7)"


class _Barriers(Mutator):
    def visit_Evaluate(self, s: Evaluate) -> Stmt:
        value = s.value
        return ThreadSync() if isinstance(value, IntImm) and value.value == 7 else s


def lowered(body: str, blocks: int = 1, threads: int = 64) -> PrimFunc:
    """A kernel in lowered form; ``body`` runs under ``bx`` (blockIdx.x) and ``tx``."""
    lines = "\n".join("        " + ln for ln in body.strip().splitlines())
    text = f"""
@T.prim_func
def k(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({{"tc.lowered": True}})
    for bx in T.thread_binding({blocks}, thread="blockIdx.x"):
      for tx in T.thread_binding({threads}, thread="threadIdx.x"):
{lines}
"""
    func = tc.script.parse(text)
    return func.update(body=_Barriers().visit(func.body))


def run(func: PrimFunc, mode: object = "racecheck") -> list[np.ndarray]:
    args = [np.arange(64, dtype="float32") + 1, np.zeros(64, "float32")]
    tc.build(func, target=GPU, emulate=mode)[func.name](*args)
    return args


def test_two_threads_of_one_block_storing_one_element() -> None:
    with pytest.raises(RaceCheckError) as info:
        run(lowered("B[0] = A[tx]"))
    e = info.value
    assert (e.kind, e.buffer, e.index, e.block) == (RaceKind.CONFLICT, "B", 0, (0, 0, 0))
    assert e.threads == ((1, 0, 0), (0, 0, 0))
    assert "global-memory race" in str(e)
    assert "thread (1, 0, 0) of block (0, 0, 0) stores B[0]" in str(e)
    assert "thread (0, 0, 0) of block (0, 0, 0) stored it" in str(e)


def test_threads_of_two_blocks_storing_one_element() -> None:
    with pytest.raises(RaceCheckError) as info:
        run(lowered("B[tx] = A[tx] + T.Cast('float32', bx)", blocks=2))
    e = info.value
    assert (e.kind, e.buffer, e.index, e.block) == (RaceKind.CONFLICT, "B", 0, (1, 0, 0))
    assert "thread (0, 0, 0) of block (0, 0, 0) stored it" in str(e)
    assert "different blocks" in str(e)


def test_same_value_stored_by_two_threads_is_still_reported() -> None:
    with pytest.raises(RaceCheckError, match="same value"):
        run(lowered("B[0] = A[0]"))


def test_load_of_what_another_thread_stores_in_one_phase() -> None:
    with pytest.raises(RaceCheckError) as info:
        run(lowered("B[tx] = A[tx]\nA[tx] = B[(tx + 63) % 64]"))
    e = info.value
    assert (e.kind, e.buffer, e.index) == (RaceKind.CONFLICT, "B", 0)
    assert "thread (1, 0, 0) of block (0, 0, 0) loads B[0], where thread (0, 0, 0)" in str(e)


def test_store_of_what_another_thread_loaded_in_one_phase() -> None:
    with pytest.raises(RaceCheckError, match=r"stores A\[1\], where thread \(0, 0, 0\) of "
                       r"block \(0, 0, 0\) loaded it"):  # fmt: skip
        run(lowered("B[tx] = A[(tx + 1) % 64]\nA[tx] = T.float32(0)"))


def test_a_barrier_orders_the_threads_of_one_block() -> None:
    a, _ = run(lowered(f"B[tx] = A[tx]\n{BARRIER}\nA[tx] = B[63 - tx]"))
    np.testing.assert_array_equal(a, np.arange(64, 0, -1, dtype="float32"))


def test_a_barrier_does_not_order_two_blocks() -> None:
    body = f"B[tx] = A[tx] * T.Cast('float32', bx)\n{BARRIER}\nA[tx] = B[tx]"
    with pytest.raises(RaceCheckError, match="different blocks"):
        run(lowered(body, blocks=2, threads=64))


def test_every_thread_reading_one_input_is_clean() -> None:
    _, b = run(lowered("if bx == 0:\n    B[tx] = A[0] + A[tx]", blocks=4))
    np.testing.assert_array_equal(b, np.arange(64, dtype="float32") + 2)


def test_plain_emulation_does_not_check_global_memory() -> None:
    run(lowered("B[0] = A[tx]"), mode=True)

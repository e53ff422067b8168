"""Heap temporaries of CPU kernels come back from a pool of freed blocks.

A kernel whose intermediates are too large for the stack allocates them on each call. glibc
returns the top of its heap to the system once several megabytes are free, so every call
faulted the same pages in again (1024 minor faults a call for this chain, before the pool).
"""

from __future__ import annotations

import resource
import threading

import numpy as np

import tilecraft as tc

N = 1 << 20  # 4 MiB per intermediate: heap, not stack


def _chain() -> tc.ir.PrimFunc:
    a = tc.te.placeholder((N,), "float32", name="A")
    b = tc.te.compute((N,), lambda i: a[i] + 1.0, name="B")
    c = tc.te.compute((N,), lambda i: b[i] * 2.0, name="C")
    d = tc.te.compute((N,), lambda i: c[i] - b[N - 1 - i], name="D")
    e = tc.te.compute((N,), lambda i: d[i] + c[i], name="E")
    return tc.te.create_prim_func([a, e])


def _reference(x: np.ndarray) -> np.ndarray:
    b = x + np.float32(1.0)
    c = b * np.float32(2.0)
    return (c - b[::-1]) + c


def test_repeated_calls_reuse_their_temporaries() -> None:
    lib = tc.build(_chain(), target="cpu")
    assert "tc_release(" in lib.source
    # marked like malloc: without it gcc lost the block's no-alias and alignment facts and a
    # GEMM packing its weight into a pooled block ran 30% slower (64x5632x2048, K x N weight)
    assert "__attribute__((malloc, assume_aligned(64), noinline)) static void* tc_alloc(" in (
        lib.source
    )
    x = np.random.default_rng(0).random(N, dtype=np.float32)
    y = np.empty_like(x)
    lib["main"](x, y)  # the first call gets its blocks from the system
    faults = []
    for _ in range(4):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        lib["main"](x, y)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        np.testing.assert_array_equal(y, _reference(x))
    pages = 3 * N * 4 // 4096  # the three intermediates
    assert max(faults) < pages // 8, faults


def test_threads_calling_at_once_get_their_own_blocks() -> None:
    lib = tc.build(_chain(), target="cpu")
    rng = np.random.default_rng(1)
    xs = [rng.random(N, dtype=np.float32) for _ in range(4)]
    ys = [np.empty_like(x) for x in xs]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(5):
                lib["main"](xs[k], ys[k])
                np.testing.assert_array_equal(ys[k], _reference(xs[k]))
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []

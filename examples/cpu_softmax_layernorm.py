"""Hand-written CPU schedules for row softmax and layer_norm, built with ``tc.Schedule``.

Both operators are row reductions followed by an elementwise stage (``topi.softmax``: max,
exponentials, their sum, normalize; ``topi.layer_norm``: sum, sum of squared deviations,
normalize). The schedules:

- ``parallel`` the row loop of the last (elementwise) stage and ``compute_at`` every
  other stage under it, so one thread computes a whole row while it is in cache (softmax's
  exponentials become a row buffer, computed once, read by the sum and the result);
- turn each row reduction into a vector one: ``split`` the reduce loop by the SIMD width
  ``lanes``, ``rfactor`` the inner part into a ``lanes``-wide partial-result block (its lane
  loop is spatial, hence vectorizable) and fold the ``lanes`` partials afterwards;
  ``decompose_reduction`` hoists the partials' initialisation out of the loop;
- ``vectorize`` the lane loops and the elementwise stage (split by ``lanes``).

Lowering compacts the per-row intermediates to small local arrays. Run
``python examples/cpu_softmax_layernorm.py`` to check both and time them against numpy.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

import tilecraft as tc


def softmax_func(rows: int = 4096, cols: int = 1024) -> tc.ir.PrimFunc:
    """The unscheduled float32 softmax over the last axis of a ``(rows, cols)`` input."""
    x = tc.te.placeholder((rows, cols), "float32", name="X")
    return tc.te.create_prim_func([x, tc.topi.softmax(x)])


def layer_norm_func(rows: int = 4096, cols: int = 1024, eps: float = 1e-5) -> tc.ir.PrimFunc:
    """The unscheduled float32 layer_norm over the last axis, with ``gamma`` and ``beta``."""
    x = tc.te.placeholder((rows, cols), "float32", name="X")
    gamma = tc.te.placeholder((cols,), "float32", name="gamma")
    beta = tc.te.placeholder((cols,), "float32", name="beta")
    return tc.te.create_prim_func([x, gamma, beta, tc.topi.layer_norm(x, gamma, beta, eps=eps)])


def _vector_row_stage(
    sch: tc.Schedule, block: tc.schedule.BlockRV, row: tc.schedule.LoopRV, lanes: int
) -> None:
    """Compute ``block`` under ``row``: a row reduction with ``lanes``-wide partial results,
    an elementwise stage vectorized by ``lanes``."""
    if all(iv.kind is not tc.ir.IterKind.REDUCE for iv in sch.get(block).iter_vars):
        sch.compute_at(block, row)
        _, col_lanes = sch.split(sch.get_loops(block)[-1], factors=[None, lanes])
        sch.vectorize(col_lanes)
        return
    _, inner = sch.split(sch.get_loops(block)[-1], factors=[None, lanes])
    partial = sch.rfactor(inner, 1)
    sch.compute_at(block, row)
    sch.compute_at(partial, row)
    sch.decompose_reduction(partial, sch.get_loops(partial)[-2])
    sch.vectorize(sch.get_loops(partial)[-1])
    sch.vectorize(sch.get_loops(sch.get_block(f"{sch.get(partial).name}_init"))[-1])


def schedule_row_normalization(
    func: tc.ir.PrimFunc, stages: tuple[str, ...], output: str, *, lanes: int = 16
) -> tc.Schedule:
    """Schedule an operator made of row ``stages`` (producers first) and an ``output`` stage.

    Parameters
    ----------
    func
        The unscheduled operator with 2-D blocks.
    stages
        Names of the row reductions and intermediate elementwise blocks, in producer order.
    output
        Name of the elementwise block that consumes them.
    lanes
        SIMD width in elements (16 float32 for AVX-512); must divide the row length.

    Returns
    -------
    tc.Schedule
        The schedule; ``sch.mod`` is ready for ``tc.build``.
    """
    sch = tc.Schedule(func, seed=0)
    out = sch.get_block(output)
    row, col = sch.get_loops(out)
    _, col_lanes = sch.split(col, factors=[None, lanes])
    sch.vectorize(col_lanes)
    sch.parallel(row)
    # consumers first: each compute_at needs every consumer to sit under the row loop already
    for name in reversed(stages):
        _vector_row_stage(sch, sch.get_block(name), row, lanes)
    return sch


def schedule_softmax(func: tc.ir.PrimFunc, *, lanes: int = 16) -> tc.Schedule:
    """Schedule :func:`softmax_func` (``topi.softmax`` block names)."""
    stages = ("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum")
    return schedule_row_normalization(func, stages, "T_softmax_norm", lanes=lanes)


def schedule_layer_norm(func: tc.ir.PrimFunc, *, lanes: int = 16) -> tc.Schedule:
    """Schedule :func:`layer_norm_func` (``topi.layer_norm`` block names)."""
    stages = ("T_layer_norm_sum", "T_layer_norm_var")
    return schedule_row_normalization(func, stages, "T_layer_norm", lanes=lanes)


def softmax_ref(x: np.ndarray) -> np.ndarray:
    """numpy softmax over the last axis (max-subtracted)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]


def layer_norm_ref(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5
) -> np.ndarray:
    """numpy layer_norm over the last axis (biased variance)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta  # type: ignore[no-any-return]


def _median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(rows: int = 4096, cols: int = 1024) -> None:
    """Print the traces, check both schedules against numpy and time both."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    gamma = rng.standard_normal(cols, dtype=np.float32)
    beta = rng.standard_normal(cols, dtype=np.float32)
    y = np.empty_like(x)
    cases = [
        ("softmax", schedule_softmax(softmax_func(rows, cols)), (x,), lambda: softmax_ref(x)),
        (
            "layer_norm",
            schedule_layer_norm(layer_norm_func(rows, cols)),
            (x, gamma, beta),
            lambda: layer_norm_ref(x, gamma, beta),
        ),
    ]
    for name, sch, inputs, ref in cases:
        print(f"# {name}\n{sch.trace.as_python()}")
        lib = tc.build(sch.mod, target="cpu")
        lib["main"](*inputs, y)
        np.testing.assert_allclose(y, ref(), rtol=1e-4, atol=1e-5)
        ours = lib.time_evaluator("main", number=5, repeat=7)(*inputs, y).median
        theirs = _median_seconds(ref, 15)
        print(f"{name}: tilecraft {ours * 1e3:.3f} ms, numpy {theirs * 1e3:.3f} ms\n")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))

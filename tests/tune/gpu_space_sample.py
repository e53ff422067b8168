"""Candidates of the default GPU design space, as the search draws them, for the GPU space tests.

``python gpu_space_sample.py [SEEDS]`` prints, per workload, how many candidates were
generated, dropped by each postprocessor and found equal to the unscheduled function under
``emulate="racecheck"``.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from dataclasses import dataclass, field

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import PrimFunc
from tilecraft.schedule import Schedule
from tilecraft.testing import check_numeric
from tilecraft.tune.postproc import apply_postprocs, default_postprocs
from tilecraft.tune.space import default_space, resampled

SM90 = tc.Target("cuda -arch=sm_90")


def matmul(m: int, n: int, k: int) -> PrimFunc:
    """fp32 ``C = A @ B``."""
    a = tc.te.placeholder((m, k), "float32", name="A")
    b = tc.te.placeholder((k, n), "float32", name="B")
    return tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])


def gemv(m: int = 64, k: int = 96) -> PrimFunc:
    """fp32 ``y = A @ x``."""
    a = tc.te.placeholder((m, k), "float32", name="A")
    x = tc.te.placeholder((k,), "float32", name="x")
    r = tc.te.reduce_axis((0, k), name="k")
    y = tc.te.compute((m,), lambda i: tc.te.sum(a[i, r] * x[r], axis=r), name="y")
    return tc.te.create_prim_func([a, x, y])


def softmax(rows: int = 4, cols: int = 100) -> PrimFunc:
    """fp32 softmax over the rows of a matrix."""
    x = tc.te.placeholder((rows, cols), "float32", name="X")
    return tc.te.create_prim_func([x, tc.topi.softmax(x, axis=-1)])


WORKLOADS = {
    "gemm_64": lambda: matmul(64, 64, 64),
    "gemm_ragged": lambda: matmul(48, 80, 40),
    "gemv": gemv,
    "softmax": softmax,
}


@dataclass
class Sampled:
    """Candidates of one workload: counts and the candidates that passed the postprocessors,
    by the part of the default space they came from (``search`` or ``rules``)."""

    counts: Counter[str] = field(default_factory=Counter)
    kept: list[tuple[str, Schedule]] = field(default_factory=list)


def sample(func: PrimFunc, seeds: range) -> Sampled:
    """For each seed, every sketch of the default space and the sketch's trace replayed with
    new decisions (as the search draws candidates), through the default postprocessors."""
    out = Sampled()
    search, rules = default_space(SM90).spaces  # type: ignore[attr-defined]
    for seed in seeds:
        for part, space in (("search", search), ("rules", rules)):
            for i, sketch in enumerate(space.generate(func, SM90, seed)):
                for sch in _with_redraw(func, sketch, seed * 1000 + i + 1):
                    out.counts[f"{part}:generated"] += 1
                    dropped = apply_postprocs(sch, default_postprocs(SM90))
                    if dropped is not None:
                        out.counts[f"{part}:dropped:{dropped}"] += 1
                    else:
                        out.kept.append((part, sch))
    return out


def _with_redraw(func: PrimFunc, sketch: Schedule, seed: int) -> list[Schedule]:
    """The sketch and its trace replayed with every decision drawn anew (when that fits)."""
    out = [sketch]
    with contextlib.suppress(ScheduleError):  # a redraw that does not fit: the search redraws
        out.append(resampled(func, sketch.trace, seed))
    return out


def check_equal(func: PrimFunc, sampled: Sampled) -> None:
    """Each kept candidate equals ``func`` under emulation with race checking."""
    for part, sch in sampled.kept:
        check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM90)
        sampled.counts[f"{part}:racecheck_equal"] += 1


def main(seeds: int) -> None:
    """Print the counts of every workload."""
    for name, make in WORKLOADS.items():
        func = make()
        found = sample(func, range(seeds))
        check_equal(func, found)
        sys.stdout.write(f"{name}: {dict(sorted(found.counts.items()))}\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)

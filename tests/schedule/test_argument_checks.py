"""Every primitive and query rejects a bad argument with a ScheduleError naming it.

The table below calls each Schedule method with one wrong argument (a wrong type, a handle
of the wrong kind, a value out of range) and requires ``<primitive>: argument '<name>'`` in
the message, with the schedule unchanged. A coverage test keeps the table in step with the
registered instruction kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from compute_workloads import matmul

from tilecraft import ir
from tilecraft.errors import ScheduleError
from tilecraft.schedule import INSTRUCTION_KINDS, BlockRV, IndexMap, LoopRV, Schedule, Trace
from tilecraft.schedule.arguments import POSITIVE_INT, from_annotation
from tilecraft.testing import assert_fails_unchanged, verify_trace_roundtrip


@dataclass
class _H:
    """Handles of the matmul + relu workload: C (reduction, intermediate) and D."""

    sch: Schedule
    c: BlockRV
    d: BlockRV
    i: LoopRV
    k: LoopRV


def _handles() -> _H:
    sch = Schedule(matmul(8, relu=True), seed=0)
    c = sch.get_block("C")
    i, _, k = sch.get_loops(c)
    return _H(sch, c, sch.get_block("D"), i, k)


def _transpose(i: Any, j: Any) -> tuple[Any, Any]:
    return (j, i)


def _branching(i: Any, j: Any) -> Any:
    return i if i > 0 else j  # Expr.__bool__ raises TypeError


def _half(i: Any, j: Any) -> tuple[Any, Any]:
    return (i * 0.5, j)  # a float index


_N = ir.Var("n", "int32")
_I = ir.Var("i", "int32")
_FLOAT_MAP = IndexMap((_I,), (ir.FloatImm("float32", 1.5),))


def _free_var(i: Any, j: Any) -> tuple[Any, Any]:
    return (i + _N, j)  # a variable that is not a parameter of the map


Row = tuple[str, str, Callable[[_H], tuple[tuple[Any, ...], dict[str, Any]]]]


def _a(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return args, kwargs


# (method, argument named in the error, arguments built from the handles)
TABLE: list[Row] = [
    ("get_block", "name", lambda h: _a(5)),
    ("get_loops", "block", lambda h: _a(h.i)),
    ("get_child_blocks", "block_or_loop", lambda h: _a(5)),
    ("get_producers", "block", lambda h: _a("C")),
    ("get_consumers", "block", lambda h: _a(None)),
    ("split", "factors", lambda h: _a(h.i, 5)),
    ("split", "factors", lambda h: _a(h.i, [None, 4.0])),
    ("split", "factors", lambda h: _a(h.i, [None, True])),
    ("split", "factors", lambda h: _a(h.i, [None, -2])),
    ("split", "factors", lambda h: _a(h.i, "ab")),
    ("split", "loop", lambda h: _a(h.c, [None, 4])),
    ("split", "preserve_unit_iters", lambda h: _a(h.i, [None, 4], preserve_unit_iters=1)),
    ("fuse", "loops", lambda h: _a(h.i, h.c)),
    ("fuse", "preserve_unit_iters", lambda h: _a(h.i, preserve_unit_iters="no")),
    ("reorder", "loops", lambda h: _a(h.i, 3)),
    ("add_unit_loop", "block_or_loop", lambda h: _a("C")),
    ("parallel", "loop", lambda h: _a(h.c)),
    ("vectorize", "loop", lambda h: _a(None)),
    ("unroll", "loop", lambda h: _a(LoopRV.root())),
    ("bind", "thread", lambda h: _a(h.i, "warp.x")),
    ("bind", "thread", lambda h: _a(h.i, 3)),
    ("bind", "loop", lambda h: _a(h.d, "threadIdx.x")),
    ("annotate", "key", lambda h: _a(h.c, "", 1)),
    ("annotate", "key", lambda h: _a(h.c, 7, 1)),
    ("annotate", "value", lambda h: _a(h.c, "k", {"a": 1})),
    ("annotate", "value", lambda h: _a(h.c, "k", float("nan"))),
    ("annotate", "value", lambda h: _a(h.c, "k", 10**30)),
    ("annotate", "block_or_loop", lambda h: _a(0, "k", 1)),
    ("unannotate", "key", lambda h: _a(h.c, 5)),
    ("unannotate", "block_or_loop", lambda h: _a("C", "k")),
    ("compute_at", "block", lambda h: _a(h.i, h.i)),
    ("compute_at", "loop", lambda h: _a(h.c, h.d)),
    ("compute_at", "preserve_unit_loops", lambda h: _a(h.c, h.i, preserve_unit_loops="yes")),
    ("compute_at", "index", lambda h: _a(h.c, h.i, index=1.5)),
    ("reverse_compute_at", "loop", lambda h: _a(h.d, "i")),
    ("reverse_compute_at", "block", lambda h: _a([h.d], h.i)),
    ("compute_inline", "block", lambda h: _a(h.i)),
    ("reverse_compute_inline", "block", lambda h: _a(None)),
    ("cache_read", "read_buffer_index", lambda h: _a(h.c, "0", "local")),
    ("cache_read", "storage_scope", lambda h: _a(h.c, 0, "register")),
    ("cache_read", "consumer_blocks", lambda h: _a(h.c, 0, "local", consumer_blocks=h.c)),
    ("cache_read", "consumer_blocks", lambda h: _a(h.c, 0, "local", consumer_blocks=[h.i])),
    ("cache_write", "write_buffer_index", lambda h: _a(h.c, True, "local")),
    ("cache_write", "storage_scope", lambda h: _a(h.c, 0, None)),
    ("set_scope", "storage_scope", lambda h: _a(h.c, 0, "texture")),
    ("set_scope", "buffer_index", lambda h: _a(h.c, None, "local")),
    ("storage_align", "factor", lambda h: _a(h.c, 0, 0, 0, 0)),
    ("storage_align", "offset", lambda h: _a(h.c, 0, 0, 8, -1)),
    ("storage_align", "axis", lambda h: _a(h.c, 0, "x", 8, 1)),
    ("storage_swizzle", "buffer_index", lambda h: _a(h.c, "0")),
    ("storage_swizzle", "block", lambda h: _a(h.i, 0)),
    ("transform_layout", "buffer", lambda h: _a(h.c, "write", _transpose)),
    ("transform_layout", "buffer", lambda h: _a(h.c, ("both", 0), _transpose)),
    ("transform_layout", "index_map", lambda h: _a(h.c, ("write", 0), 5)),
    ("transform_layout", "index_map", lambda h: _a(h.c, ("write", 0), _branching)),
    ("transform_layout", "index_map", lambda h: _a(h.c, ("write", 0), lambda *a: a)),
    ("transform_layout", "index_map", lambda h: _a(h.c, ("write", 0), _half)),
    ("transform_layout", "index_map", lambda h: _a(h.c, ("write", 0), _free_var)),
    ("transform_layout", "index_map", lambda h: _a(h.c, ("write", 0), _FLOAT_MAP)),
    ("reindex", "buffer", lambda h: _a(h.c, ("read", "0"))),
    ("rfactor", "factor_axis", lambda h: _a(h.k, factor_axis=None)),
    ("rfactor", "loop", lambda h: _a(h.c)),
    ("decompose_reduction", "loop", lambda h: _a(h.c, None)),
    ("decompose_reduction", "block", lambda h: _a(h.k, h.k)),
    ("sample_perfect_tile", "n", lambda h: _a(h.i, 0)),
    ("sample_perfect_tile", "max_innermost_factor", lambda h: _a(h.i, 2, "4")),
    ("sample_perfect_tile", "decision", lambda h: _a(h.i, 2, decision=4)),
    ("sample_perfect_tile", "loop", lambda h: _a(h.c, 2)),
    ("sample_categorical", "candidates", lambda h: _a([], [])),
    ("sample_categorical", "candidates", lambda h: _a([1, "2"], [1, 1])),
    ("sample_categorical", "probs", lambda h: _a([1, 2], [0.5, float("inf")])),
    ("sample_categorical", "probs", lambda h: _a([1, 2], [0.5, -1.0])),
    ("sample_categorical", "decision", lambda h: _a([1, 2], [1, 1], decision="0")),
    ("sample_compute_location", "block", lambda h: _a(h.i)),
    ("sample_compute_location", "decision", lambda h: _a(h.c, decision=1.0)),
    ("get_output_blocks", "scope_block", lambda h: _a(h.i)),
    ("transform_block_layout", "block", lambda h: _a(h.k, _transpose)),
    ("transform_block_layout", "index_map", lambda h: _a(h.c, 5)),
    ("pad_einsum", "padding", lambda h: _a(h.c, [16, 0, 16])),
    ("pad_einsum", "padding", lambda h: _a(h.c, 16)),
    ("pad_einsum", "block", lambda h: _a(h.i, [16, 16, 16])),
    ("decompose_padding", "loop", lambda h: _a(h.d, h.c)),
    ("decompose_padding", "block", lambda h: _a(h.i, h.i)),
    ("blockize", "loop", lambda h: _a(h.c)),
    ("tensorize", "block_or_loop", lambda h: _a("C", "mma_m16n8k16_f16f16f32")),
    ("tensorize", "intrin", lambda h: _a(h.c, "no_such_intrinsic")),
    ("tensorize", "intrin", lambda h: _a(h.i, 5)),
    ("guard", "block", lambda h: _a(h.i, [h.i], lambda i: (i, 0))),
    ("guard", "loops", lambda h: _a(h.d, h.i, lambda i: (i, 0))),
    ("guard", "bound", lambda h: _a(h.d, [h.i], 5)),
]


@pytest.mark.parametrize(
    ("method", "argument", "build"),
    TABLE,
    ids=[f"{m}-{a}-{k}" for k, (m, a, _) in enumerate(TABLE)],
)
def test_bad_argument_is_a_schedule_error(method: str, argument: str, build: Any) -> None:
    h = _handles()
    args, kwargs = build(h)
    n_before = len(h.sch.trace)
    err = assert_fails_unchanged(
        h.sch, method, *args, match=f"{method}: argument '{argument}'", **kwargs
    )
    assert err.primitive == method
    assert len(h.sch.trace) == n_before


def test_table_covers_every_registered_primitive() -> None:
    covered = {method for method, _, _ in TABLE}
    without_arguments = {"enter_postproc"}
    assert set(INSTRUCTION_KINDS) - without_arguments <= covered
    for kind in INSTRUCTION_KINDS.values():
        assert [name for name, _, _ in kind.checks] == [name for name, _, _ in kind.params]


def test_exact_message_for_split_factors() -> None:
    h = _handles()
    with pytest.raises(ScheduleError) as info:
        h.sch.split(h.i, factors=5)  # type: ignore[arg-type]
    assert str(info.value) == (
        "split: argument 'factors': expected a sequence of positive int or None, got 5"
    )


def test_state_level_call_with_bad_arity_is_a_schedule_error() -> None:
    from tilecraft.schedule.primitives import loop, query

    h = _handles()
    with pytest.raises(ScheduleError, match="split: bad arguments"):
        loop.split(h.sch.state)
    with pytest.raises(ScheduleError, match="enter_postproc: bad arguments"):
        query.enter_postproc(h.sch.state, 1)


def test_numpy_ints_are_accepted_and_recorded_as_ints() -> None:
    before = matmul(8)
    sch = Schedule(before)
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.split(i, factors=[None, np.int64(4)])
    factors = sch.trace[-1].inputs[1]
    assert factors == (None, 4)
    assert type(factors[1]) is int
    verify_trace_roundtrip(sch, before)


def test_sampled_values_stay_handles_in_the_trace() -> None:
    before = matmul(8)
    sch = Schedule(before, seed=0)
    i = sch.get_loops(sch.get_block("C"))[0]
    v = sch.sample_perfect_tile(i, n=2, decision=[2, 4])
    sch.split(i, factors=v)
    assert "factors=[v4, v5]" in sch.trace.as_python()
    assert Trace.from_json(sch.trace.as_json()).as_python() == sch.trace.as_python()


def test_schedule_level_arguments() -> None:
    func = matmul(8)
    with pytest.raises(ScheduleError, match="argument 'seed'"):
        Schedule(func, seed="x")  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="argument 'func_name'"):
        Schedule(func, func_name=3)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="expected a PrimFunc"):
        Schedule(5)  # type: ignore[arg-type]
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match="seed: argument 'seed'"):
        sch.seed(1.5)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="try_: argument 'fn'"):
        sch.try_(5)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="get: argument 'rv'"):
        sch.get("C")  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="get: argument 'rv'"):
        sch.get(True)
    assert sch.state.primitive == "schedule"  # a failed get leaves no primitive name behind


def test_unknown_annotation_is_a_registration_error() -> None:
    with pytest.raises(TypeError, match="no argument check"):
        from_annotation(set[int])


def test_registered_checks_reject_what_the_primitive_would() -> None:
    """The checks are plain objects: usable by rules before calling a primitive."""
    kind = INSTRUCTION_KINDS["bind"]
    check = {n: c for n, c, _ in kind.checks}["thread"]
    assert check("threadIdx.x") == "threadIdx.x"
    assert "one of" in check.expected
    assert POSITIVE_INT(3) == 3


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((5,), "expected a callable"),
        ((lambda i: (i,), "2"), "ndim must be"),
        ((lambda *a: a,), r"\*args"),
        ((max,), "cannot read the parameters"),
        ((lambda i: ("x",),), "calling it on index variables failed"),
        ((lambda i: (i + _N,),), "not its parameters"),
    ],
)
def test_index_map_from_func_rejects_non_maps(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        IndexMap.from_func(*args)

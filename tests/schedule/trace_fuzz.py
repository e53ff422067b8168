"""Seeded loader fuzzing of trace JSON (not a test module; used by test_trace_fuzz.py).

Valid traces of several workloads are mutated (fields deleted, duplicated or retyped,
instructions duplicated, dropped or swapped, deep nesting, huge ints, NaN/inf, handles of
the wrong kind, malformed index maps, truncated text ...). Each case is loaded with
``Trace.from_json``; a loaded trace must print (``as_python``) and its replay onto a fresh
schedule of the workload must either succeed or raise ScheduleError / TraceFormatError.
Anything else is a *raw* outcome, a bug.

Run directly to count outcomes (works on any checkout, for before/after figures)::

    PYTHONPATH=<checkout> python tests/schedule/trace_fuzz.py 2000 [seed]
"""

from __future__ import annotations

import copy
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import PrimFunc
from tilecraft.schedule import Schedule, Trace, TraceFormatError

te, topi = tc.te, tc.topi


# ------------------------------------------------------------------------------------------
# workloads and the valid traces the mutations start from
def _matmul() -> PrimFunc:
    a = te.placeholder((16, 16), "float32", name="A")
    b = te.placeholder((16, 16), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _two_stage() -> PrimFunc:
    a = te.placeholder((16, 8), "float32", name="A")
    b = te.compute((16, 8), lambda i, j: a[i, j] + 1.0, name="B")
    c = te.compute((16, 8), lambda i, j: b[i, j] * 2.0, name="C")
    return te.create_prim_func([a, c])


def _softmax() -> PrimFunc:
    """The three-stage softmax the recorded traces (traces_v1.json) were made on: max, sum of
    exponentials, and a result computing each exponential again (topi.softmax now has an exp
    stage of its own, so it is a different workload)."""
    from tilecraft.ir import op as irop
    from tilecraft.topi.nn import _kept, _reduce_stage

    x = te.placeholder((4, 16), "float32", name="x")
    mx = _reduce_stage(x, [1], lambda v, _: v, te.max, "T_softmax_maxelem")
    es = _reduce_stage(x, [1], lambda v, idx: irop.exp(v - mx[idx]), te.sum, "T_softmax_expsum")

    def norm(*idx):  # type: ignore[no-untyped-def]
        kept = _kept(x, [1], idx)
        return irop.exp(x[idx] - mx[kept]) / es[kept]

    return te.create_prim_func([x, te.compute(x.shape, norm, name="T_softmax_norm")])


def _row_sum() -> PrimFunc:
    x = te.placeholder((8, 32), "float32", name="x")
    k = te.reduce_axis((0, 32), name="k")
    s = te.compute((8,), lambda i: te.sum(x[i, k], axis=k), name="S")
    return te.create_prim_func([x, s])


def _try(sch: Schedule, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return sch.try_(fn, *args, **kwargs).value_or(None)


def _matmul_trace(sch: Schedule) -> None:
    c = sch.get_block(_block_names(sch)[0])
    i, j, k = sch.get_loops(c)
    vi = sch.sample_perfect_tile(i, n=2, max_innermost_factor=8)
    vj = sch.sample_perfect_tile(j, n=2, max_innermost_factor=8)
    io, ii = sch.split(i, factors=vi)
    jo, ji = sch.split(j, factors=vj)
    sch.reorder(io, jo, k, ii, ji)
    cache = _try(sch, sch.cache_read, c, 0, "shared")
    if cache is not None:
        _try(sch, sch.compute_at, cache, jo)
    _try(sch, sch.decompose_reduction, c, k)
    sch.parallel(io)
    _try(sch, sch.vectorize, ji)
    sch.annotate(c, "pragma_unroll", 4)
    if hasattr(sch, "enter_postproc"):
        sch.enter_postproc()
    sch.unroll(ii)


def _two_stage_trace(sch: Schedule) -> None:
    b, c = sch.get_block("B"), sch.get_block("C")
    sch.transform_layout(b, ("write", 0), lambda i, j: (j, i // 4, i % 4))
    _try(sch, sch.storage_align, b, 0, 0, 8, 1)
    _try(sch, sch.set_scope, b, 0, "local")
    loc = sch.sample_compute_location(b)
    _try(sch, sch.compute_at, b, loc)
    loops = sch.get_loops(c)
    fused = sch.fuse(*loops)
    sch.split(fused, factors=[None, 16])
    sch.add_unit_loop(c)


def _softmax_trace(sch: Schedule) -> None:
    names = _block_names(sch)
    last = sch.get_block(names[-1])
    for name in names[:-1]:
        blk = sch.get_block(name)
        sch.get_consumers(blk)
        _try(sch, sch.compute_inline, blk)
    _try(sch, sch.cache_write, last, 0, "local")
    v = sch.sample_categorical([1, 2, 4], [0.5, 0.25, 0.25])
    loops = sch.get_loops(last)
    _try(sch, sch.split, loops[-1], [None, v])
    sch.annotate(last, "meta", [1, 2])
    sch.unannotate(last, "meta")


def _row_sum_trace(sch: Schedule) -> None:
    s = sch.get_block("S")
    i, k = sch.get_loops(s)
    _ko, ki = sch.split(k, factors=[None, 8])
    rf = _try(sch, sch.rfactor, ki, 0)
    if rf is not None:
        sch.get_producers(s)
        _try(sch, sch.reverse_compute_at, s, i)
    _try(sch, sch.reindex, s, ("write", 0))
    sch.bind(i, "blockIdx.x")


def _block_names(sch: Schedule) -> list[str]:
    root = sch.get_block("root")
    return [sch.get(b).name for b in sch.get_child_blocks(root)]  # type: ignore[union-attr]


WORKLOADS: dict[str, tuple[Callable[[], PrimFunc], Callable[[Schedule], None]]] = {
    "matmul": (_matmul, _matmul_trace),
    "two_stage": (_two_stage, _two_stage_trace),
    "softmax": (_softmax, _softmax_trace),
    "row_sum": (_row_sum, _row_sum_trace),
}


def valid_traces() -> dict[str, str]:
    """The JSON trace of each workload's schedule (seeded)."""
    out = {}
    for name, (make, build) in WORKLOADS.items():
        sch = Schedule(make(), seed=7)
        build(sch)
        out[name] = sch.trace.as_json()
    return out


# ------------------------------------------------------------------------------------------
# mutations of the parsed JSON (each returns new JSON text)
_ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 7, 2**31, 2**63, -(2**63) - 1, 10**30, 1.5, -0.0,
    float("nan"), float("inf"), "", "x", "global", "read", [], {}, [None, 4], [0, None],
    {"rv": "b0"}, {"rv": "l1"}, {"rv": "v9999"}, {"rv": 3}, {"dict": {"a": 1}},
    {"index_map": {"vars": ["i"], "exprs": [{"var": 0}]}}, ["FloorDiv", {"var": 0}, 0],
]  # fmt: skip


def _nodes(data: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """Every ``(path, value)`` in ``data`` (iterative: mutated data may be very deep)."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        out.append((path, value))
        if isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, k), v) for k, v in enumerate(value))
    return out


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return data


def _pick(rng: random.Random, data: Any) -> tuple[tuple[Any, ...], Any]:
    return rng.choice(_nodes(data))


def _nested(rng: random.Random, depth: int) -> Any:
    value: Any = rng.choice([0, "x", None])
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"rv": value}
    return value


def _retype(rng: random.Random, data: Any) -> Any:
    path, _ = _pick(rng, data)
    return _set(data, path, copy.deepcopy(rng.choice(_ODD_VALUES)))


def _delete_key(rng: random.Random, data: Any) -> Any:
    dicts = [v for _, v in _nodes(data) if isinstance(v, dict) and v]
    if not dicts:
        return _retype(rng, data)
    d = rng.choice(dicts)
    del d[rng.choice(list(d))]
    return data


def _add_key(rng: random.Random, data: Any) -> Any:
    dicts = [v for _, v in _nodes(data) if isinstance(v, dict)]
    if not dicts:
        return _retype(rng, data)
    rng.choice(dicts)[rng.choice(["extra", "rv", "kind", "decision"])] = rng.choice(_ODD_VALUES)
    return data


def _list_edit(rng: random.Random, data: Any) -> Any:
    lists = [v for _, v in _nodes(data) if isinstance(v, list) and v]
    if not lists:
        return _retype(rng, data)
    seq = rng.choice(lists)
    k = rng.randrange(len(seq))
    op = rng.choice(["dup", "drop", "swap", "append"])
    if op == "dup":
        seq.insert(rng.randrange(len(seq) + 1), copy.deepcopy(seq[k]))
    elif op == "drop":
        del seq[k]
    elif op == "swap":
        j = rng.randrange(len(seq))
        seq[k], seq[j] = seq[j], seq[k]
    else:
        seq.append(copy.deepcopy(rng.choice(_ODD_VALUES)))
    return data


def _deep(rng: random.Random, data: Any) -> Any:
    path, _ = _pick(rng, data)
    return _set(data, path, _nested(rng, rng.choice([70, 300, 3000])))


def _handle_kind(rng: random.Random, data: Any) -> Any:
    refs = [(p, v) for p, v in _nodes(data) if isinstance(v, dict) and set(v) == {"rv"}]
    outs = [(p, v) for p, v in _nodes(data) if len(p) >= 2 and p[-2] == "outputs"]
    choices = refs + outs
    if not choices:
        return _retype(rng, data)
    path, value = rng.choice(choices)
    name = value.get("rv") if isinstance(value, dict) else value
    if not isinstance(name, str) or not name:
        return data
    new = rng.choice("blv") + name[1:]
    return _set(data, path, {"rv": new} if isinstance(value, dict) else new)


def _kind_swap(rng: random.Random, data: Any) -> Any:
    insts = data.get("insts") if isinstance(data, dict) else None
    if not isinstance(insts, list) or not insts:
        return _retype(rng, data)
    inst = rng.choice(insts)
    if isinstance(inst, dict):
        inst["kind"] = rng.choice(_KINDS)
    return data


def _index_map(rng: random.Random, data: Any) -> Any:
    maps = [
        v for _, v in _nodes(data) if isinstance(v, dict) and isinstance(v.get("index_map"), dict)
    ]
    if not maps:
        return _retype(rng, data)
    imap = rng.choice(maps)["index_map"]
    bad: list[Any] = [
        {"vars": ["i", "j"], "exprs": [{"var": 5}]},
        {"vars": ["i", "i"], "exprs": [{"var": 0}, {"var": 1}]},
        {"vars": ["i", "j"], "exprs": [["FloorDiv", {"var": 0}, 0], {"var": 1}]},
        {"vars": ["i", "j"], "exprs": [["FloorMod", {"var": 0}, 0], {"var": 1}]},
        {"vars": ["i", "j"], "exprs": [["Pow", {"var": 0}, 2], {"var": 1}]},
        {"vars": ["i", "j"], "exprs": [2**40, {"var": 1}]},
        {"vars": ["i", "j"], "exprs": []},
        {"vars": ["1x", "j"], "exprs": [{"var": 0}, {"var": 1}]},
        {"vars": ["i", "j"], "exprs": [["Sub", 0, {"var": 0}], {"var": 1}]},
        {"vars": ["i", "j"], "exprs": [["Mul", {"var": 0}, 2**30], {"var": 1}]},
        {"vars": ["i", "j"], "exprs": [{"var": 1}, {"var": 0}, {"var": 0}]},
        {"vars": ["i"], "exprs": [{"var": 0}]},
        {"vars": ["i", "j"], "exprs": [["Max", {"var": 0}, 3], ["Min", {"var": 1}, 2]]},
    ]
    imap.clear()
    imap.update(copy.deepcopy(rng.choice(bad)))
    return data


def _nudge(rng: random.Random, data: Any) -> Any:
    """Replace a leaf by another of the same type: an int, a string, a same-kind handle."""
    leaves = [
        (p, v)
        for p, v in _nodes(data)
        if (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, str) and p and p[-1] not in ("kind", "format"))
    ]
    if not leaves:
        return _retype(rng, data)
    path, value = rng.choice(leaves)
    if isinstance(value, int):
        new: Any = rng.choice([-2, -1, 0, 1, 2, 3, 4, 5, 8, 16, 33, 2**31 - 1])
    elif path[-1] == "rv" and value[1:].isdigit():
        new = value[0] + str(rng.randrange(int(value[1:]) + 1))
    else:
        new = rng.choice(["local", "shared", "global", "read", "write", "B", "C", "root", "k"])
    return _set(data, path, new)


MUTATIONS: list[Callable[[random.Random, Any], Any]] = [
    _retype, _retype, _delete_key, _add_key, _list_edit, _list_edit, _deep, _handle_kind,
    _kind_swap, _index_map, _nudge, _nudge, _nudge, _nudge,
]  # fmt: skip
_KINDS = [
    "split", "fuse", "reorder", "get_block", "get_loops", "compute_at", "cache_read",
    "sample_perfect_tile", "sample_categorical", "sample_compute_location", "transform_layout",
    "annotate", "storage_align", "rfactor", "enter_postproc", "no_such_kind",
]  # fmt: skip


def _text_mutation(rng: random.Random, text: str) -> str:
    op = rng.choice(["truncate", "flip", "bigint", "nan"])
    if op == "truncate":
        return text[: rng.randrange(len(text))]
    if op == "flip":
        k = rng.randrange(len(text))
        return text[:k] + rng.choice('{}[]",:0-9aN\\') + text[k + 1 :]
    if op == "bigint":
        digits = "9" * rng.choice([25, 5000])
        return text.replace("16", digits, 1) if "16" in text else digits
    return text.replace("null", rng.choice(["NaN", "Infinity", "-Infinity"]), 1)


def cases(seed: int, n: int) -> Iterator[tuple[str, str]]:
    """``n`` seeded ``(workload, mutated JSON text)`` cases."""
    rng = random.Random(seed)
    valid = valid_traces()
    names = sorted(valid)
    for _ in range(n):
        name = rng.choice(names)
        text = valid[name]
        if rng.random() < 0.15:
            yield name, _text_mutation(rng, text)
            continue
        data = json.loads(text)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            mutation = rng.choice(MUTATIONS)
            data = mutation(rng, data)
            if mutation is _deep:  # last: other mutations recurse (deepcopy) into values
                break
        try:
            yield name, json.dumps(data)
        except (ValueError, RecursionError):  # too deep for json.dumps itself
            yield name, "[" * 100_000


# ------------------------------------------------------------------------------------------
# running a case
def run_case(workload: str, text: str) -> str:
    """The outcome of one case: ``rejected``, ``replayed``, ``failed`` (a ScheduleError /
    TraceFormatError during replay) or ``raw <where> <ExceptionType>``."""
    try:
        trace = Trace.from_json(text)
    except TraceFormatError:
        return "rejected"
    except Exception as e:  # noqa: BLE001 - counting what escapes is the point
        return f"raw load {type(e).__name__}"
    try:
        trace.as_python()
    except Exception as e:  # noqa: BLE001
        return f"raw print {type(e).__name__}"
    sch = Schedule(WORKLOADS[workload][0](), seed=0)
    try:
        trace.apply_to_schedule(sch)
    except (ScheduleError, TraceFormatError):
        return "failed"
    except Exception as e:  # noqa: BLE001
        return f"raw replay {type(e).__name__}"
    return "replayed"


def run(seed: int, n: int, deadline_s: float | None = None) -> Counter[str]:
    """Outcome counts of ``n`` cases (stops early at ``deadline_s`` seconds)."""
    counts: Counter[str] = Counter()
    start = time.monotonic()
    limit = sys.getrecursionlimit()
    for workload, text in cases(seed, n):
        counts[run_case(workload, text)] += 1
        sys.setrecursionlimit(limit)
        if deadline_s is not None and time.monotonic() - start > deadline_s:
            break
    return counts


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    t0 = time.monotonic()
    result = run(seed, n)
    raw = sum(v for k, v in result.items() if k.startswith("raw"))
    print(f"{sum(result.values())} cases in {time.monotonic() - t0:.1f}s, {raw} raw")  # noqa: T201
    for key, value in sorted(result.items()):
        print(f"  {key}: {value}")  # noqa: T201

"""Warm-starting a cost model from a database, and transfer between tasks of one kind.

Features describe a program, not a task, so what a model learned on one matmul carries over
to a matmul of another shape. :func:`task_kind` names a function's kind from its blocks
(iterator kinds and the operations they compute, not the shapes); :func:`warm_start` feeds a
model the records of every workload of a database whose kind matches.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...errors import ScheduleError, TilecraftError
from ...ir import Block, BufferLoad, Expr, IntImm, PrimFunc, Var, post_order_visit
from ...ir.visitor import iter_children
from ...schedule import Schedule, TraceFormatError
from ...target import Target, as_target
from ..database.base import Database
from ..database.workload import TuningRecord
from ..features import PerStoreFeature
from .base import CostModel

_LEAVES = (Var, IntImm, BufferLoad)


def _ops(node: Expr) -> Iterator[str]:
    stack: list[object] = [node]
    while stack:
        e = stack.pop()
        if isinstance(e, Expr) and not isinstance(e, _LEAVES):
            yield type(e).__name__
        if isinstance(e, Expr):
            stack.extend(iter_children(e))


def task_kind(func: PrimFunc) -> str:
    """The kind of ``func``: per block, its iterator kinds, reads and operations (no shapes)."""
    parts: list[str] = []

    def visit(node: object) -> None:
        if not isinstance(node, Block) or not node.iter_vars:
            return
        kinds = "".join(iv.kind.name[0] for iv in node.iter_vars)
        ops: set[str] = set()
        post_order_visit(node.body, lambda n: ops.update(_ops(n)) if isinstance(n, Expr) else None)
        parts.append(f"{kinds}:{len(node.reads)}:{','.join(sorted(ops))}")

    post_order_visit(func.body, visit)
    return ";".join(parts)


def _kind_of(target: str) -> str | None:
    try:
        return as_target(target).kind
    except TilecraftError:
        return None


def _replayed(record: TuningRecord) -> PrimFunc | None:
    sch = Schedule(record.workload.func)
    try:
        record.trace.apply_to_schedule(sch)
    except (ScheduleError, TraceFormatError):
        return None  # a record of an older space: skipped
    return sch.func


def _grouped(
    database: Database, target: Target, kind: str | None, limit: int
) -> dict[str, list[TuningRecord]]:
    """The database's records for ``target``'s kind, by workload, of task kind ``kind``."""
    by_workload: dict[str, list[TuningRecord]] = {}
    kinds: dict[str, str] = {}
    for rec in database.get_all_tuning_records():
        if _kind_of(rec.target) != target.kind:
            continue
        group = rec.workload.key.id
        if kind is not None:
            if group not in kinds:
                kinds[group] = task_kind(rec.workload.func)
            if kinds[group] != kind:
                continue
        recs = by_workload.setdefault(group, [])
        if len(recs) < limit:
            recs.append(rec)
    return by_workload


def warm_start(
    model: CostModel,
    database: Database,
    target: Target | str | None = None,
    *,
    kind: str | None = None,
    max_per_workload: int = 256,
) -> int:
    """Train ``model`` on ``database``'s records for ``target``; returns how many it learned.

    Parameters
    ----------
    model
        The model to update (one group per workload).
    database
        Where the records are.
    target
        Records of other kinds of target are left out (default: the current target, else
        the CPU).
    kind
        Only workloads whose :func:`task_kind` is this (default: every workload).
    max_per_workload
        At most this many records per workload (the first ones committed).
    """
    tgt = as_target(target)
    extractor = PerStoreFeature(tgt)
    learned = 0
    for group, recs in _grouped(database, tgt, kind, max_per_workload).items():
        feats, secs = [], []
        for rec in recs:
            func = _replayed(rec)
            if func is None:
                continue
            feats.append(extractor.extract_one(func))
            secs.append(rec.mean_secs if rec.ok else None)
        if feats:
            model.update(group, feats, secs)
            learned += len(feats)
    return learned

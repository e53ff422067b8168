"""Software pipelining: overlap the loads of iteration ``k + S - 1`` with the compute of ``k``.

Before: blocks lowered to loops, shared buffers compacted to their tiles, not flattened. A
serial loop annotated (``Schedule.annotate``)

- ``software_pipeline_stage = [s0, s1, ...]``: one stage per statement of the loop body (the
  body is ``Allocate``s of per-iteration buffers around a sequence of statements); stages are
  0 (producers: they fill buffers) or ``S - 1`` (consumers), ``S >= 2``;
- ``software_pipeline_order = [p0, p1, ...]`` (optional): the position of each statement in
  the pipelined body (a permutation; default: program order)

runs statement ``i`` of iteration ``k`` at step ``k + stage_i``.

After:  every buffer allocated in the loop body and accessed by both stages gets ``S``
versions (a new leading dimension indexed by ``iteration % S``) and its allocation moves
above the loop; the loop becomes a prologue (steps ``0 .. S-2``: producers only), a loop over
the steady steps and an epilogue (consumers of the last ``S - 1`` iterations). Barriers
(:class:`~tilecraft.lower.gpu_nodes.ThreadSync`) stand after the producers' data is complete
(before the consumers) and after the consumers (before the next step's producers overwrite
the version they read). With ``async_copy`` (CUDA sm_80+), each producer copy loop
``for v in T.vectorized(L): S[... + v] = G[... + v]`` from global to shared memory moving 16
bytes is annotated ``tc.async_copy`` (emitted as ``cp.async.cg.shared.global``), each step's
producers end with ``ptx_cp_async_commit()`` and the consumers wait with
``ptx_cp_async_wait(n)`` until the groups they read are complete.

Requirements (``LowerError`` otherwise): a constant trip count of at least ``S``; one stage
per statement; a versioned buffer is written only by producers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arith import Analyzer
from ..errors import LowerError
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    Expr,
    For,
    ForKind,
    IntImm,
    Mutator,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    call_device,
    post_order_visit,
    seq,
    substitute,
)
from ..ir.transform import FunctionPass
from .collect_storage_align import storage_align_table, with_storage_align_table
from .gpu_nodes import ThreadSync
from .gpu_vectorize import copy_source, divisible

STAGE_ATTR = "software_pipeline_stage"
"""Loop annotation: the pipeline stage of each statement of the loop body."""
ORDER_ATTR = "software_pipeline_order"
"""Loop annotation: the position of each statement in the pipelined body."""
ASYNC_COPY_ATTR = "tc.async_copy"
"""Loop annotation set on a 16-byte global-to-shared copy loop issued with ``cp.async``."""
_SHARED = ("shared", "shared.dyn")


def _fail(fname: str, loop: For, what: str) -> LowerError:
    return LowerError(f"InjectSoftwarePipeline {fname}: loop {loop.loop_var.name!r}: {what}")


@dataclass(frozen=True)
class _Spec:
    stmts: tuple[Stmt, ...]
    stages: tuple[int, ...]
    order: tuple[int, ...]  # statement indices in emission order
    allocs: tuple[Buffer, ...]
    n: int
    depth: int  # S


def _int_list(v: object) -> list[int] | None:
    if isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return list(v)
    return None


def _spec(fname: str, loop: For) -> _Spec:
    allocs: list[Buffer] = []
    stmts = tuple(_flatten(loop.body, allocs))
    stages = _int_list(loop.annotations.get(STAGE_ATTR))
    if stages is None or len(stages) != len(stmts):
        raise _fail(fname, loop, f"{STAGE_ATTR} needs one int per statement ({len(stmts)})")
    depth = max(stages) + 1
    if depth < 2 or any(s not in (0, depth - 1) for s in stages):
        raise _fail(fname, loop, f"stages must be 0 (producers) or S - 1 >= 1, got {stages}")
    raw_order = loop.annotations.get(ORDER_ATTR)
    pos = _int_list(raw_order) if raw_order is not None else list(range(len(stmts)))
    if pos is None or sorted(pos) != list(range(len(stmts))):
        raise _fail(fname, loop, f"{ORDER_ATTR} must be a permutation of 0..{len(stmts) - 1}")
    order = tuple(sorted(range(len(stmts)), key=lambda i: pos[i]))
    if not isinstance(loop.extent, IntImm) or not isinstance(loop.min, IntImm):
        raise _fail(fname, loop, "a pipelined loop needs a constant range")
    if loop.extent.value < depth:
        raise _fail(fname, loop, f"{loop.extent.value} iterations for {depth} stages")
    return _Spec(stmts, tuple(stages), order, tuple(allocs), loop.extent.value, depth)


def _flatten(s: Stmt, allocs: list[Buffer]) -> list[Stmt]:
    """The statements of a loop body, with the ``Allocate``s around them and between them
    (placed over a suffix of a sequence) taken out into ``allocs``."""
    if isinstance(s, Allocate):
        allocs.append(s.buffer)
        return _flatten(s.body, allocs)
    if isinstance(s, SeqStmt):
        return [x for item in s.stmts for x in _flatten(item, allocs)]
    return [s]


def _accessed(stmt: Stmt) -> tuple[set[int], set[int]]:
    """Ids of buffers ``stmt`` reads and writes."""
    reads: set[int] = set()
    writes: set[int] = set()

    def fn(n: Node) -> None:
        if isinstance(n, BufferLoad):
            reads.add(id(n.buffer))
        elif isinstance(n, BufferStore):
            writes.add(id(n.buffer))

    post_order_visit(stmt, fn)
    return reads, writes


class _Version(Mutator):
    """Accesses of versioned buffers get the leading version index."""

    def __init__(self, versions: dict[int, Buffer], index: Expr) -> None:
        super().__init__()
        self.versions, self.index = versions, index

    def visit_BufferLoad(self, n: BufferLoad) -> Expr:  # noqa: N802
        new = self.versions.get(id(n.buffer))
        idx = tuple(self.visit(i) for i in n.indices)
        return BufferLoad(new, (self.index, *idx)) if new is not None else n.update(indices=idx)

    def visit_BufferStore(self, n: BufferStore) -> Stmt:  # noqa: N802
        new = self.versions.get(id(n.buffer))
        idx = tuple(self.visit(i) for i in n.indices)
        value = self.visit(n.value)
        if new is None:
            return n.update(value=value, indices=idx)
        return BufferStore(new, value, (self.index, *idx))


class _MarkAsync(Mutator):
    """Annotate 16-byte global-to-shared vector copy loops ``tc.async_copy``."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        loop = self.generic_visit(loop)
        if _async_copy_lanes(loop):
            self.count += 1
            return loop.update(annotations=loop.annotations.with_item(ASYNC_COPY_ATTR, True))
        return loop


def _async_copy_lanes(loop: For) -> bool:
    """True for ``for v in T.vectorized(L): S[..., b + v] = G[..., b' + v]`` moving 16
    bytes, ``b`` and ``b'`` multiples of ``L`` (both ends 16-byte aligned); the load may be
    guarded by a lane-uniform ``if_then_else(c, G[...], 0)`` (the zero-fill form)."""
    store = loop.body
    if loop.kind is not ForKind.VECTORIZED or not isinstance(store, BufferStore):
        return False
    source = copy_source(store.value, loop.loop_var)
    if source is None or not isinstance(loop.extent, IntImm):
        return False
    load = source[0]
    lanes = loop.extent.value
    if store.buffer.scope not in _SHARED or load.buffer.scope != "global":
        return False
    if lanes * store.buffer.dtype.bits != 128 or load.buffer.dtype != store.buffer.dtype:
        return False
    ana = Analyzer()
    v = loop.loop_var
    for idx in (store.indices, _row_major(load.indices, load.buffer.shape)):
        last = idx[-1]
        base = ana.simplify(substitute(last, {v: IntImm(v.dtype, 0)}))
        step = ana.simplify(substitute(last, {v: IntImm(v.dtype, 1)}) - base)
        others = any(_uses(i, v) for i in idx[:-1])
        if others or not (isinstance(step, IntImm) and step.value == 1):
            return False
        if not divisible(base, lanes):
            return False
    return True


def _row_major(indices: tuple[Expr, ...], shape: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """A global load's indices as one flat offset (global buffers are dense row-major): a
    weight read ``w[o, k // 9, k % 9 // 3, k % 3]`` is contiguous along ``k`` once flattened.
    ``indices`` as they are when a dimension is symbolic."""
    if len(indices) < 2 or not all(isinstance(d, IntImm) for d in shape[1:]):
        return indices
    flat = indices[0]
    for i, d in zip(indices[1:], shape[1:], strict=True):
        flat = flat * d + i
    return (Analyzer().simplify(flat),)


def _uses(e: Expr, v: Var) -> bool:
    found = False

    def fn(n: Node) -> None:
        nonlocal found
        found = found or n is v

    post_order_visit(e, fn)
    return found


class _Pipeliner:
    """Rewrite one annotated loop (see the module docstring)."""

    def __init__(self, fname: str, loop: For, async_copy: bool) -> None:
        self.fname, self.loop = fname, loop
        self.spec = _spec(fname, loop)
        self.versions = self._versions()
        marked = [_MarkAsync() for _ in self.spec.stmts]
        producers = [s == 0 for s in self.spec.stages]
        self.stmts = [
            m.visit(st) if async_copy and prod else st
            for m, st, prod in zip(marked, self.spec.stmts, producers, strict=True)
        ]
        self.async_copy = any(m.count for m in marked)

    def _versions(self) -> dict[int, Buffer]:
        spec = self.spec
        use: dict[int, set[int]] = {}
        written_by: dict[int, set[int]] = {}
        for st, stage in zip(spec.stmts, spec.stages, strict=True):
            reads, writes = _accessed(st)
            for b in reads | writes:
                use.setdefault(b, set()).add(stage)
            for b in writes:
                written_by.setdefault(b, set()).add(stage)
        out: dict[int, Buffer] = {}
        for buf in spec.allocs:
            if len(use.get(id(buf), set())) < 2:
                continue
            if written_by.get(id(buf), set()) - {0}:
                raise _fail(
                    self.fname,
                    self.loop,
                    f'buffer "{buf.name}" is written by a consumer stage; only producers (stage '
                    "0) may write buffers the stages share",
                )
            dt = buf.shape[0].dtype
            out[id(buf)] = buf.update(shape=(IntImm(dt, spec.depth), *buf.shape))
        return out

    def instance(self, i: int, iteration: Expr) -> Stmt:
        """Statement ``i`` for loop iteration ``iteration`` (an expression of the new loop)."""
        lv = self.loop.loop_var
        it = Analyzer().simplify(iteration + self.loop.min)
        version = Analyzer().simplify(iteration % self.spec.depth)
        out: Stmt = _Version(self.versions, version).visit(substitute(self.stmts[i], {lv: it}))
        return out

    def step(
        self, iteration_of: dict[int, Expr], wait: int | None, fresh: bool = False
    ) -> list[Stmt]:
        """One pipeline step: producers then consumers, each for its iteration; ``fresh``:
        with new loop variables (a repeated step of the prologue or epilogue, whose thread
        loops would otherwise bind one variable twice in one scope)."""
        stages, order = self.spec.stages, self.spec.order
        prod = [self.instance(i, iteration_of[i]) for i in order
                if stages[i] == 0 and i in iteration_of]  # fmt: skip
        cons = [self.instance(i, iteration_of[i]) for i in order
                if stages[i] != 0 and i in iteration_of]  # fmt: skip
        if fresh:
            prod, cons = [_FreshLoopVars().visit(p) for p in prod], [
                _FreshLoopVars().visit(c) for c in cons]  # fmt: skip
        out: list[Stmt] = list(prod)
        if prod and self.async_copy:
            out.append(Evaluate(call_device("ptx_cp_async_commit")))
        if cons:
            if self.async_copy and wait is not None:
                out.append(Evaluate(call_device("ptx_cp_async_wait", wait)))
            out += [ThreadSync(), *cons, ThreadSync()]
        return out

    def rewrite(self) -> Stmt:
        spec, lv = self.spec, self.loop.loop_var
        s, n = spec.depth, spec.n
        out: list[Stmt] = []
        producers = [i for i, st in enumerate(spec.stages) if st == 0]
        consumers = [i for i, st in enumerate(spec.stages) if st != 0]
        for t in range(s - 1):  # prologue: producers of iterations 0 .. S-2
            out += self.step({i: IntImm(lv.dtype, t) for i in producers}, None, t > 0)
        k = Var(lv.name, lv.dtype)
        steady = dict.fromkeys(producers, k + (s - 1)) | dict.fromkeys(consumers, k + 0)
        body = seq(*self.step(steady, s - 1))
        out.append(For(k, IntImm(lv.dtype, 0), IntImm(lv.dtype, n - s + 1), ForKind.SERIAL, body))
        for t in range(n, n + s - 1):  # epilogue: consumers of the last S-1 iterations
            pending = n - 1 - (t - s + 1)
            out += self.step({i: IntImm(lv.dtype, t - s + 1) for i in consumers}, pending - 0,
                             t > n)  # fmt: skip
        stmt: Stmt = seq(*out)
        for buf in reversed(spec.allocs):
            stmt = Allocate(self.versions.get(id(buf), buf), stmt)
        return stmt


class _FreshLoopVars(Mutator):
    """Give every loop of a statement a new loop variable (same name and dtype)."""

    def visit_For(self, s: For) -> Stmt:  # noqa: N802
        new = Var(s.loop_var.name, s.loop_var.dtype)
        body = self.visit(substitute(s.body, {s.loop_var: new}))
        return s.update(loop_var=new, body=body)


class _Rewrite(Mutator):
    def __init__(self, fname: str, async_copy: bool) -> None:
        super().__init__()
        self.fname, self.async_copy = fname, async_copy
        self.versioned: set[str] = set()

    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        loop = self.generic_visit(loop)
        if STAGE_ATTR not in loop.annotations:
            return loop
        pipe = _Pipeliner(self.fname, loop, self.async_copy)
        self.versioned |= {b.name for b in pipe.versions.values()}
        return pipe.rewrite()


class InjectSoftwarePipeline(FunctionPass):
    """Pipeline loops annotated ``software_pipeline_stage`` (see the module docstring).

    Parameters
    ----------
    async_copy
        Issue producer copies with ``cp.async`` (CUDA sm_80 and newer).
    """

    def __init__(self, async_copy: bool = False) -> None:
        self.async_copy = async_copy

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Rewrite every annotated loop of ``func``."""
        rw = _Rewrite(func.name, self.async_copy)
        out = func.update(body=rw.visit(func.body))
        table = storage_align_table(out)
        versioned = {name for name in rw.versioned if name in table}
        if not versioned:
            return out
        # a versioned buffer gained a leading dimension: its alignment requests move one axis in
        shifted = {
            name: tuple((a + 1, f, o) for a, f, o in entries) if name in versioned else entries
            for name, entries in table.items()
        }
        return with_storage_align_table(out, shifted)

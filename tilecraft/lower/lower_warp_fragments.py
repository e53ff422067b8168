"""Give warp fragments per-lane storage and turn warp tile operations into hardware ones.

Before: blocks lowered to loops (``Allocate`` placed), buffers not flattened. A buffer in a
warp fragment scope (:data:`tilecraft.ir.WARP_FRAGMENT_SCOPES`) holds logical tiles and is
accessed only by warp tile operations (``mma_load_matrix``, ``mma_sync_m16n8k16``,
``mma_fill``, ``mma_store`` and the ``wmma_*`` ones of :mod:`tilecraft.ir.device_intrin`),
each executed once per warp, outside any loop bound to ``threadIdx.x``.
After:  each fragment buffer holds only the tiles of one warp: its box is the union of the
tiles its operations touch with the loops inside its allocation relaxed, except the loops
bound to thread indices (every warp has its own registers; boxes of different warps must be
disjoint, and must not depend on ``threadIdx.x``). An ``mma`` fragment becomes a ``local``
array ``[tile rows, tile cols, lane elements]``; a ``wmma`` fragment keeps its scope with one
element per tile (CUDA codegen declares ``nvcuda::wmma::fragment`` arrays). Every operation
sits in a new loop ``for lane in T.thread_binding(32, "threadIdx.x")`` and becomes:

- ``mma_load_matrix`` -> ``ptx_ldmatrix_x4`` (matrixA) / ``ptx_ldmatrix_x2`` with ``.trans``
  (matrixB), each lane giving the first and last element of the row it addresses;
- ``mma_load_matrix_b`` -> ``ptx_ldmatrix_x2`` (one matrixB tile) / ``ptx_ldmatrix_x4`` (two),
  with ``.trans`` for a k x n shared tile, without for an n x k one;
- ``mma_sync_m16n8k16`` -> ``ptx_mma_m16n8k16`` on the lane's 4 + 8 + 4 elements;
- int8 (``m16n8k32.*`` scopes): ``mma_load_matrix`` of a matrixA tile ->
  ``ptx_ldmatrix_b8_x4``, ``mma_load_matrix_b`` (n x k only) -> ``ptx_ldmatrix_b8_x2`` /
  ``_x4`` (each lane's row 16 int8 wide), ``mma_sync_m16n8k32`` -> ``ptx_mma_m16n8k32`` on
  the lane's 4 + 16 + 8 elements;
- ``mma_fill`` / ``mma_store`` -> plain stores of the lane's elements
  (:mod:`tilecraft.lower.warp_layouts`);
- ``wmma_*`` -> ``wmma_load_sync`` / ``wmma_mma_sync`` / ``wmma_fill_fragment`` /
  ``wmma_store_sync`` on the fragment's tile, with the first and last element of the memory
  tile and the first element of its second row (the leading dimension after flattening).

The kernel's ``threadIdx.x`` launch extent must then be a multiple of 32 (checked later by the
codegen's thread guards: only lanes below 32 of a wider row run the operations).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..arith import Analyzer, eval_region, evaluate, union_region
from ..errors import LowerError, TilecraftError
from ..ir import (
    WARP_FRAGMENT_SCOPES,
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    Expr,
    For,
    ForKind,
    IntImm,
    Mutator,
    Node,
    PrimFunc,
    Range,
    Stmt,
    Var,
    call_device,
    cast,
    collect_vars,
    post_order_visit,
    seq,
    substitute,
)
from ..ir.device_intrin import HARDWARE_OPS, TILE_OPS
from ..ir.transform import FunctionPass
from .compact_buffer import CompactBufferAllocation
from .warp_layouts import (
    LANE_ELEMENTS,
    LAYOUT,
    TILE_SHAPE,
    WARP,
    footprint,
    ldmatrix_row,
    tile_op_error,
)


@dataclass(frozen=True)
class _Site:
    """One warp tile operation and the loops around it (outermost first)."""

    call: Call
    loops: tuple[For, ...]


@dataclass(frozen=True)
class _Plan:
    """A fragment buffer's per-warp storage."""

    new: Buffer
    mins: tuple[Expr, ...]  # box minimum over the canonical thread variables
    tile: tuple[int, int]


def _fail(func: str, what: str) -> LowerError:
    return LowerError(f"LowerWarpFragments {func}: {what}")


def _is_fragment(buf: Buffer) -> bool:
    return buf.scope in WARP_FRAGMENT_SCOPES


def _tile_call(s: Stmt) -> Call | None:
    if isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op in TILE_OPS:
        return s.value
    return None


class _Collector:
    """Tile operations with their loop stacks; allocations of fragment buffers."""

    def __init__(self, fname: str) -> None:
        self.fname = fname
        self.sites: list[_Site] = []
        self.allocs: dict[int, tuple[Allocate, int]] = {}  # buffer id -> (alloc, loop depth)
        self.thread_ext: dict[str, int] = {}
        self.stack: list[For] = []

    def run(self, s: Stmt) -> None:
        call = _tile_call(s)
        if call is not None:
            scopes = [a.buffer.scope for a in call.args if isinstance(a, BufferLoad)]
            why = tile_op_error(call.op, scopes)
            if why is not None:
                raise _fail(self.fname, why)
            if any(lp.thread == "threadIdx.x" for lp in self.stack):
                raise _fail(
                    self.fname,
                    f"{call.op} sits inside a loop bound to threadIdx.x; a warp tile operation "
                    "is executed by a whole warp: bind threadIdx.x only around ordinary code",
                )
            self.sites.append(_Site(call, tuple(self.stack)))
            return
        if isinstance(s, For):
            if s.thread is not None:
                ext = s.extent.value if isinstance(s.extent, IntImm) else -1
                self.thread_ext[s.thread] = max(self.thread_ext.get(s.thread, 0), ext)
            self.stack.append(s)
            self.run(s.body)
            self.stack.pop()
            return
        if isinstance(s, Allocate) and _is_fragment(s.buffer):
            self.allocs[id(s.buffer)] = (s, len(self.stack))
        for child in _stmt_children(s):
            self.run(child)


def _stmt_children(s: Stmt) -> list[Stmt]:
    from ..ir.visitor import iter_children

    return [c for c in iter_children(s) if isinstance(c, Stmt)]


def _check_only_tile_ops(fname: str, body: Stmt) -> None:
    """Fragment buffers appear only as addresses of warp tile operations."""
    inside: set[int] = set()

    def mark(n: Node) -> None:
        call = _tile_call(n) if isinstance(n, Stmt) else None
        if call is not None:
            inside.update(id(a) for a in call.args)

    post_order_visit(body, mark)

    def check(n: Node) -> None:
        if not isinstance(n, BufferStore | BufferLoad):
            return
        direct = isinstance(n, BufferStore) or id(n) not in inside
        if direct and _is_fragment(n.buffer):
            raise _fail(
                fname,
                f'fragment buffer "{n.buffer.name}" ({n.buffer.scope}) is accessed outside '
                "warp tile operations; tensorize every block that touches it",
            )

    post_order_visit(body, check)


class _Canon:
    """One variable per thread tag, standing for every loop bound to it."""

    def __init__(self, extents: dict[str, int]) -> None:
        self.vars = {tag: Var(f"tc_{tag.replace('.', '_')}") for tag in extents}
        self.extents = extents

    def to_canon(self, loops: Sequence[For]) -> dict[Var, Expr]:
        return {lp.loop_var: self.vars[lp.thread] for lp in loops if lp.thread is not None}

    def to_site(self, loops: Sequence[For]) -> dict[Var, Expr]:
        out: dict[Var, Expr] = {}
        for lp in loops:
            if lp.thread is not None:
                out[self.vars[lp.thread]] = lp.loop_var
        return out


_WRITTEN = {"mma_load_matrix", "mma_load_matrix_b", "mma_fill", "mma_sync_m16n8k16",
            "mma_sync_m16n8k32", "wmma_load_matrix", "wmma_fill", "wmma_sync"}  # fmt: skip
"""Operations whose first argument (a fragment tile) they write."""
_ACCUMULATE = {"mma_sync_m16n8k16", "mma_sync_m16n8k32", "wmma_sync"}
"""Operations that also read the tile they write (their first argument)."""


def _tile_region(
    arg: BufferLoad, site: _Site, depth: int, tile: tuple[int, int], canon: _Canon
) -> list[Range]:
    """The tiles ``arg`` touches under ``site``'s loops inside the allocation (thread loops
    fixed, as canonical variables)."""
    inner = [lp for lp in site.loops[depth:] if lp.thread is None]
    dom = {lp.loop_var: Range(lp.min, lp.extent) for lp in inner}
    idx = [substitute(i, canon.to_canon(site.loops)) for i in arg.indices]
    lead = len(idx) - 2
    rng = [Range(i, IntImm(i.dtype, 1)) for i in idx[:lead]] + [
        Range(i, IntImm(i.dtype, t)) for i, t in zip(idx[lead:], tile, strict=True)
    ]
    return eval_region(rng, dom)


def _plan(fname: str, col: _Collector, canon: _Canon) -> dict[int, _Plan]:
    plans: dict[int, _Plan] = {}
    for key, (alloc, depth) in col.allocs.items():
        buf = alloc.buffer
        tile = TILE_SHAPE[buf.scope]
        reads: list[list[Range]] = []
        writes: list[list[Range]] = []
        accumulates = False
        for site in col.sites:
            for k, arg in enumerate(site.call.args):
                if not (isinstance(arg, BufferLoad) and arg.buffer is buf):
                    continue
                try:
                    shape = footprint(site.call, k, buf.scope)
                    region = _tile_region(arg, site, depth, shape, canon)
                except TilecraftError as e:
                    raise _fail(fname, f'cannot bound the tiles of "{buf.name}": {e}') from e
                written = k == 0 and site.call.op in _WRITTEN
                (writes if written else reads).append(region)
                if written and site.call.op in _ACCUMULATE:
                    reads.append(region)
                    accumulates = True
        if not writes:
            raise _fail(fname, f'fragment "{buf.name}" is read but never written')
        box = union_region(writes)
        if reads:
            _check_covered(fname, buf, box, union_region(reads))
        plans[key] = _make_plan(fname, buf, box, tile, canon, accumulates)
    return plans


def _check_covered(fname: str, buf: Buffer, written: list[Range], read: list[Range]) -> None:
    """A warp reads only tiles it writes itself (its registers hold nothing else)."""
    ana = Analyzer()
    for w, r in zip(written, read, strict=True):
        if not (
            ana.can_prove(w.min <= r.min) and ana.can_prove(r.min + r.extent <= w.min + w.extent)
        ):
            raise _fail(
                fname,
                f'a warp reads tiles of "{buf.name}" that it does not write itself; every warp '
                "must load (or fill) each fragment tile it uses",
            )


def _make_plan(
    fname: str,
    buf: Buffer,
    box: list[Range],
    tile: tuple[int, int],
    canon: _Canon,
    accumulates: bool,
) -> _Plan:
    exts: list[int] = []
    for d, r in enumerate(box):
        want = tile[d - len(box) + 2] if d >= len(box) - 2 else 1
        if not isinstance(r.extent, IntImm) or r.extent.value % want:
            raise _fail(
                fname,
                f'the tiles of "{buf.name}" one warp touches span {r.extent} in dimension {d}, '
                f"not a constant multiple of {want}",
            )
        exts.append(r.extent.value // want)
    mins = tuple(r.min for r in box)
    sizes = [e * (tile[d - len(box) + 2] if d >= len(box) - 2 else 1) for d, e in enumerate(exts)]
    if _warps_overlap(fname, buf, mins, sizes, canon) and accumulates:
        raise _fail(
            fname,
            f'two warps accumulate into the same tiles of "{buf.name}" ({buf.scope}); each warp '
            "keeps its fragments in its own registers, so accumulators must be disjoint",
        )
    dt = buf.shape[0].dtype
    if buf.scope in LANE_ELEMENTS:
        shape = (*exts, LANE_ELEMENTS[buf.scope])
        new = Buffer(buf.name, tuple(IntImm(dt, s) for s in shape), buf.dtype, "local")
    else:
        new = Buffer(buf.name, tuple(IntImm(dt, s) for s in exts), buf.dtype, buf.scope)
    return _Plan(new, mins, tile)


def _warps_overlap(
    fname: str, buf: Buffer, mins: tuple[Expr, ...], exts: list[int], canon: _Canon
) -> bool:
    """Whether the boxes of two warps intersect; LowerError when they depend on the lane."""
    used = {id(v) for m in mins for v in collect_vars(m)}
    lane = canon.vars.get("threadIdx.x")
    if lane is not None and id(lane) in used:
        raise _fail(fname, f'the tiles of "{buf.name}" depend on threadIdx.x (the lane)')
    tags = [t for t in ("threadIdx.y", "threadIdx.z") if t in canon.vars]
    counts = [max(canon.extents[t], 1) for t in tags]
    if any(c < 0 for c in counts) or int(np.prod(counts)) <= 1:
        return False
    others = {
        v: 0 for m in mins for v in collect_vars(m) if all(v is not canon.vars[t] for t in tags)
    }
    starts = []
    for point in itertools.product(*(range(c) for c in counts)):
        env = {**others, **{canon.vars[t]: p for t, p in zip(tags, point, strict=True)}}
        starts.append([int(evaluate(m, env)) for m in mins])
    return any(
        all(x < y + e and y < x + e for x, y, e in zip(a, b, exts, strict=True))
        for a, b in itertools.combinations(starts, 2)
    )


class _Rewriter(Mutator):
    """Rewrite the fragment allocations and every warp tile operation (see module doc)."""

    def __init__(self, fname: str, plans: dict[int, _Plan], canon: _Canon) -> None:
        super().__init__()
        self.fname, self.plans, self.canon = fname, plans, canon
        self.stack: list[For] = []
        self.ana = Analyzer()

    def visit_For(self, s: For) -> Stmt:  # noqa: N802
        self.stack.append(s)
        try:
            out: Stmt = self.generic_visit(s)
        finally:
            self.stack.pop()
        return out

    def visit_Allocate(self, s: Allocate) -> Stmt:  # noqa: N802
        plan = self.plans.get(id(s.buffer))
        body = self.visit(s.body)
        if plan is None:
            return s.update(body=body)
        return Allocate(plan.new, body)

    def visit_Evaluate(self, s: Evaluate) -> Stmt:  # noqa: N802
        call = _tile_call(s)
        if call is None:
            return s
        lane = Var("lane")
        body = self.lower(call, lane)
        return For(
            lane,
            IntImm(lane.dtype, 0),
            IntImm(lane.dtype, WARP),
            ForKind.THREAD_BINDING,
            body,
            thread="threadIdx.x",
        )

    # addresses ----------------------------------------------------------------------------
    def tile_index(self, arg: BufferLoad) -> tuple[Expr, ...]:
        """The index of ``arg``'s tile in its buffer's per-warp storage."""
        plan = self.plans[id(arg.buffer)]
        site = self.canon.to_site(self.stack)
        out: list[Expr] = []
        lead = len(arg.indices) - 2
        for d, (i, m) in enumerate(zip(arg.indices, plan.mins, strict=True)):
            diff = self.ana.simplify(i - substitute(m, site))
            if any(v is c for v in collect_vars(diff) for c in self.canon.vars.values()):
                raise _fail(self.fname, f'"{arg.buffer.name}" is used outside its threads')
            if d >= lead:
                t = plan.tile[d - lead]
                if not self.ana.can_prove_equal(diff % t, IntImm(diff.dtype, 0)):
                    raise _fail(
                        self.fname,
                        f'a tile of "{arg.buffer.name}" starts at {i!r}, not on the {t}-grid '
                        "of the warp's tiles",
                    )
                diff = self.ana.simplify(diff // t)
            out.append(diff)
        return tuple(out)

    def elements(self, arg: BufferLoad) -> list[BufferLoad]:
        """The lane's elements of ``arg``'s (mma) tile."""
        plan = self.plans[id(arg.buffer)]
        t = self.tile_index(arg)
        n = LANE_ELEMENTS[arg.buffer.scope]
        return [BufferLoad(plan.new, (*t, IntImm(t[0].dtype, e))) for e in range(n)]

    def fragment(self, arg: BufferLoad) -> BufferLoad:
        """The (wmma) fragment holding ``arg``'s tile."""
        return BufferLoad(self.plans[id(arg.buffer)].new, self.tile_index(arg))

    def at(self, arg: BufferLoad, dr: Expr | int, dc: Expr | int) -> BufferLoad:
        """The element ``(dr, dc)`` of the memory tile starting at ``arg``."""
        idx = arg.indices
        r, c = self.ana.simplify(idx[-2] + dr), self.ana.simplify(idx[-1] + dc)
        return BufferLoad(arg.buffer, (*idx[:-2], r, c))

    # operations ---------------------------------------------------------------------------
    def lower(self, call: Call, lane: Var) -> Stmt:
        args = [a for a in call.args if isinstance(a, BufferLoad)]
        for a in args:
            if _is_fragment(a.buffer) and id(a.buffer) not in self.plans:
                raise _fail(self.fname, f'fragment "{a.buffer.name}" has no allocation here')
        op = call.op
        if op == "mma_fill":
            value = call.args[1]
            return seq(*(BufferStore(e.buffer, cast(value, e.buffer.dtype), e.indices)
                         for e in self.elements(args[0])))  # fmt: skip
        if op == "mma_store":
            dst, src = args
            stores = []
            for e, el in enumerate(self.elements(src)):
                row, col = LAYOUT[src.buffer.scope](lane, e)
                target = self.at(dst, row, col)
                stores.append(BufferStore(dst.buffer, el, target.indices))
            return seq(*stores)
        if op == "mma_load_matrix" and args[0].buffer.scope == "m16n8k32.matrixA":
            dst, src = args
            row, col = ldmatrix_row(lane, 4)
            first, last = self.at(src, row, col * 2), self.at(src, row, col * 2 + 15)
            return Evaluate(call_device("ptx_ldmatrix_b8_x4", first, last, *self.elements(dst)))
        if op == "mma_load_matrix":
            dst, src = args
            num, trans = (4, 0) if dst.buffer.scope == "m16n8k16.matrixA" else (2, 1)
            row, col = ldmatrix_row(lane, num)
            first, last = self.at(src, row, col), self.at(src, row, col + 7)
            call2 = call_device(f"ptx_ldmatrix_x{num}", trans, first, last, *self.elements(dst))
            return Evaluate(call2)
        if op == "mma_load_matrix_b":
            return self.lower_load_b(call, args, lane)
        if op in ("mma_sync_m16n8k16", "mma_sync_m16n8k32"):
            c, a, b = args
            els = [*self.elements(c), *self.elements(a), *self.elements(b)]
            return Evaluate(call_device(f"ptx_mma_{op[9:]}", *els))
        return self.lower_wmma(call, args)

    def lower_load_b(self, call: Call, args: list[BufferLoad], lane: Var) -> Stmt:
        """``mma_load_matrix_b`` -> one ``ldmatrix`` (x2 for one tile, x4 for two)."""
        dst, src = args
        nk, tiles = call.args[2], call.args[3]
        if not (isinstance(nk, IntImm) and nk.value in (0, 1)):
            raise _fail(self.fname, f"mma_load_matrix_b: nk must be 0 or 1, got {nk!r}")
        if not (isinstance(tiles, IntImm) and tiles.value in (1, 2)):
            raise _fail(self.fname, f"mma_load_matrix_b: tiles must be 1 or 2, got {tiles!r}")
        num = 2 * tiles.value
        row, col = ldmatrix_row(lane, num, nk=bool(nk.value))
        elements = [e for t in range(tiles.value) for e in self.elements(self.at(dst, 0, 8 * t))]
        if dst.buffer.scope == "m16n8k32.matrixB":  # rows of 16 int8; no .trans for 8 bits
            if not nk.value:
                raise _fail(self.fname, "mma_load_matrix_b: an int8 matrixB loads n x k only")
            first, last = self.at(src, row, col * 2), self.at(src, row, col * 2 + 15)
            return Evaluate(call_device(f"ptx_ldmatrix_b8_x{num}", first, last, *elements))
        first, last = self.at(src, row, col), self.at(src, row, col + 7)
        call2 = call_device(f"ptx_ldmatrix_x{num}", 1 - nk.value, first, last, *elements)
        return Evaluate(call2)

    def lower_wmma(self, call: Call, args: list[BufferLoad]) -> Stmt:
        op = call.op
        if op == "wmma_fill":
            return Evaluate(call_device("wmma_fill_fragment", self.fragment(args[0]), call.args[1]))
        if op == "wmma_sync":
            c, a, b = (self.fragment(x) for x in args)
            return Evaluate(call_device("wmma_mma_sync", c, a, b, c))
        if op == "wmma_load_matrix":
            dst, src = args
            span = (src, self.at(src, 15, 15), self.at(src, 1, 0))
            return Evaluate(call_device("wmma_load_sync", self.fragment(dst), *span))
        if op == "wmma_store":
            dst, src = args
            span = (dst, self.at(dst, 15, 15), self.at(dst, 1, 0))
            return Evaluate(call_device("wmma_store_sync", *span, self.fragment(src)))
        raise _fail(self.fname, f"no lowering for warp tile operation {op}")


class LowerWarpFragments(FunctionPass):
    """Per-warp fragment storage and hardware operations (see the module docstring)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Lower the warp fragments and warp tile operations of ``func``."""
        col = _Collector(func.name)
        col.run(func.body)
        if not col.sites and not col.allocs:
            return func
        _check_only_tile_ops(func.name, func.body)
        lanes = max(col.thread_ext.get("threadIdx.x", WARP), WARP)
        if lanes % WARP:
            raise _fail(
                func.name,
                f"threadIdx.x runs over {lanes} threads; warps are rows of 32 threadIdx.x "
                "values only when that extent is a multiple of 32",
            )
        canon = _Canon(col.thread_ext)
        plans = _plan(func.name, col, canon)
        return func.update(body=_Rewriter(func.name, plans, canon).visit(func.body))


def _has_hardware_ops(func: PrimFunc) -> bool:
    found = False

    def fn(n: Node) -> None:
        nonlocal found
        found = found or (isinstance(n, Call) and n.op in HARDWARE_OPS)

    post_order_visit(func.body, fn)
    return found


class CompactTensorCoreBuffers(FunctionPass):
    """:class:`~tilecraft.lower.CompactBufferAllocation` for kernels with tensor-core
    operations (after :class:`LowerWarpFragments`); other functions pass unchanged.

    Tensor-core schedules stage operand tiles with ``cache_read`` + ``compute_at``, which
    keep the cached buffers at the tensor's shape; this shrinks them to the tiles (shared
    buffers, allocated above the thread loops, relax over them). The general GPU compaction
    of the pipeline does not yet cover these buffers: without this pass the two-stage
    pipelined GEMM asks for 70 KiB of static shared memory instead of 37 KiB.
    """

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Compact ``func``'s allocations when it holds tensor-core operations."""
        if not _has_hardware_ops(func):
            return func
        return CompactBufferAllocation().transform_function(func)

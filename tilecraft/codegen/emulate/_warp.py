"""Warp collectives and asynchronous copies in an emulated kernel (:mod:`._kernel`).

A registered intrinsic (:mod:`.intrinsics`) becomes runtime calls
(:mod:`.runtime`): a :class:`~.intrinsics.WarpCollective` evaluates each lane's
operands, checks its regions (bounds; under race checking the elements read, before the call),
calls ``tc_emu_collective`` (a scheduling point: the last lane to arrive runs the C function
over all lanes), then marks the regions written and stores the lane's results; an
:class:`~.intrinsics.AsyncIntrinsic` is a call of ``tc_emu_async_copy`` / ``_commit`` /
``_wait``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...ir import Stmt
from ._layout import SiteKind
from .intrinsics import (
    Access,
    AsyncIntrinsic,
    AsyncRole,
    CollectiveCall,
    LaneRegion,
    LaneResult,
    LaneValue,
    WarpCollective,
    lane_elements,
)
from .runtime import WARP_SIZE

if TYPE_CHECKING:
    from ._kernel import ThreadEmitter

SHARED_SCOPES = ("shared", "shared.dyn")
_FULL = (1 << WARP_SIZE) - 1


def is_per_thread(scope: str) -> bool:
    """True for storage each thread has its own copy of (``local``, fragments)."""
    return scope not in ("global", *SHARED_SCOPES)


@dataclass(frozen=True)
class Region:
    """A :class:`LaneRegion` as emitted: pointer, range check, shadow updates."""

    ptr: str
    ok: str
    before: str  # shadow checks of the elements read (racecheck)
    after: str  # shadow updates of the elements written (racecheck)
    shadow: str  # the shadow of its first element ("0": none)
    site: int
    base: str  # the C variable holding its first element's index


def emit_region(em: ThreadEmitter, r: LaneRegion) -> Region:
    """Evaluate a region's base; its range check and its shadow updates (only for the lanes
    of ``r.lanes``: the others pass NULL)."""
    n = em.fresh()
    base = f"tc_r{n}"
    buf = r.buffer
    site = em.site(SiteKind.LOAD if r.access is Access.READ else SiteKind.STORE, buf)
    em.out.emit(f"const int64_t {base} = (int64_t)({em.expr(r.base)});")
    mine = "1"
    if r.lanes != _FULL:
        mine = f"tc_m{n}"
        em.out.emit(f"const int {mine} = ({r.lanes & _FULL}u >> (tc_self->linear % 32)) & 1u;")
    ok = "1"
    if em.opt.checks:
        ext = f"(int64_t)({em.expr(buf.shape[0])}) * {lane_elements(buf)}"
        ok = (
            f"tc_emu_in(tc_self, {site}, {base}, {ext}) && "
            f"tc_emu_in(tc_self, {site}, {base} + {r.count - 1}, {ext})"
        )
        if mine != "1":
            ok = f"(!{mine} || ({ok}))"
    guard = "" if mine == "1" else f"if ({mine}) "
    loop = f"{guard}for (int64_t tc_j{n} = {base}; tc_j{n} < {base} + {r.count}; ++tc_j{n}) "
    before = em.read_shadow(buf, f"tc_j{n}", site) if r.access is not Access.WRITE else ""
    after = ""
    if r.access is not Access.READ and em.opt.racecheck:
        if buf.scope in SHARED_SCOPES:
            sh = f"{em.aux(buf, 'sh')} + tc_j{n} * {buf.dtype.itemsize}"
            after = f"tc_emu_shared_write(tc_self, {sh}, {site}, tc_j{n}, 0);"
        elif is_per_thread(buf.scope):
            after = f"{em.aux(buf, 'init')}[tc_j{n}] = 1;"
        else:
            after = em.global_write_shadow(buf, f"tc_j{n}", site)
    shadow = "0"
    if em.opt.racecheck and buf.scope in SHARED_SCOPES:
        shadow = f"{em.aux(buf, 'sh')} + {base} * {buf.dtype.itemsize}"
    ptr = f"(void*)({em.buf(buf)} + {base})"
    if mine != "1":
        ptr = f"({mine} ? {ptr} : (void*)0)"
    before = loop + before if before else ""
    after = loop + after if after else ""
    return Region(ptr, ok, before, after, shadow, site, base)


@dataclass
class _Operands:
    """A collective's operands as emitted: each lane's pointers and sizes, its regions, and
    the temporaries its results come back in."""

    ptrs: list[str] = field(default_factory=list)
    sizes: list[str] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    stores: list[tuple[LaneResult, str]] = field(default_factory=list)


def _emit_operands(em: ThreadEmitter, call: CollectiveCall, n: int) -> _Operands:
    """Evaluate ``call``'s operands into C temporaries (``n``: this collective's number)."""
    ops = _Operands()
    for k, op in enumerate(call.operands):
        if isinstance(op, LaneRegion):
            reg = emit_region(em, op)
            ops.regions.append(reg)
            ops.ptrs.append(reg.ptr)
            ops.sizes.append(str(op.count * op.buffer.dtype.itemsize))
            continue
        dt = op.value.dtype if isinstance(op, LaneValue) else op.buffer.dtype
        tmp = f"tc_o{n}_{k}"
        if isinstance(op, LaneValue):
            em.out.emit(f"{em.compute_type(dt)} {tmp} = {em.expr(op.value)};")
        else:
            em.out.emit(f"{em.compute_type(dt)} {tmp};")
            ops.stores.append((op, tmp))
        ops.ptrs.append(f"(void*)&{tmp}")
        ops.sizes.append(f"(int32_t)sizeof({tmp})")
    return ops


def emit_collective(em: ThreadEmitter, s: Stmt, spec: WarpCollective) -> None:
    """Emit a warp collective: operands, the runtime call, then the results' stores.

    A lane whose region is out of range reports it and skips the collective.
    """
    em.fibers = True
    for key, text in spec.c_requires:
        em.cg.need(key, text)
    if spec.c_source:
        em.cg.need(f"tc_emu_intrinsic_{spec.name}", spec.c_source)
    call = spec.describe(s)
    # one site per statement: lanes that reach different statements never pair up
    site = em.site(SiteKind.COLLECTIVE, ordinal=em.collectives, intrinsic=spec.name)
    em.collectives += 1
    n = em.fresh()
    out = em.out
    out.emit("{")
    out.level += 1
    ops = _emit_operands(em, call, n)
    ptrs, sizes, regions = ops.ptrs, ops.sizes, ops.regions
    ok = " && ".join(r.ok for r in regions if r.ok != "1") or "1"
    out.emit(f"if ({ok}) {{")
    out.level += 1
    for line in (r.before for r in regions if r.before):
        out.emit(line)
    imm = ", ".join(str(int(v)) for v in call.immediates) or "0"
    out.emit(f"void* const tc_ops{n}[] = {{{', '.join(ptrs) or '0'}}};")
    out.emit(f"const int32_t tc_sz{n}[] = {{{', '.join(sizes) or '0'}}};")
    out.emit(f"static const int64_t tc_imm{n}[] = {{{imm}}};")
    out.emit(
        f"tc_emu_collective(tc_self, {site}, {spec.c_function}, {call.mask & _FULL}u, "
        f"tc_imm{n}, tc_sz{n}, {len(ptrs)}, tc_ops{n});"
    )
    for line in (r.after for r in regions if r.after):
        out.emit(line)
    for result, tmp in ops.stores:
        em.store_result(result, tmp)
    out.level -= 1
    out.emit("}")
    out.level -= 1
    out.emit("}")


def emit_async(em: ThreadEmitter, s: Stmt, spec: AsyncIntrinsic) -> None:
    """Emit one asynchronous-copy statement as a runtime call (skipped when out of range)."""
    out = em.out
    if spec.role is AsyncRole.COMMIT:
        out.emit("tc_emu_async_commit(tc_self);")
        return
    if spec.role is AsyncRole.WAIT:
        assert spec.in_flight is not None
        out.emit(f"tc_emu_async_wait(tc_self, {int(spec.in_flight(s))});")
        return
    assert spec.copy is not None
    dst, src = spec.copy(s)
    nbytes = dst.count * dst.buffer.dtype.itemsize
    if nbytes != src.count * src.buffer.dtype.itemsize:
        raise em.fail(f"async copy {spec.name}: source and destination sizes differ")
    out.emit("{")
    out.level += 1
    d = emit_region(em, LaneRegion(dst.buffer, dst.base, dst.count, Access.WRITE))
    r = emit_region(em, LaneRegion(src.buffer, src.base, src.count, Access.READ))
    read, src_ptr = "1", r.ptr
    if src.guard is not None:  # zero-fill form: the source is read only under the guard
        read = f"tc_g{em.fresh()}"
        out.emit(f"const int {read} = ({em.expr(src.guard)}) != 0;")
        src_ptr = f"({read} ? {r.ptr} : (void*)0)"
    out.emit(f"if ({d.ok} && (!{read} || ({r.ok}))) {{")
    out.level += 1
    if r.before:
        out.emit(f"if ({read}) {{ {r.before} }}")
    out.emit(
        f"tc_emu_async_copy(tc_self, {d.ptr}, {src_ptr}, {nbytes}, {d.shadow}, "
        f"{dst.buffer.dtype.itemsize}, {d.site}, {d.base});"
    )
    out.level -= 1
    out.emit("}")
    out.level -= 1
    out.emit("}")

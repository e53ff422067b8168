"""Emit one kernel of a lowered GPU program as the C body one emulated CUDA thread runs.

The body is the kernel's statements as the CUDA emitter writes them — thread-bound loops bind
their variable to the thread's ``threadIdx``/``blockIdx`` (guarded when their extent is below
the launch extent), ``local`` buffers are arrays of the thread, ``shared`` buffers point into
the block's shared memory — with barriers, warp collectives and asynchronous copies as calls
into the emulator runtime (:mod:`.runtime`). With checks on, every access is
bounds-checked against its buffer's flat extent; under race checking, shared accesses update
the block's shadow and ``local`` accesses their array's "initialized" bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    DataType,
    Evaluate,
    Expr,
    For,
    ForKind,
    IntImm,
    Node,
    PrimFunc,
    Stmt,
    Var,
)
from ...lower.gpu_nodes import ThreadSync
from ...lower.gpu_split_host_device import Kernel, dyn_shared_layout
from ...lower.gpu_vectorize import VECTOR_ATTR, is_vector_access, vector_plan
from .._bounds import Bound
from .._names import C_RESERVED, NameTable
from ..base import contains, is_zero
from ..c import CCodegen, _FunctionEmitter, storage_ctype
from ._layout import (
    KernelOptions,
    Site,
    SiteKind,
    SiteTable,
    extra_scalars,
    static_layout,
)
from ._warp import SHARED_SCOPES, emit_async, emit_collective, is_per_thread
from .intrinsics import (
    AsyncIntrinsic,
    LaneIndex,
    LaneResult,
    WarpCollective,
    find_intrinsic,
    lane_elements,
)
from .runtime import STACK_BASE_BYTES

_HW = {"threadIdx.x": "tc_self->tid[0]", "threadIdx.y": "tc_self->tid[1]",
       "threadIdx.z": "tc_self->tid[2]", "blockIdx.x": "tc_blk->bid[0]",
       "blockIdx.y": "tc_blk->bid[1]", "blockIdx.z": "tc_blk->bid[2]"}  # fmt: skip
_STACK_ROUND = 64 * 1024


def _is_per_thread(buf: Buffer) -> bool:
    return is_per_thread(buf.scope)


@dataclass(frozen=True, eq=False)
class _Temp(Expr):
    """A C temporary standing in for an expression (emitter-internal)."""

    dtype: DataType
    text: str


class ThreadEmitter(_FunctionEmitter):
    """Emit ``kernel`` as ``static void <symbol>(tc_emu_thread*, const void*)``."""

    LANG = "emulator"
    UNKNOWN_STMT_HINT = "register it with tilecraft.codegen.emulate.intrinsics"

    def __init__(
        self, cg: CCodegen, kernel: Kernel, symbol: str, function: str, sites: SiteTable,
        options: KernelOptions,
    ) -> None:  # fmt: skip
        pseudo = PrimFunc(kernel.params, kernel.body, name=_safe_name(kernel.name))
        super().__init__(cg, pseudo, symbol)
        self.name = kernel.name
        self.names = NameTable(reserved=(symbol,), keywords=C_RESERVED)
        self.k = kernel
        self.function = function
        self.table = sites
        self.opt = options
        self.launch = dict(zip(("blockIdx.x", "blockIdx.y", "blockIdx.z"), kernel.grid,
                               strict=True))  # fmt: skip
        self.launch.update(zip(("threadIdx.x", "threadIdx.y", "threadIdx.z"), kernel.block,
                               strict=True))  # fmt: skip
        self.extra = extra_scalars(kernel)
        self.offsets, self.static_smem = static_layout(kernel.shared)
        self.local_bytes = 0
        self.fibers = False
        self.barriers = 0
        self.collectives = 0  # warp collective statements so far
        self.counter = 0
        self.aux_names: dict[tuple[int, str], object] = {}

    # the function -------------------------------------------------------------------------
    def args_struct(self, struct: str) -> str:
        """``typedef struct {...} <struct>;`` of the kernel's arguments."""
        fields = []
        for p in (*self.k.params, *self.extra):
            if isinstance(p, Buffer):
                fields.append(f"  {self.storage_type(p.dtype)}* {self.buf(p)};")
            else:
                fields.append(f"  {self.compute_type(p.dtype)} {self.names.get(p, p.name)};")
        fields += [f"  tc_emu_gshadow* {self.aux(b, 'gs')};" for b in self.global_shadowed]
        return "typedef struct {\n" + "\n".join(fields or ["  int unused;"]) + f"\n}} {struct};\n"

    def emit_body(self, struct: str) -> str:
        """The thread body function (call :meth:`args_struct` first)."""
        out = self.out
        out.emit(f"static void {self.symbol}(tc_emu_thread* tc_self, const void* tc_pv) {{")
        out.level += 1
        out.emit(f"const {struct}* tc_p = (const {struct}*)tc_pv;")
        out.emit("tc_emu_block* tc_blk = tc_self->blk;")
        out.emit("(void)tc_p;")
        out.emit("(void)tc_blk;")
        for p in (*self.k.params, *self.extra):
            if isinstance(p, Buffer):
                name, ctype = self.buf(p), self.storage_type(p.dtype) + "*"
            else:
                name, ctype = self.names.get(p, p.name), f"const {self.compute_type(p.dtype)}"
                self.defined.add(id(p))
                self.bounds[id(p)] = self.scalar_bound(p)
            out.emit(f"{ctype} {name} = tc_p->{name};")
            out.emit(f"(void){name};")
        for b in self.global_shadowed:
            out.emit(f"tc_emu_gshadow* const {self.aux(b, 'gs')} = tc_p->{self.aux(b, 'gs')};")
        self.stmt(self.k.body)
        out.level -= 1
        out.emit("}")
        return out.text()

    @property
    def global_shadowed(self) -> list[Buffer]:
        """The global buffers given to the kernel whose accesses the race checker shadows
        (their shadows follow the parameters in the argument struct)."""
        if not self.opt.racecheck:
            return []
        return [p for p in self.k.params if isinstance(p, Buffer) and p.scope == "global"]

    @property
    def stack_bytes(self) -> int:
        """Stack of one fiber: the base allowance plus the thread's arrays and their shadows."""
        need = STACK_BASE_BYTES + 2 * self.local_bytes
        return (need + _STACK_ROUND - 1) // _STACK_ROUND * _STACK_ROUND

    # hooks --------------------------------------------------------------------------------
    def scalar_bound(self, p: Var) -> Bound:
        return (0, None) if p.dtype.is_integer else (None, None)  # as the CUDA emitter

    def loop(self, s: For) -> None:
        if s.kind is ForKind.THREAD_BINDING:
            self.thread_loop(s)
        elif s.kind is ForKind.PARALLEL:
            raise self.fail(
                f"parallel loop {s.loop_var.name!r} inside a kernel; bind it to threads instead"
            )
        else:
            if self.opt.checks and s.annotations.get(VECTOR_ATTR):
                self.vector_checks(s)
            self.serial_loop(s)

    def vector_checks(self, s: For) -> None:
        """Bounds-check each vector access of a vectorized loop as a whole, under the guard the
        CUDA code predicates it with (its lanes then run one by one)."""
        plan = vector_plan(s)
        if plan is None:
            return
        accesses = [
            (ld.buffer, base, guard, SiteKind.VECTOR_LOAD) for ld, base, guard in plan.loads
        ]
        accesses.append((plan.store.buffer, plan.store_base, None, SiteKind.VECTOR_STORE))
        for buf, base, guard, kind in accesses:
            if not is_vector_access(buf):
                continue
            n = self.fresh()
            site = self.site(kind, buf)
            first, last = f"tc_b{n}", f"tc_b{n} + {plan.lanes - 1}"
            check = (
                f"(void)({self._in_range(buf, first, site)} && {self._in_range(buf, last, site)});"
            )
            cond = "1" if guard is None else self.expr(guard)
            self.out.emit(
                f"if ({cond}) {{ const int64_t {first} = (int64_t)({self.expr(base)}); {check} }}"
            )

    def thread_loop(self, s: For) -> None:
        tag = s.thread or ""
        if tag not in self.launch:
            raise self.fail(f"loop {s.loop_var.name!r} is bound to {tag}, which CUDA lacks")
        var = self.names.get(s.loop_var, s.loop_var.name)
        ctype = self.compute_type(s.loop_var.dtype)
        hw = f"(({ctype}){_HW[tag]})"
        value = hw if is_zero(s.min) else f"{self.expr(s.min)} + {hw}"
        launch = self.launch[tag]
        guarded = not _same_const(s.extent, launch) and not (
            not isinstance(launch, IntImm) and s.extent is launch
        )
        self.bind_loop_var(s)
        self.out.emit("{")
        self.out.level += 1
        self.out.emit(f"const {ctype} {var} = {value};")
        if guarded:
            if contains(s.body, _is_sync_point):
                raise self.fail(
                    f"loop {s.loop_var.name!r} on {tag} has extent {s.extent} below the launch "
                    f"extent {launch} and contains a barrier; bind equal extents to {tag}"
                )
            self.out.emit(f"if ({var} < {self.expr(s.extent)}) {{")
            self.nested(s.body)
            self.out.emit("}")
        else:
            self.stmt(s.body)
        self.out.level -= 1
        self.out.emit("}")

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        name = self.buf(buf)
        ctype = storage_ctype(buf.dtype)
        size = buf.shape[0]
        self.out.emit("{")
        self.out.level += 1
        if buf.scope in SHARED_SCOPES:
            offset = self._shared_offset(buf)
            self.out.emit(f"{ctype}* {name} = ({ctype}*)(tc_blk->smem + {offset});")
            if self.opt.racecheck:
                self.out.emit(f"tc_emu_shadow* {self.aux(buf, 'sh')} = tc_blk->shadow + {offset};")
        elif buf.scope == "global":
            raise self.fail(f"global buffer {buf.name!r} allocated inside a kernel")
        elif not isinstance(size, IntImm):
            raise self.fail(
                f"{buf.scope} buffer {buf.name!r} has symbolic size {size}; use "
                "'shared.dyn' for shared memory of run-time size"
            )
        else:
            n = max(size.value, 1) * lane_elements(buf)  # a fragment: this lane's part of each
            self.local_bytes += n * buf.dtype.itemsize + n
            self.out.emit(f"{ctype} {name}[{n}];")
            self.out.emit(f"memset({name}, 0xff, sizeof {name});")
            if self.opt.racecheck:
                init = self.aux(buf, "init")
                self.out.emit(f"uint8_t {init}[{n}];")
                self.out.emit(f"memset({init}, 0, sizeof {init});")
        self.stmt(s.body)
        self.out.level -= 1
        self.out.emit("}")

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, BufferStore):
            self._plain_access(s.buffer)
        if isinstance(s, BufferStore) and self._instrumented(s.buffer):
            self.checked_store(s.buffer, s.indices[0], self.stored(s.buffer.dtype, s.value))
        elif isinstance(s, (Evaluate, For)) and find_intrinsic(s) is not None:
            self.other_stmt(s)  # an intrinsic spelled as a call statement or a loop
        else:
            super().stmt(s)

    def other_stmt(self, s: Stmt) -> None:
        if isinstance(s, ThreadSync):
            self.fibers = True
            site = self.site(SiteKind.BARRIER, ordinal=self.barriers)
            self.barriers += 1
            self.out.emit(f"tc_emu_barrier(tc_self, {site});")
            return
        intrinsic = find_intrinsic(s)
        if isinstance(intrinsic, WarpCollective):
            emit_collective(self, s, intrinsic)
        elif isinstance(intrinsic, AsyncIntrinsic):
            emit_async(self, s, intrinsic)
        else:
            super().other_stmt(s)

    def other_expr(self, e: Expr) -> str:
        if isinstance(e, _Temp):
            return e.text
        if isinstance(e, LaneIndex):
            return "((int32_t)(tc_self->linear % 32))"
        return super().other_expr(e)

    def element(self, e: BufferLoad) -> str:
        buf = e.buffer
        self._plain_access(buf)
        if not self._instrumented(buf):
            return super().element(e)
        n = self.fresh()
        i, ok = f"tc_i{n}", f"tc_k{n}"
        site = self.site(SiteKind.LOAD, buf)
        parts = [f"({{ const int64_t {i} = (int64_t)({self.expr(e.indices[0])});"]
        parts.append(f"const int {ok} = {self._in_range(buf, i, site)};")
        shadow = self.read_shadow(buf, i, site)
        if shadow:
            parts.append(f"if ({ok}) {shadow}")
        parts.append(f"{ok} ? {self.buf(buf)}[{i}] : ({storage_ctype(buf.dtype)})0; }})")
        return " ".join(parts)

    # checked accesses ---------------------------------------------------------------------
    def checked_store(self, buf: Buffer, index: Expr, value: str) -> None:
        """``buf[index] = value`` with the checks of this kernel."""
        n = self.fresh()
        v, i = f"tc_v{n}", f"tc_i{n}"
        name = self.buf(buf)
        site = self.site(SiteKind.STORE, buf)
        self.out.emit("{")
        self.out.level += 1
        self.out.emit(f"const {storage_ctype(buf.dtype)} {v} = {value};")
        self.out.emit(f"const int64_t {i} = (int64_t)({self.expr(index)});")
        self.out.emit(f"if ({self._in_range(buf, i, site)}) {{")
        self.out.level += 1
        if self.opt.racecheck and buf.scope in SHARED_SCOPES:
            same = f"memcmp(&{name}[{i}], &{v}, sizeof {v}) == 0"
            shadow = f"{self.aux(buf, 'sh')} + {i} * {buf.dtype.itemsize}"
            self.out.emit(f"tc_emu_shared_write(tc_self, {shadow}, {site}, {i}, {same});")
        elif self.opt.racecheck and _is_per_thread(buf):
            self.out.emit(f"{self.aux(buf, 'init')}[{i}] = 1;")
        elif self._global_shadow(buf):
            same = f"memcmp(&{name}[{i}], &{v}, sizeof {v}) == 0"
            shadow = f"{self.aux(buf, 'gs')} + {i}"
            self.out.emit(f"tc_emu_global_write(tc_self, {shadow}, {site}, {i}, {same});")
        self.out.emit(f"{name}[{i}] = {v};")
        self.out.level -= 1
        self.out.emit("}")
        self.out.level -= 1
        self.out.emit("}")

    def _plain_access(self, buf: Buffer) -> None:
        if lane_elements(buf) != 1:
            raise self.fail(
                f"{buf.scope} buffer {buf.name!r} holds warp-distributed fragments; only warp "
                "operations may access it"
            )

    def _instrumented(self, buf: Buffer) -> bool:
        del buf  # every buffer is checked when checks are on (racecheck implies them)
        return self.opt.checks

    def _in_range(self, buf: Buffer, i: str, site: int) -> str:
        if not self.opt.checks:
            return "1"
        return f"tc_emu_in(tc_self, {site}, {i}, (int64_t)({self.expr(buf.shape[0])}))"

    def read_shadow(self, buf: Buffer, i: str, site: int) -> str:
        """The race check of reading ``buf[i]`` (C statement; empty when unchecked)."""
        if not self.opt.racecheck:
            return ""
        if buf.scope in SHARED_SCOPES:
            shadow = f"{self.aux(buf, 'sh')} + {i} * {buf.dtype.itemsize}"
            return f"tc_emu_shared_read(tc_self, {shadow}, {site}, {i});"
        if _is_per_thread(buf):
            return f"tc_emu_local_read(tc_self, {self.aux(buf, 'init')}, {site}, {i});"
        if self._global_shadow(buf):
            return f"tc_emu_global_read(tc_self, {self.aux(buf, 'gs')} + {i}, {site}, {i});"
        return ""

    def global_write_shadow(self, buf: Buffer, i: str, site: int) -> str:
        """The race check of storing ``buf[i]`` of a global buffer (C; empty when unchecked)."""
        if not self._global_shadow(buf):
            return ""
        return f"tc_emu_global_write(tc_self, {self.aux(buf, 'gs')} + {i}, {site}, {i}, 0);"

    def _global_shadow(self, buf: Buffer) -> bool:
        return any(b is buf for b in self.global_shadowed)

    def store_result(self, op: LaneResult, tmp: str) -> None:
        """Store a collective's result for this lane (``tmp`` holds it, compute type)."""
        value = _Temp(op.buffer.dtype, tmp)
        if self._instrumented(op.buffer):
            self.checked_store(op.buffer, op.index, self.stored(op.buffer.dtype, value))
        else:
            super().stmt(BufferStore(op.buffer, value, (op.index,)))

    # helpers ------------------------------------------------------------------------------
    def fresh(self) -> int:
        """A new number for C temporaries."""
        self.counter += 1
        return self.counter

    def aux(self, buf: Buffer, what: str) -> str:
        """The C name of ``buf``'s shadow pointer (``sh``) or initialized bytes (``init``)."""
        key = (id(buf), what)
        holder = self.aux_names.setdefault(key, object())
        return self.names.get(holder, f"tc_{what}_{self.buf(buf)}")

    def site(self, kind: SiteKind, buf: Buffer | None = None, *, ordinal: int = 0,
              intrinsic: str = "") -> int:  # fmt: skip
        """The number of a site of this kernel."""
        name, scope = (buf.name, buf.scope) if buf is not None else ("", "")
        return self.table.number(
            Site(self.function, self.k.name, kind, name, scope, ordinal, intrinsic)
        )

    def _shared_offset(self, buf: Buffer) -> str:
        if buf.scope == "shared":
            got = self.offsets.get(id(buf))
            if got is None:
                raise self.fail(f"shared buffer {buf.name!r} is not among the kernel's")
            return str(got)
        offsets, _ = dyn_shared_layout(self.k.dyn_shared)
        pos = next((i for i, b in enumerate(self.k.dyn_shared) if b is buf), None)
        if pos is None:
            raise self.fail(f"shared.dyn buffer {buf.name!r} is not among the kernel's")
        return f"{self.static_smem} + (int64_t)({self.expr(offsets[pos])})"


def _is_sync_point(n: Node) -> bool:
    if isinstance(n, ThreadSync):
        return True
    return isinstance(n, Stmt) and isinstance(find_intrinsic(n), WarpCollective)


def _same_const(a: Expr, b: Expr) -> bool:
    return isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value


def _safe_name(name: str) -> str:
    return name if name.isidentifier() else "kernel"

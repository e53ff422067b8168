"""Split a lowered GPU function into device kernels and the host steps that launch them.

Before: a lowered PrimFunc (no blocks, flat buffers) whose work sits in thread-bound loop
nests (loops bound to ``blockIdx.*``/``threadIdx.*``), possibly inside ``Allocate`` nodes of
global-scope intermediates.
After:  a :class:`GPUProgram`: one :class:`Kernel` per outermost thread-bound loop nest, with
its parameters (the buffers and scalars it uses), launch dimensions (the extents bound to each
hardware index; symbolic extents are evaluated by the host at launch time) and its shared
memory, plus the host steps (allocate a global temporary, launch a kernel, free) in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LowerError
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    ForKind,
    IntImm,
    LetStmt,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    dtype,
    post_order_visit,
    structural_equal,
)
from .gpu_nodes import WarpShuffle

int32 = dtype("int32")

GRID_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
BLOCK_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class Kernel:
    """One ``__global__`` function and how to launch it.

    Attributes
    ----------
    name
        The kernel symbol (``<func>_kernel<k>``).
    params
        Kernel arguments in order: global buffers, then scalar variables.
    body
        The kernel body; thread-bound loops stay in it and bind their variables to the
        hardware indices.
    grid, block
        Launch extents per dimension (x, y, z); integer constants or host-side expressions
        of the scalar parameters.
    shared
        Static shared-memory buffers allocated in the kernel (``Allocate`` nodes in ``body``).
    dyn_shared
        Dynamic shared-memory buffers (scope ``shared.dyn``), laid out one after another.
    """

    name: str
    params: tuple[Buffer | Var, ...]
    body: Stmt
    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    shared: tuple[Buffer, ...] = ()
    dyn_shared: tuple[Buffer, ...] = ()

    @property
    def threads_per_block(self) -> int | None:
        """Product of the ``threadIdx`` extents when they are constant."""
        total = 1
        for e in self.block:
            if not isinstance(e, IntImm):
                return None
            total *= e.value
        return total


@dataclass(frozen=True)
class HostAlloc:
    """Allocate a global-scope temporary on the device."""

    buffer: Buffer


@dataclass(frozen=True)
class HostFree:
    """Free a temporary allocated by :class:`HostAlloc`."""

    buffer: Buffer


@dataclass(frozen=True)
class HostLaunch:
    """Launch ``kernel`` (arguments: its params, resolved by identity)."""

    kernel: Kernel


HostStep = HostAlloc | HostFree | HostLaunch


@dataclass(frozen=True)
class GPUProgram:
    """A lowered GPU function: its kernels and the host steps running them in order."""

    func: PrimFunc
    kernels: tuple[Kernel, ...]
    steps: tuple[HostStep, ...] = field(default=())


def _is_gpu_loop(s: Stmt) -> bool:
    return (
        isinstance(s, For)
        and s.kind is ForKind.THREAD_BINDING
        and ((s.thread or "").startswith(("blockIdx", "threadIdx")))
    )


def launch_extent(loops: list[For], tag: str, kname: str) -> Expr:
    """The launch extent of ``tag``: the largest constant extent, or the one symbolic extent."""
    exts = [lp.extent for lp in loops if lp.thread == tag]
    if not exts:
        return _one()
    if all(isinstance(e, IntImm) for e in exts):
        return max(exts, key=lambda e: e.value)  # type: ignore[attr-defined]
    first = exts[0]
    if not all(structural_equal(first, e) for e in exts[1:]):
        raise LowerError(
            f"GPU lowering {kname}: loops bound to {tag} have different symbolic extents; "
            "bind loops of equal extent to one hardware index"
        )
    return first


def _one() -> Expr:
    return IntImm(int32, 1)


class _KernelAnalysis:
    """Collect thread loops, used buffers/vars and definitions inside one kernel body."""

    def __init__(self) -> None:
        self.loops: list[For] = []
        self.buffers: dict[int, Buffer] = {}
        self.allocated: dict[int, Buffer] = {}
        self.defined: set[int] = set()
        self.vars: dict[int, Var] = {}

    def run(self, body: Stmt) -> None:
        def fn(n: Node) -> None:
            if isinstance(n, For):
                self.defined.add(id(n.loop_var))
                if n.kind is ForKind.THREAD_BINDING:
                    self.loops.append(n)
            elif isinstance(n, LetStmt):
                self.defined.add(id(n.var))
            elif isinstance(n, Allocate):
                self.allocated[id(n.buffer)] = n.buffer
            elif isinstance(n, (BufferLoad, BufferStore, WarpShuffle)):
                self.buffers[id(n.buffer)] = n.buffer
            elif isinstance(n, Var):
                self.vars[id(n)] = n

        post_order_visit(body, fn)


def make_kernel(name: str, body: Stmt, func: PrimFunc, temps: list[Buffer]) -> Kernel:
    """Build the :class:`Kernel` for thread-bound nest ``body`` of ``func``."""
    ana = _KernelAnalysis()
    ana.run(body)
    for b in ana.buffers.values():
        if b.scope == "global" and id(b) in ana.allocated:
            raise LowerError(
                f"GPU lowering {name}: global buffer {b.name!r} is allocated inside a kernel; "
                "allocate intermediates in 'shared' or 'local' scope, or outside thread loops"
            )
    order = [p for p in func.params if isinstance(p, Buffer)] + temps
    used_globals = [b for b in order if id(b) in ana.buffers]
    missing = [
        b.name
        for b in ana.buffers.values()
        if b.scope == "global" and all(b is not u for u in used_globals)
    ]
    if missing:
        raise LowerError(f"GPU lowering {name}: global buffers {missing} are not parameters")
    scalars = [v for v in ana.vars.values() if id(v) not in ana.defined]
    param_order = {id(p): i for i, p in enumerate(func.params)}
    for v in scalars:
        if id(v) not in param_order:
            raise LowerError(
                f"GPU lowering {name}: variable {v.name!r} is used in the kernel but is not a "
                "parameter of the function (host-side loops around kernels are not supported)"
            )
    scalars.sort(key=lambda v: param_order[id(v)])
    gx, gy, gz = (_extent_or_one(ana.loops, t, name) for t in GRID_TAGS)
    tx, ty, tz = (_extent_or_one(ana.loops, t, name) for t in BLOCK_TAGS)
    shared = tuple(b for b in ana.allocated.values() if b.scope == "shared")
    dyn = tuple(b for b in ana.allocated.values() if b.scope == "shared.dyn")
    return Kernel(name, (*used_globals, *scalars), body, (gx, gy, gz), (tx, ty, tz), shared, dyn)


def _extent_or_one(loops: list[For], tag: str, kname: str) -> Expr:
    if not any(lp.thread == tag for lp in loops):
        return _one()
    return launch_extent(loops, tag, kname)


class _Splitter:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.kernels: list[Kernel] = []
        self.steps: list[HostStep] = []
        self.temps: list[Buffer] = []

    def host(self, s: Stmt, wrappers: tuple[Buffer, ...] = ()) -> None:
        if isinstance(s, SeqStmt):
            if wrappers:
                self._wrapped_error(wrappers[0])
            for c in s.stmts:
                self.host(c)
        elif isinstance(s, Allocate) and s.buffer.scope == "global":
            self.temps.append(s.buffer)
            self.steps.append(HostAlloc(s.buffer))
            self.host(s.body, wrappers)
            self.steps.append(HostFree(s.buffer))
        elif isinstance(s, Allocate):
            self.host(s.body, (*wrappers, s.buffer))
        elif _is_gpu_loop(s):
            body: Stmt = s
            for buf in reversed(wrappers):
                body = Allocate(buf, body)
            k = make_kernel(
                f"{self.func.name}_kernel{len(self.kernels)}", body, self.func, self.temps
            )
            self.kernels.append(k)
            self.steps.append(HostLaunch(k))
        else:
            what = type(s).__name__
            if isinstance(s, For):
                what = f"loop {s.loop_var.name!r} ({s.kind.value})"
            raise LowerError(
                f"GPU lowering {self.func.name}: {what} runs outside every thread-bound loop; "
                "a CUDA function's work must sit under loops bound to blockIdx/threadIdx "
                "(bind the outer loops, or build for the CPU)"
            )

    def _wrapped_error(self, buf: Buffer) -> None:
        raise LowerError(
            f"GPU lowering {self.func.name}: {buf.scope} buffer {buf.name!r} is shared by "
            "several kernels; its scope only lives inside one kernel"
        )


def split_host_device(func: PrimFunc) -> GPUProgram:
    """Split lowered ``func`` into kernels and host steps (see the module docstring).

    Raises
    ------
    LowerError
        When work lies outside thread-bound loops, or a shared/local buffer spans kernels.
    """
    sp = _Splitter(func)
    sp.host(func.body)
    if not sp.kernels:
        raise LowerError(
            f"GPU lowering {func.name}: no loop is bound to blockIdx/threadIdx; schedule the "
            "function for the GPU (bind loops) or build it for the CPU"
        )
    return GPUProgram(func, tuple(sp.kernels), tuple(sp.steps))


def dyn_shared_layout(buffers: tuple[Buffer, ...]) -> tuple[list[Expr], Expr]:
    """Byte offsets of ``shared.dyn`` buffers laid out in order and the total.

    Each buffer starts 32-byte aligned (the base is declared so): WMMA fragment loads and
    stores need 256-bit aligned addresses; ``cp.async``, ``ldmatrix`` and vector accesses
    16-byte ones."""
    offsets: list[Expr] = []
    total: Expr = IntImm(int32, 0)
    for b in buffers:
        offsets.append(total)
        size = b.shape[0] if b.shape else IntImm(int32, 1)
        nbytes = size * b.dtype.itemsize
        padded = (nbytes + 31) // 32 * 32
        if isinstance(total, IntImm) and total.value == 0:
            total = padded
        else:
            total = total + padded
        total = _fold(total)
    return offsets, total


def _fold(e: Expr) -> Expr:
    from ..arith import Analyzer

    return Analyzer().simplify(e)

"""Reject GPU kernels that exceed the target's per-block resources.

Before/after: a :class:`~.gpu_split_host_device.GPUProgram` (unchanged). Each kernel is checked
against the target's limits — threads per block (and per dimension), static shared memory,
total shared memory (static plus constant-size dynamic), and an estimate of registers per
thread from its ``local`` arrays — and a violation raises :class:`~tilecraft.errors.LowerError`
naming the kernel, the limit and the value.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LowerError
from ..ir import Allocate, IntImm, Node, SeqStmt, Stmt, post_order_visit
from ..ir.visitor import iter_children
from ..target import GPUInfo, Target
from .gpu_split_host_device import GPUProgram, Kernel, dyn_shared_layout

STATIC_SHARED_LIMIT = 48 * 1024
"""Bytes of statically declared ``__shared__`` memory any CUDA kernel may use."""
_DIM_LIMITS = {"threadIdx.x": 1024, "threadIdx.y": 1024, "threadIdx.z": 64}
_BASE_REGISTERS = 16  # indices, pointers and loop counters every kernel keeps in registers


@dataclass(frozen=True)
class KernelResources:
    """Static estimate of one kernel's resource use."""

    threads: int | None
    static_shared: int
    dyn_shared: int | None
    local_words: int

    @property
    def registers_estimate(self) -> int:
        """Registers per thread: local arrays (one per 32-bit word) plus a base allowance."""
        return self.local_words + _BASE_REGISTERS


def kernel_resources(kernel: Kernel) -> KernelResources:
    """Threads, shared bytes and local 32-bit words per thread of ``kernel`` (the most
    ``local`` words live at one point: arrays of statements that run one after the other,
    such as a software pipeline's steady loop and its epilogue, are not live together)."""
    static = 0

    def fn(n: Node) -> None:
        nonlocal static
        if isinstance(n, Allocate) and n.buffer.scope == "shared":
            static += _constant_bytes(n)

    post_order_visit(kernel.body, fn)
    _, total = dyn_shared_layout(kernel.dyn_shared)
    dyn = total.value if isinstance(total, IntImm) else None
    return KernelResources(kernel.threads_per_block, static, dyn, _peak_local_words(kernel.body))


def _constant_bytes(alloc: Allocate) -> int:
    """Bytes of a constant-size allocation (0 for a symbolic one)."""
    extent = alloc.buffer.shape[0]
    return extent.value * alloc.buffer.dtype.itemsize if isinstance(extent, IntImm) else 0


def _peak_local_words(s: Stmt) -> int:
    """The most 32-bit words of ``local`` arrays live at one point of ``s``."""
    if isinstance(s, SeqStmt):
        return max((_peak_local_words(c) for c in s.stmts), default=0)
    here = 0
    if isinstance(s, Allocate) and s.buffer.scope == "local":
        here = (_constant_bytes(s) + 3) // 4
    inner = [_peak_local_words(c) for c in iter_children(s) if isinstance(c, Stmt)]
    return here + max(inner, default=0)


def _limit_error(
    kernel: Kernel, target: Target, what: str, value: int, limit: str, limit_value: int, hint: str
) -> LowerError:
    return LowerError(
        f"VerifyGPUResources {kernel.name}: {what} is {value}, over the target's {limit} = "
        f"{limit_value} ({target}); {hint}"
    )


def verify_kernel(kernel: Kernel, target: Target) -> KernelResources:
    """Check ``kernel`` against ``target``'s limits; return its resources.

    Raises
    ------
    LowerError
        Naming the limit that is exceeded and the kernel's value.
    """
    info = target.gpu or GPUInfo(target.arch)
    res = kernel_resources(kernel)
    tags = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
    for tag, ext in zip(tags, kernel.block, strict=True):
        if isinstance(ext, IntImm) and ext.value > _DIM_LIMITS[tag]:
            raise _limit_error(
                kernel,
                target,
                f"the extent of {tag}",
                ext.value,
                f"max {tag} extent",
                _DIM_LIMITS[tag],
                "split the loop",
            )
    if res.threads is not None and res.threads > info.max_threads_per_block:
        raise _limit_error(
            kernel,
            target,
            "threads per block",
            res.threads,
            "max_threads_per_block",
            info.max_threads_per_block,
            "bind smaller extents to threadIdx",
        )
    if res.static_shared > STATIC_SHARED_LIMIT:
        raise _limit_error(
            kernel,
            target,
            "static shared memory (bytes)",
            res.static_shared,
            "static shared-memory limit",
            STATIC_SHARED_LIMIT,
            "use smaller tiles or the 'shared.dyn' scope",
        )
    total = res.static_shared + (res.dyn_shared or 0)
    if total > info.max_shared_memory_per_block_optin:
        raise _limit_error(
            kernel,
            target,
            "shared memory per block (bytes)",
            total,
            "max_shared_memory_per_block_optin",
            info.max_shared_memory_per_block_optin,
            "use smaller tiles",
        )
    regs = res.registers_estimate
    if regs > info.max_registers_per_thread:
        raise _limit_error(
            kernel,
            target,
            "estimated registers per thread",
            regs,
            "max_registers_per_thread",
            info.max_registers_per_thread,
            "use smaller local accumulators",
        )
    if res.threads is not None and regs * res.threads > info.registers_per_block:
        raise _limit_error(
            kernel,
            target,
            "estimated registers per block",
            regs * res.threads,
            "registers_per_block",
            info.registers_per_block,
            "use fewer threads or smaller local accumulators",
        )
    return res


def verify_program(program: GPUProgram, target: Target) -> dict[str, KernelResources]:
    """Verify every kernel of ``program`` (see :func:`verify_kernel`)."""
    return {k.name: verify_kernel(k, target) for k in program.kernels}

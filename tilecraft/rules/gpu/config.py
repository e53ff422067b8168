"""The GPU machine the rules schedule for: one :class:`GPUArch` per CUDA architecture.

Every GPU rule's ``Config.for_target(target)`` starts from :func:`gpu_arch`: the facts of the
target's CUDA architecture (warp size, threads per block, shared memory per block by default
and by opt-in, registers, whether tensor cores and ``cp.async`` exist). Presets exist for
``sm_70`` (V100), ``sm_75`` (T4), ``sm_80`` (A100), ``sm_86`` (A10/RTX 30), ``sm_89`` (L4/RTX
40) and ``sm_90`` (H100/H200). An arch-specific suffix names the same machine:
``sm_90a`` is ``sm_90``. An architecture without a preset uses the nearest lower one (``sm_87``
is described as ``sm_86``, ``sm_100`` as ``sm_90``): newer GPUs keep the older limits and
instructions, so a schedule for the lower preset stays valid. An architecture below
``sm_70`` has no preset: :func:`gpu_arch` returns None and every :class:`GPUArchRule` declines
with :func:`unsupported_reason`.

Where the target names a device (``Target("a100")``), the device's own limits
(:class:`~tilecraft.target.GPUInfo`: opt-in shared memory, SM count) take precedence over
the architecture's typical ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...target import Target
from ..base import GPURule

KIB = 1024


@dataclass(frozen=True)
class GPUArch:
    """What the rules need to know about one CUDA architecture.

    Attributes
    ----------
    arch
        The preset's name (``"sm_80"``); an unknown arch gets its nearest lower preset.
    compute_capability
        ``80`` for ``sm_80``.
    warp_size
        Threads per warp.
    max_threads_per_block
        The launch limit on threads per block.
    max_threads_per_sm
        Resident threads per SM (occupancy: blocks per SM times threads per block).
    shared_per_block
        Static shared memory one block may declare (48 KiB on every architecture).
    shared_per_block_optin
        Dynamic shared memory one block may use after opting in.
    registers_per_sm, registers_per_block, max_registers_per_thread
        The register file and its per-block and per-thread limits.
    tensor_cores
        Whether the architecture has tensor cores (WMMA on sm_70/75, mma.sync on sm_80+).
    cp_async
        Whether asynchronous global-to-shared copies (``cp.async``, sm_80+) exist.
    sm_count
        SMs of the device the target names; 0 when it names only an architecture.
    """

    arch: str
    compute_capability: int
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    shared_per_block: int = 48 * KIB
    shared_per_block_optin: int = 48 * KIB
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    tensor_cores: bool = False
    cp_async: bool = False
    sm_count: int = 0


ARCH_PRESETS: dict[int, GPUArch] = {
    70: GPUArch("sm_70", 70, shared_per_block_optin=96 * KIB, tensor_cores=True),
    75: GPUArch("sm_75", 75, max_threads_per_sm=1024, shared_per_block_optin=64 * KIB,
                tensor_cores=True),
    80: GPUArch("sm_80", 80, shared_per_block_optin=163 * KIB, tensor_cores=True,
                cp_async=True),
    86: GPUArch("sm_86", 86, max_threads_per_sm=1536, shared_per_block_optin=99 * KIB,
                tensor_cores=True, cp_async=True),
    89: GPUArch("sm_89", 89, max_threads_per_sm=1536, shared_per_block_optin=99 * KIB,
                tensor_cores=True, cp_async=True),
    90: GPUArch("sm_90", 90, shared_per_block_optin=227 * KIB, tensor_cores=True,
                cp_async=True),
}  # fmt: skip
"""The presets by compute capability (limits from the CUDA programming guide's table)."""


def compute_capability(arch: str) -> int | None:
    """``90`` for ``"sm_90"`` and ``"sm_90a"``; None for a string that is not ``sm_<digits>``."""
    if not arch.startswith("sm_"):
        return None
    digits = arch[3:].rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits) if digits.isdigit() else None


def _preset(cc: int | None) -> GPUArch | None:
    """The preset of ``cc``, else the nearest lower one; None below the oldest."""
    if cc is None:
        return None
    lower = [c for c in ARCH_PRESETS if c <= cc]
    return ARCH_PRESETS[max(lower)] if lower else None


def gpu_arch(target: Target | str) -> GPUArch | None:
    """The machine description of a CUDA target (or of an arch string such as ``"sm_90a"``).

    Parameters
    ----------
    target
        A CUDA :class:`~tilecraft.target.Target`, or an arch string.

    Returns
    -------
    GPUArch or None
        The preset of the target's arch (the nearest lower preset for an arch without one,
        with the device's own limits where the target names a device); None for a CPU
        target or an arch older than ``sm_70``.
    """
    if isinstance(target, str):
        return _preset(compute_capability(target))
    if not target.is_gpu or target.gpu is None:
        return None
    base = _preset(compute_capability(target.arch))
    if base is None:
        return None
    dev = target.gpu
    return replace(
        base,
        shared_per_block_optin=max(
            base.shared_per_block_optin, dev.max_shared_memory_per_block_optin
        ),
        max_threads_per_block=min(base.max_threads_per_block, dev.max_threads_per_block),
        max_registers_per_thread=min(base.max_registers_per_thread, dev.max_registers_per_thread),
        sm_count=dev.sm_count if dev.sm_count > 1 else 0,
    )


def unsupported_reason(target: object) -> str:
    """Why the GPU rules do not schedule for ``target``."""
    if isinstance(target, Target) and target.is_gpu:
        oldest = min(ARCH_PRESETS)
        return f"no GPU preset for {target.arch} (the oldest is sm_{oldest})"
    return f"a GPU rule; the target is {target}"


class GPUArchRule(GPURule):
    """A GPU rule whose numbers come from :func:`gpu_arch`: it declines targets without one."""

    def is_target_available(self, target: Target) -> bool:
        """True for CUDA targets of sm_70 or newer."""
        return gpu_arch(target) is not None

    def unavailable_reason(self, target: object) -> str:
        """See :func:`unsupported_reason`."""
        return unsupported_reason(target)


def require_arch(target: Target) -> GPUArch:
    """:func:`gpu_arch` for a target a :class:`GPUArchRule` accepted (its ``Config``'s use)."""
    arch = gpu_arch(target)
    return arch if arch is not None else ARCH_PRESETS[max(ARCH_PRESETS)]

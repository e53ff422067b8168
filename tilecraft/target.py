"""Compilation targets: the host CPU and NVIDIA GPUs, with presets and a current target.

``Target("cpu")`` describes the host (ISA features, core count); ``Target("cuda -arch=sm_90")``
or a preset name (``"h100"``, ``"h200"``, ``"a100"``, ``"l4"``, ``"rtx4090"``) describes a GPU.
``with target:`` makes a target current for passes that need one (:func:`Target.current`).
"""

from __future__ import annotations

import functools
import os
import platform
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from .errors import TilecraftError


class TargetError(TilecraftError):
    """A target string could not be understood."""


@dataclass(frozen=True)
class GPUInfo:
    """Resource limits of one NVIDIA GPU model."""

    arch: str
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024
    max_shared_memory_per_block_optin: int = 48 * 1024
    registers_per_block: int = 65536
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    sm_count: int = 1
    l2_bytes: int = 0


GPU_PRESETS: dict[str, GPUInfo] = {
    "h100": GPUInfo("sm_90", max_shared_memory_per_block_optin=227 * 1024, sm_count=132,
                    l2_bytes=50 * 2**20),
    "h200": GPUInfo("sm_90", max_shared_memory_per_block_optin=227 * 1024, sm_count=132,
                    l2_bytes=50 * 2**20),
    "a100": GPUInfo("sm_80", max_shared_memory_per_block_optin=163 * 1024, sm_count=108,
                    l2_bytes=40 * 2**20),
    "l4": GPUInfo("sm_89", max_shared_memory_per_block_optin=99 * 1024, sm_count=58,
                  l2_bytes=48 * 2**20),
    "rtx4090": GPUInfo("sm_89", max_shared_memory_per_block_optin=99 * 1024, sm_count=128,
                       l2_bytes=72 * 2**20),
}  # fmt: skip

_ARCH_DEFAULT_PRESET = {"sm_90": "h100", "sm_80": "a100", "sm_89": "l4"}


def _host_features() -> tuple[str, ...]:
    feats: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    feats.update(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    wanted = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "f16c",
              "neon", "asimd", "sve")  # fmt: skip
    return tuple(sorted(f for f in feats if f in wanted))


CACHE_FALLBACK_BYTES = (32 * 1024, 1024 * 1024, 8 * 1024 * 1024)
"""(L1d, L2, L3) sizes assumed when the host does not report its caches."""


def _parse_cache_size(text: str) -> int | None:
    """Bytes of a sysfs cache size such as ``"32K"``, ``"2M"`` or ``"1024"``; None if unreadable."""
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in ("K", "M", "G") else text
    return int(digits) * scale if digits.isdigit() and int(digits) > 0 else None


@functools.lru_cache(maxsize=4)
def host_cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> tuple[int, int, int]:
    """(L1 data, L2, L3) cache sizes in bytes of the first CPU, from Linux sysfs.

    A level the host does not report (another OS, a container hiding sysfs, a CPU without an
    L3) takes its value from :data:`CACHE_FALLBACK_BYTES`; the sizes are per cache instance,
    so the L3 is usually shared by several cores.
    """
    found: dict[int, int] = {}
    try:
        entries = sorted(Path(root).glob("index*"))
        for entry in entries:
            level = (entry / "level").read_text(encoding="utf-8").strip()
            kind = (entry / "type").read_text(encoding="utf-8").strip()
            size = _parse_cache_size((entry / "size").read_text(encoding="utf-8"))
            if level.isdigit() and kind in ("Data", "Unified") and size is not None:
                found.setdefault(int(level), size)
    except (OSError, ValueError):
        found = {}
    l1, l2, l3 = (found.get(n, CACHE_FALLBACK_BYTES[n - 1]) for n in (1, 2, 3))
    return l1, l2, l3


@dataclass(frozen=True)
class Target:
    """A compilation target parsed from a string such as ``"cpu"`` or ``"cuda -arch=sm_90"``.

    Attributes
    ----------
    kind
        ``"cpu"`` or ``"cuda"``.
    arch
        ``"sm_90"`` etc. for CUDA; the machine name (``"x86_64"``) for the CPU.
    gpu
        Resource limits for CUDA targets (None on CPU).
    features
        Host ISA features for CPU targets (``"avx2"``, ``"fma"``...).
    num_cores
        Cores available to this process for CPU targets.
    l1d_bytes, l2_bytes, l3_bytes
        Data cache sizes per instance for CPU targets (:func:`host_cache_sizes`); 0 for CUDA
        (see ``gpu.l2_bytes``).
    """

    spec: str
    kind: str = field(init=False)
    arch: str = field(init=False)
    gpu: GPUInfo | None = field(init=False)
    features: tuple[str, ...] = field(init=False)
    num_cores: int = field(init=False)
    l1d_bytes: int = field(init=False)
    l2_bytes: int = field(init=False)
    l3_bytes: int = field(init=False)

    _stack: ClassVar[threading.local] = threading.local()

    def __post_init__(self) -> None:
        text = self.spec.strip() if isinstance(self.spec, str) else ""
        if not text:
            raise TargetError(f"Target: expected a target string, got {self.spec!r}")
        words = text.split()
        head, opts = words[0].lower(), words[1:]
        options = {}
        for opt in opts:
            if not opt.startswith("-") or "=" not in opt:
                raise TargetError(f"Target {text!r}: options look like -key=value, got {opt!r}")
            k, v = opt.lstrip("-").split("=", 1)
            options[k] = v
        if head in ("cpu", "llvm", "c"):
            kind, arch, gpu = "cpu", platform.machine() or "unknown", None
            feats = _host_features()
            cores = (
                len(os.sched_getaffinity(0))
                if hasattr(os, "sched_getaffinity")
                else (os.cpu_count() or 1)
            )
        elif head == "cuda" or head in GPU_PRESETS:
            preset = head if head in GPU_PRESETS else None
            arch = options.get("arch") or (GPU_PRESETS[preset].arch if preset else "sm_90")
            if not arch.startswith("sm_") or not arch[3:].isdigit():
                raise TargetError(f"Target {text!r}: -arch must look like sm_90, got {arch!r}")
            name = preset or _ARCH_DEFAULT_PRESET.get(arch)
            base = GPU_PRESETS[name] if name else GPUInfo(arch)
            gpu = GPUInfo(**{**base.__dict__, "arch": arch})
            kind, feats, cores = "cuda", (), 0
        else:
            raise TargetError(
                f"Target: unknown target {head!r}; expected 'cpu', 'cuda -arch=sm_XY' or one of "
                f"{sorted(GPU_PRESETS)}"
            )
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "arch", arch)
        object.__setattr__(self, "gpu", gpu)
        object.__setattr__(self, "features", feats)
        object.__setattr__(self, "num_cores", cores)
        caches = host_cache_sizes() if kind == "cpu" else (0, 0, 0)
        object.__setattr__(self, "l1d_bytes", caches[0])
        object.__setattr__(self, "l2_bytes", caches[1])
        object.__setattr__(self, "l3_bytes", caches[2])

    @property
    def is_gpu(self) -> bool:
        """True for CUDA targets."""
        return self.kind == "cuda"

    @property
    def simd_bits(self) -> int:
        """Widest SIMD register of a CPU target in bits (512 AVX-512, 256 AVX2/AVX, else 128).

        For CUDA targets this is 0.
        """
        if self.is_gpu:
            return 0
        if "avx512f" in self.features:
            return 512
        if "avx2" in self.features or "avx" in self.features:
            return 256
        return 128

    @property
    def warp_size(self) -> int:
        """Threads per warp of a CUDA target (1 for the CPU: no lockstep groups)."""
        return self.gpu.warp_size if self.gpu is not None else 1

    @staticmethod
    def presets() -> list[str]:
        """Names accepted as GPU preset targets (``Target("h100")``)."""
        return sorted(GPU_PRESETS)

    @property
    def compute_capability(self) -> int:
        """``90`` for sm_90 (0 for the CPU)."""
        return int(self.arch[3:]) if self.is_gpu else 0

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda -arch={self.arch}"

    def __enter__(self) -> Target:
        stack = getattr(Target._stack, "items", None)
        if stack is None:
            stack = Target._stack.items = []
        stack.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        Target._stack.items.pop()

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The innermost target of an enclosing ``with target:`` block."""
        stack = getattr(Target._stack, "items", None)
        if stack:
            return stack[-1]  # type: ignore[no-any-return]
        if not allow_none:
            raise TargetError("no current target: use `with tc.Target(...):`")
        return None


def as_target(value: str | Target | None) -> Target:
    """Coerce a string (or None: the current target, else the CPU) to a :class:`Target`."""
    if isinstance(value, Target):
        return value
    if value is None:
        return Target.current() or Target("cpu")
    return Target(value)

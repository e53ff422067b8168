"""Compilation targets: CPUs (the host, a preset, or described by options) and NVIDIA GPUs.

``Target("cpu")`` is the host: ISA features, cores and caches from ``/proc/cpuinfo`` and sysfs
(``TILECRAFT_HOST_TARGET``, read by :mod:`tilecraft.config`, gives it a CPU preset's ISA).
Options describe a machine, LLVM-style: ``"cpu -mcpu=x86-64-v3"`` (the preset ``"avx2"``),
``"cpu -mcpu=native -mattr=-avx512f"``, ``"cpu -mattr=+avx2,+fma -num-cores=8 -l2-bytes=1M"``;
the host fills only what is not given (cores, caches, and the ISA when neither ``-mcpu`` nor
``-mattr`` is); an unknown option is a :class:`TargetError`. CPU presets (:data:`CPU_PRESETS`)
fix the ISA and typical caches. ``Target("cuda -arch=sm_90")`` (or ``sm_90a``, a preset such as
``"h100"``) describes a GPU. ``Target(str(t)) == t``; ``with target:`` makes it current.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from . import config
from .errors import TilecraftError

_LOG = logging.getLogger("tilecraft")


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
DEFAULT_CUDA_ARCH = "sm_90"
"""The arch of ``Target("cuda")`` (logged at INFO on the ``"tilecraft"`` logger when chosen)."""

X86_FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c",
                "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd")  # fmt: skip
"""The x86 ISA features a CPU target knows (``/proc/cpuinfo`` names), in ISA-level order."""
ARM_FEATURES = ("neon", "sve")
"""The AArch64 ISA features a CPU target knows (``asimd`` in ``/proc/cpuinfo`` is ``neon``)."""
_FAMILY_FEATURES = {"x86_64": X86_FEATURES, "aarch64": ARM_FEATURES}
_LLVM_NAME = {"sse4_2": "sse4.2"}  # -mattr spelling where it differs from the feature name
_ALIASES = {"sse4.2": "sse4_2", "asimd": "neon"}  # accepted in -mattr and /proc/cpuinfo
_GCC_ARM = {"neon": "simd", "sve": "sve"}  # -march=armv8-a+<name> extension names


@dataclass(frozen=True)
class CPUModel:
    """What ``-mcpu=<name>`` fixes: the architecture, ISA features, ``-march`` and caches."""

    arch: str
    features: tuple[str, ...]
    march: str
    caches: tuple[int, int, int]


CPU_MODELS: dict[str, CPUModel] = {
    "x86-64": CPUModel("x86_64", (), "x86-64", (32 << 10, 256 << 10, 8 << 20)),
    "x86-64-v2": CPUModel("x86_64", X86_FEATURES[:1], "x86-64-v2", (32 << 10, 256 << 10, 8 << 20)),
    "x86-64-v3": CPUModel("x86_64", X86_FEATURES[:5], "x86-64-v3", (32 << 10, 512 << 10, 32 << 20)),
    "skylake-avx512": CPUModel("x86_64", X86_FEATURES, "skylake-avx512",
                               (32 << 10, 1 << 20, 32 << 20)),
    "armv8-a": CPUModel("aarch64", ("neon",), "armv8-a", (64 << 10, 1 << 20, 32 << 20)),
}  # fmt: skip
"""CPU models accepted by ``-mcpu`` (besides ``native``): ISA levels with typical caches."""

CPU_PRESETS: dict[str, str] = {
    "x86-64-v2": "x86-64-v2",  # SSE4.2, 128-bit vectors
    "avx2": "x86-64-v3",  # AVX2 + FMA + F16C, 256-bit (Haswell, Zen 2/3)
    "avx512": "skylake-avx512",  # AVX-512 F/BW/VL/DQ/CD, 512-bit (Skylake-SP and later)
    "aarch64": "armv8-a",  # NEON, 128-bit; code generation only on an x86 host
}
"""CPU preset names (``Target("avx2")``) and the ``-mcpu`` model each stands for."""
_BASELINE = {"x86_64": "x86-64", "aarch64": "armv8-a"}  # the base of -mattr without -mcpu
_CPU_OPTIONS = ("mcpu", "mattr", "num-cores", "l1d-bytes", "l2-bytes", "l3-bytes")
_CUDA_OPTIONS = ("arch",)


def _host_arch() -> str:
    """The host's architecture as a target names it (``"x86_64"``, ``"aarch64"``...)."""
    machine = platform.machine().lower() or "unknown"
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


@functools.lru_cache(maxsize=1)
def _host_features() -> tuple[str, ...]:
    """The known ISA features of the host (:data:`X86_FEATURES`, :data:`ARM_FEATURES`)."""
    feats: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    feats.update(_ALIASES.get(w, w) for w in line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return tuple(sorted(feats & {*X86_FEATURES, *ARM_FEATURES}))


def _host_cores() -> int:
    """Cores available to this process."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


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
        for entry in sorted(Path(root).glob("index*")):
            level = (entry / "level").read_text(encoding="utf-8").strip()
            kind = (entry / "type").read_text(encoding="utf-8").strip()
            size = _parse_cache_size((entry / "size").read_text(encoding="utf-8"))
            if level.isdigit() and kind in ("Data", "Unified") and size is not None:
                found.setdefault(int(level), size)
    except (OSError, ValueError):
        found = {}
    l1, l2, l3 = (found.get(n, CACHE_FALLBACK_BYTES[n - 1]) for n in (1, 2, 3))
    return l1, l2, l3


def _llvm(feature: str) -> str:
    """The ``-mattr`` / gcc ``-m`` spelling of a feature (``sse4_2`` -> ``sse4.2``)."""
    return _LLVM_NAME.get(feature, feature)


def _parse_options(text: str, words: list[str], accepted: tuple[str, ...]) -> dict[str, str]:
    """``{"mcpu": "x86-64-v3"}`` from ``["-mcpu=x86-64-v3"]``; only ``accepted`` keys."""
    options: dict[str, str] = {}
    for opt in words:
        if not opt.startswith("-") or "=" not in opt:
            raise TargetError(f"Target {text!r}: options look like -key=value, got {opt!r}")
        key, value = opt.lstrip("-").split("=", 1)
        if key not in accepted:
            raise TargetError(
                f"Target {text!r}: unknown option -{key}; accepted here: "
                + ", ".join(f"-{a}" for a in accepted)
            )
        if key in options or not value:
            raise TargetError(f"Target {text!r}: -{key} must be given once, with a value")
        options[key] = value
    return options


def _model_name(text: str, preset: str | None, mcpu: str | None) -> str | None:
    """The :data:`CPU_MODELS` key (or ``"native"``) that a preset or ``-mcpu`` names."""
    if preset is not None and mcpu is not None:
        raise TargetError(f"Target {text!r}: the preset {preset!r} already sets -mcpu")
    if preset is not None:
        return CPU_PRESETS[preset]
    if mcpu is None:
        return None
    name = CPU_PRESETS.get(mcpu, mcpu)
    if name != "native" and name not in CPU_MODELS:
        raise TargetError(
            f"Target {text!r}: unknown -mcpu={mcpu}; accepted: native, "
            + ", ".join(sorted({*CPU_MODELS, *CPU_PRESETS}))
        )
    return name


def _host_model() -> str:
    """``"native"``, or the model of the CPU preset ``TILECRAFT_HOST_TARGET`` names."""
    name = config.host_target()
    if name is None:
        return "native"
    model = CPU_PRESETS.get(name, name)
    if model not in CPU_MODELS:
        raise TargetError(
            f"TILECRAFT_HOST_TARGET={name!r}: expected a CPU preset ({', '.join(CPU_PRESETS)}) "
            f"or a -mcpu model ({', '.join(CPU_MODELS)})"
        )
    return model


def _apply_mattr(text: str, arch: str, base: tuple[str, ...], mattr: str | None) -> set[str]:
    """``base`` with the features ``-mattr`` adds (``+avx2``) or removes (``-avx512f``): only
    those named (``-avx512f`` keeps ``avx512bw``; the C compiler drops what depends on it)."""
    feats = set(base)
    if mattr is None:
        return feats
    known = _FAMILY_FEATURES.get(arch, ())
    for item in mattr.split(","):
        sign, name = item[:1], _ALIASES.get(item[1:], item[1:])
        if sign not in ("+", "-"):
            raise TargetError(f"Target {text!r}: -mattr items look like +avx2 or -avx512f, "
                              f"got {item!r}")  # fmt: skip
        if name not in known:
            raise TargetError(
                f"Target {text!r}: unknown {arch} feature {item[1:]!r} in -mattr; known: "
                + (", ".join(_llvm(f) for f in known) or "none")
            )
        (feats.add if sign == "+" else feats.discard)(name)
    return feats


def _positive(text: str, options: dict[str, str], key: str) -> int | None:
    """The positive integer option ``-key`` (caches may say ``32K``, ``2M``), or None."""
    value = options.get(key)
    if value is None:
        return None
    number = _parse_cache_size(value)
    if number is None or not (value.isdigit() or key.endswith("bytes")):
        raise TargetError(f"Target {text!r}: -{key} must be a positive integer, got {value!r}")
    return number


def _resolve_cpu(text: str, preset: str | None, options: dict[str, str]) -> dict[str, object]:
    """The fields of the CPU a target string describes; the host fills what options leave out."""
    mcpu = _model_name(text, preset, options.get("mcpu"))
    mattr = options.get("mattr")
    host_caches = mcpu is None  # a model fixes typical caches; else they are the host's
    if mcpu is None:
        mcpu = _host_model() if mattr is None else _BASELINE.get(_host_arch(), "x86-64")
    if mcpu == "native":
        arch, base, caches = _host_arch(), _host_features(), host_cache_sizes()
    else:
        model = CPU_MODELS[mcpu]
        arch, base = model.arch, model.features
        caches = host_cache_sizes() if host_caches else model.caches
    feats = tuple(sorted(_apply_mattr(text, arch, base, mattr)))
    cores = _positive(text, options, "num-cores") or _host_cores()
    facts: dict[str, object] = {"kind": "cpu", "arch": arch, "mcpu": mcpu, "gpu": None,
                                "features": feats, "num_cores": cores}  # fmt: skip
    for key, size in zip(("l1d", "l2", "l3"), caches, strict=True):
        facts[f"{key}_bytes"] = _positive(text, options, f"{key}-bytes") or size
    return facts


def _resolve_gpu(text: str, preset: str | None, options: dict[str, str]) -> GPUInfo:
    """The GPU limits of ``cuda -arch=...`` or of a GPU preset."""
    given = options.get("arch")
    if preset is not None and given is not None and given != GPU_PRESETS[preset].arch:
        raise TargetError(f"Target {text!r}: the preset {preset!r} is "
                          f"-arch={GPU_PRESETS[preset].arch}")  # fmt: skip
    arch = given or (GPU_PRESETS[preset].arch if preset else DEFAULT_CUDA_ARCH)
    if re.fullmatch(r"sm_\d+[af]?", arch) is None:
        raise TargetError(f"Target {text!r}: -arch must look like sm_90 or sm_90a, got {arch!r}")
    name = preset or _ARCH_DEFAULT_PRESET.get(arch)
    if given is None and preset is None:
        _LOG.info(
            "Target(%r): no -arch given, chose %s with %s limits; name another with "
            "'cuda -arch=sm_XY' or a GPU preset (%s)",
            text, arch, name, ", ".join(sorted(GPU_PRESETS)),
        )  # fmt: skip
    base = GPU_PRESETS[name] if name else GPUInfo(arch)
    return GPUInfo(**{**base.__dict__, "arch": arch})


@dataclass(frozen=True)
class Target:
    """A compilation target parsed from a string such as ``"cpu"``, ``"avx2"`` or
    ``"cuda -arch=sm_90"`` (options: see the module docstring). Targets are equal when they
    describe the same machine, however spelled (``Target("avx2") == Target("cpu
    -mcpu=x86-64-v3")``); ``str`` writes the description in full: ``Target(str(t)) == t``.

    Attributes
    ----------
    spec
        The string the target was made from.
    kind, arch
        ``"cpu"`` or ``"cuda"``; ``"sm_90"`` etc. for CUDA, else ``"x86_64"``, ``"aarch64"``.
    mcpu
        The CPU model (a :data:`CPU_MODELS` key, or ``"native"``: the host); ``""`` for CUDA.
    gpu
        Resource limits for CUDA targets (None on CPU).
    features
        Sorted ISA features of a CPU target (:data:`X86_FEATURES`, :data:`ARM_FEATURES`).
    num_cores
        Cores a CPU target's kernels may use (the host's unless ``-num-cores`` is given).
    l1d_bytes, l2_bytes, l3_bytes
        CPU data cache sizes per instance (the host's, a preset's typical ones, or
        ``-l1d-bytes`` ...); 0 for CUDA (see ``gpu.l2_bytes``).
    """

    spec: str = field(compare=False)
    kind: str = field(init=False)
    arch: str = field(init=False)
    mcpu: str = field(init=False)
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
        head = words[0].lower()
        if head in ("cpu", "llvm", "c") or head in CPU_PRESETS:
            options = _parse_options(text, words[1:], _CPU_OPTIONS)
            facts = _resolve_cpu(text, head if head in CPU_PRESETS else None, options)
        elif head == "cuda" or head in GPU_PRESETS:
            options = _parse_options(text, words[1:], _CUDA_OPTIONS)
            gpu = _resolve_gpu(text, head if head in GPU_PRESETS else None, options)
            facts = {"kind": "cuda", "arch": gpu.arch, "mcpu": "", "gpu": gpu, "features": (),
                     "num_cores": 0, "l1d_bytes": 0, "l2_bytes": 0, "l3_bytes": 0}  # fmt: skip
        else:
            raise TargetError(
                f"Target: unknown target {head!r}; expected 'cpu [-mcpu=... -mattr=... "
                f"-num-cores=N]', 'cuda -arch=sm_XY' or a preset: {', '.join(Target.presets())}"
            )
        for name, value in facts.items():
            object.__setattr__(self, name, value)

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
        """Names accepted as preset targets: GPUs (``Target("h100")``) and CPUs
        (``Target("avx2")``)."""
        return sorted({*GPU_PRESETS, *CPU_PRESETS})

    @property
    def compute_capability(self) -> int:
        """``90`` for sm_90 and for the arch-specific sm_90a (0 for the CPU)."""
        return int(self.arch[3:].rstrip("af")) if self.is_gpu else 0

    @property
    def arch_flags(self) -> tuple[str, ...]:
        """The C compiler flags that select this CPU target's ISA (empty for CUDA).

        ``("-march=native",)`` for the host, ``("-march=x86-64-v3",)`` for ``avx2``,
        ``("-march=skylake-avx512", "-mprefer-vector-width=512")`` for ``avx512``,
        ``("-march=armv8-a",)`` for ``aarch64``; features that ``-mattr`` adds or removes
        follow as ``-m<feature>`` / ``-mno-<feature>`` (``+ext`` / ``+noext`` on AArch64).
        """
        if self.is_gpu:
            return ()
        if self.mcpu == "native":
            march, base = "native", _host_features()
        else:
            march, base = CPU_MODELS[self.mcpu].march, CPU_MODELS[self.mcpu].features
        family = _FAMILY_FEATURES.get(self.arch, ())
        added = [f for f in family if f in self.features and f not in base]
        removed = [f for f in family if f in base and f not in self.features]
        if self.arch == "aarch64":
            ext = [f"+{_GCC_ARM[f]}" for f in added] + [f"+no{_GCC_ARM[f]}" for f in removed]
            return (f"-march={march}{''.join(ext)}",)
        flags = [f"-march={march}", *(f"-m{_llvm(f)}" for f in added)]
        flags += [f"-mno-{_llvm(f)}" for f in removed]
        if "avx512f" in self.features:
            flags.append("-mprefer-vector-width=512")
        return tuple(flags)

    def missing_host_features(self) -> tuple[str, ...]:
        """What this CPU target needs that the machine running this process lacks.

        Empty for the host (``Target("cpu")`` without ``TILECRAFT_HOST_TARGET``) and for any
        target whose features the host has, so code built for it can run here. When the
        architecture differs (an ``aarch64`` target on an x86 host), the architecture comes
        first, then all the target's features. Empty for CUDA targets.
        """
        if self.is_gpu:
            return ()
        if self.arch != _host_arch():
            return (self.arch, *self.features)
        have = set(_host_features())
        return tuple(f for f in self.features if f not in have)

    def __str__(self) -> str:
        """``cpu -mcpu=... [-mattr=...] -num-cores=N [-l1d-bytes=...]``: every resolved fact;
        ``cuda -arch=sm_XY``, or the GPU preset's name when its limits are not the arch's."""
        if self.is_gpu:
            default = _ARCH_DEFAULT_PRESET.get(self.arch)
            if self.gpu == (GPU_PRESETS[default] if default else GPUInfo(self.arch)):
                return f"cuda -arch={self.arch}"
            return next(n for n in sorted(GPU_PRESETS) if GPU_PRESETS[n] == self.gpu)
        family = _FAMILY_FEATURES.get(self.arch, ())
        words = ["cpu", f"-mcpu={self.mcpu}"]
        caches = (self.l1d_bytes, self.l2_bytes, self.l3_bytes)
        if self.mcpu == "native":  # the host's ISA and caches differ between machines: all
            items = [("+" if f in self.features else "-") + _llvm(f) for f in family]
            implied: tuple[int | None, ...] = (None, None, None)
        else:
            model = CPU_MODELS[self.mcpu]
            items = [f"+{_llvm(f)}" for f in family
                     if f in self.features and f not in model.features]  # fmt: skip
            items += [f"-{_llvm(f)}" for f in model.features if f not in self.features]
            implied = model.caches
        if items:
            words.append("-mattr=" + ",".join(items))
        words.append(f"-num-cores={self.num_cores}")
        for key, size, usual in zip(("l1d", "l2", "l3"), caches, implied, strict=True):
            if size != usual:
                words.append(f"-{key}-bytes={size}")
        return " ".join(words)

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

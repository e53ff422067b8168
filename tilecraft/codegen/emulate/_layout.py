"""Sites, options and shared-memory layout of emulated kernels (see :mod:`._kernel`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ...errors import CodegenError
from ...ir import Allocate, Buffer, BufferLoad, BufferStore, IntImm, Node, Var, post_order_visit
from ...lower.gpu_split_host_device import Kernel


class SiteKind(Enum):
    """What a numbered site of an emulator unit is."""

    LOAD = "load"
    STORE = "store"
    VECTOR_LOAD = "vector load"  # a whole vector access, as the CUDA code makes it
    VECTOR_STORE = "vector store"
    BARRIER = "barrier"
    COLLECTIVE = "collective"


@dataclass(frozen=True)
class Site:
    """A place in the generated code the runtime may report (by its number)."""

    function: str
    kernel: str
    kind: SiteKind
    buffer: str = ""
    scope: str = ""
    ordinal: int = 0  # the n-th barrier, or the n-th warp collective statement, of the kernel
    intrinsic: str = ""


class SiteTable:
    """Numbered :class:`Site` entries of one unit (accesses deduplicated)."""

    def __init__(self) -> None:
        self.sites: list[Site] = []
        self._index: dict[Site, int] = {}

    def number(self, site: Site) -> int:
        """The number of ``site``, adding it on first use."""
        got = self._index.get(site)
        if got is None:
            got = len(self.sites)
            self.sites.append(site)
            self._index[site] = got
        return got


@dataclass(frozen=True)
class KernelOptions:
    """What one emitted kernel checks."""

    checks: bool  # bounds-check every access
    racecheck: bool  # shadow shared and local memory

    def __post_init__(self) -> None:
        if self.racecheck and not self.checks:
            raise CodegenError("emulator codegen: race checking needs the bounds checks too")


def static_layout(shared: tuple[Buffer, ...]) -> tuple[dict[int, int], int]:
    """Byte offsets of the static shared buffers (32-byte aligned, as the CUDA code declares
    them) and their total."""
    offsets: dict[int, int] = {}
    total = 0
    for b in shared:
        size = b.shape[0]
        if not isinstance(size, IntImm):
            raise CodegenError(
                f"emulator codegen: shared buffer {b.name!r} has symbolic size {size}; use "
                "'shared.dyn' for shared memory of run-time size"
            )
        offsets[id(b)] = total
        total += (size.value * b.dtype.itemsize + 31) // 32 * 32
    return offsets, total


def extra_scalars(kernel: Kernel) -> list[Var]:
    """Shape variables of the kernel's buffers that are not already kernel parameters."""
    have = {id(p) for p in kernel.params}
    found: dict[int, Var] = {}

    def fn(n: Node) -> None:
        if isinstance(n, (BufferLoad, BufferStore, Allocate)):
            for d in n.buffer.shape:
                post_order_visit(d, lambda v: _note_var(v, have, found))

    post_order_visit(kernel.body, fn)
    for b in (*kernel.shared, *kernel.dyn_shared):
        for d in b.shape:
            post_order_visit(d, lambda v: _note_var(v, have, found))
    return list(found.values())


def _note_var(v: Node, have: set[int], found: dict[int, Var]) -> None:
    if isinstance(v, Var) and id(v) not in have:
        found[id(v)] = v

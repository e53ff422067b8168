"""Statements that exist only in lowered GPU code: barriers and warp shuffles.

They are produced by the GPU lowering passes (:mod:`.gpu_thread_sync`,
:mod:`.gpu_cross_thread_reduction`) after scheduling, never by users or schedules, and are
consumed by the CUDA emitter. They are registered with structural equality and JSON like the
core nodes, so lowered functions can still be compared and serialised.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import IRError
from ..ir import Buffer, Expr, Stmt, as_expr, register_node

FULL_MASK = 0xFFFFFFFF


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ThreadSync(Stmt):
    """A barrier for all threads of a thread block (``__syncthreads()``).

    Every thread of the block must reach it: it never sits under a thread-dependent branch.
    """

    scope: str = "shared"

    def __post_init__(self) -> None:
        if self.scope != "shared":
            raise IRError(f"ThreadSync: only the 'shared' scope is supported, got {self.scope!r}")

    def script(self) -> str:
        """A one-line rendering (the script printer does not know lowering-only nodes)."""
        return "T.tvm_storage_sync('shared')"

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class WarpShuffle(Stmt):
    """``buffer[index] = __shfl_<kind>_sync(mask, value, lane, width)``.

    ``kind`` is ``"down"`` (``lane`` is the offset: read from this lane + offset) or ``"idx"``
    (``lane`` is the source lane within each ``width``-wide group). All lanes named by ``mask``
    execute it together.
    """

    buffer: Buffer
    index: Expr
    value: Expr
    kind: str
    lane: Expr
    width: int
    mask: int = FULL_MASK

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", as_expr(self.index))
        object.__setattr__(self, "lane", as_expr(self.lane))
        if self.kind not in ("down", "idx"):
            raise IRError(f"WarpShuffle: kind must be 'down' or 'idx', got {self.kind!r}")
        if self.width not in (1, 2, 4, 8, 16, 32):
            raise IRError(f"WarpShuffle: width must be a power of two <= 32, got {self.width}")
        if self.value.dtype != self.buffer.dtype:
            raise IRError(
                f"WarpShuffle {self.buffer.name}: value dtype {self.value.dtype} differs from "
                f"the buffer's {self.buffer.dtype}"
            )
        if not 0 < self.mask <= FULL_MASK:
            raise IRError(f"WarpShuffle: mask must be a non-zero 32-bit value, got {self.mask}")

    def script(self) -> str:
        """A one-line rendering (the script printer does not know lowering-only nodes)."""
        return f"T.shfl_{self.kind}({self.buffer.name}, width={self.width})"

    __hash__ = object.__hash__


register_node(ThreadSync, tag="gpu.ThreadSync")
register_node(WarpShuffle, tag="gpu.WarpShuffle")

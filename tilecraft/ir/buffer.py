"""Buffers: named multi-dimensional arrays with a dtype and a storage scope."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import IRError
from .dtype import DataType, DTypeLike, dtype
from .expr import BufferLoad, Expr, ExprLike, IntImm, Var, as_expr
from .node import Node

WARP_FRAGMENT_SCOPES = (
    "m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k16.accumulator",
    "m16n8k32.matrixA", "m16n8k32.matrixB", "m16n8k32.accumulator",
    "wmma.matrix_a", "wmma.matrix_b", "wmma.matrix_b_col", "wmma.accumulator",
)  # fmt: skip
"""Warp fragment scopes: tensor-core operand tiles held in the registers of a warp's lanes,
accessed only by warp tile operations (:mod:`tilecraft.ir.device_intrin`). A
``wmma.matrix_b_col`` tile is a ``k x n`` matrix_b tile loaded from memory stored ``n x k``
(column-major: an ``(out, in)`` weight), CUDA's ``col_major`` fragment."""
SCOPES = ("global", "shared", "shared.dyn", "local", *WARP_FRAGMENT_SCOPES)
"""Storage scopes: device/host memory, GPU shared memory (static or dynamic), registers,
warp fragments."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Buffer(Node):
    """A multi-dimensional array; ``shape`` holds integer constants or symbolic expressions.

    ``buf[i, j]`` builds a :class:`BufferLoad`. Identity matters (two buffers with the same
    name are different buffers); the name is a printing hint.
    """

    name: str
    shape: tuple[Expr, ...]
    dtype: DataType
    scope: str = "global"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise IRError(f"Buffer: name must be a non-empty string, got {self.name!r}")
        object.__setattr__(self, "dtype", dtype(self.dtype))
        if isinstance(self.shape, (int, Expr)):
            object.__setattr__(self, "shape", (self.shape,))
        shape = tuple(as_expr(s) for s in self.shape)
        for s in shape:
            if not s.dtype.is_integer or s.dtype.lanes != 1:
                raise IRError(
                    f"Buffer {self.name}: shape entries must be scalar integers, got {s!r}"
                )
            if isinstance(s, IntImm) and s.value < 0:
                raise IRError(f"Buffer {self.name}: negative extent {s.value} in shape")
        object.__setattr__(self, "shape", shape)
        if self.scope not in SCOPES:
            raise IRError(
                f"Buffer {self.name}: unknown scope {self.scope!r}; expected one of {SCOPES}"
            )

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as Python ints, or None when some extent is symbolic."""
        out = []
        for s in self.shape:
            if not isinstance(s, IntImm):
                return None
            out.append(s.value)
        return tuple(out)

    def shape_vars(self) -> list[Var]:
        """Symbolic variables appearing directly as extents, in order of appearance."""
        seen: list[Var] = []
        for s in self.shape:
            if isinstance(s, Var) and all(s is not v for v in seen):
                seen.append(s)
        return seen

    def __getitem__(self, indices: ExprLike | Sequence[ExprLike]) -> BufferLoad:
        idx = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        return BufferLoad(self, tuple(as_expr(i) for i in idx))

    def load(self, *indices: ExprLike) -> BufferLoad:
        """``self[indices]``."""
        return BufferLoad(self, tuple(as_expr(i) for i in indices))

    def __iter__(self) -> Iterator[BufferLoad]:
        # Without this, ``__getitem__`` makes Python iterate A[0], A[1], ... forever (a Buffer
        # passed where a tuple belongs, e.g. ``BufferRegion(buf, buf)``, never returned).
        raise IRError(f"Buffer {self.name!r} is not iterable; index it as {self.name}[i, ...]")

    __hash__ = object.__hash__


def decl_buffer(
    shape: Sequence[ExprLike] | ExprLike,
    dt: DTypeLike = "float32",
    name: str = "buf",
    scope: str = "global",
) -> Buffer:
    """Convenience constructor: ``decl_buffer((m, n), "float32", "A")``."""
    shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return Buffer(name, tuple(as_expr(s) for s in shp), dtype(dt), scope)

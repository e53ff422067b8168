"""Input specifications for :meth:`Module.export`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import TilecraftError
from ...ir import dtype as to_dtype


@dataclass(frozen=True)
class Tensor:
    """An input tensor: extents are ints or names of symbolic extents (``"seq_len"``)."""

    shape: tuple[int | str, ...]
    dtype: str = "float32"

    def __init__(self, shape: Sequence[int | str], dtype: str = "float32") -> None:
        dims = tuple(shape)
        for d in dims:
            ok = (isinstance(d, int) and d >= 0) or (isinstance(d, str) and d.isidentifier())
            if not ok or isinstance(d, bool):
                raise TilecraftError(
                    f"nn.spec.Tensor: extents must be non-negative ints or identifiers, got {d!r}"
                )
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", str(to_dtype(dtype)))

"""What a candidate is called with: one :class:`ArgInfo` per buffer parameter.

A tuning record keeps its workload's argument info (name, shape, dtype, role) so a runner can
make inputs without the IR, and a reader can see what was measured. Outputs are the buffers
the function stores into (:func:`tilecraft.runtime.written_params`); the rest are inputs.
Tuning needs constant shapes and buffer-only parameters; anything else is a :class:`TuneError`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import IRError, TuneError
from ..ir import Buffer, IntImm, PrimFunc, dtype
from ..runtime import written_params


class ArgRole(enum.Enum):
    """Whether a buffer parameter is read (``INPUT``) or written (``OUTPUT``)."""

    INPUT = "input"
    OUTPUT = "output"


@dataclass(frozen=True)
class ArgInfo:
    """One buffer parameter of a tuned function.

    Attributes
    ----------
    name
        The parameter's name (informative only; matching is by position).
    shape
        Constant extents.
    dtype
        Element type, as in the IR (``"float32"``, ``"bfloat16"``...).
    role
        :attr:`ArgRole.INPUT` or :attr:`ArgRole.OUTPUT`.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: ArgRole

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict (see :meth:`from_dict`)."""
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "role": self.role.value,
        }

    @staticmethod
    def from_dict(data: object) -> ArgInfo:
        """Rebuild an ArgInfo from :meth:`as_dict` output.

        Raises
        ------
        TuneError
            When ``data`` is not a well-formed argument description.
        """
        if not isinstance(data, Mapping) or set(data) != {"name", "shape", "dtype", "role"}:
            raise TuneError(f"argument info: expected keys name, shape, dtype, role; got {data!r}")
        name, shape, dt, role = data["name"], data["shape"], data["dtype"], data["role"]
        if not isinstance(name, str) or not isinstance(dt, str):
            raise TuneError(f"argument info: name and dtype must be strings, got {data!r}")
        if not isinstance(shape, Sequence) or not all(_is_extent(s) for s in shape):
            raise TuneError(f"argument info {name!r}: shape must be non-negative ints: {shape!r}")
        roles = {r.value: r for r in ArgRole}
        if role not in roles:
            raise TuneError(f"argument info {name!r}: role must be one of {sorted(roles)}")
        try:
            dtype(dt)
        except IRError as e:
            raise TuneError(f"argument info {name!r}: unknown dtype {dt!r}") from e
        return ArgInfo(name, tuple(int(s) for s in shape), dt, roles[role])


def _is_extent(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**62


def args_info(func: PrimFunc) -> tuple[ArgInfo, ...]:
    """The argument info of ``func``'s parameters, in order.

    Raises
    ------
    TuneError
        When a parameter is a scalar or a buffer has a symbolic extent: tuning measures one
        concrete shape, so bind the extents first.
    """
    written = {id(b) for b in written_params(func)}
    out: list[ArgInfo] = []
    for p in func.params:
        if not isinstance(p, Buffer):
            raise TuneError(
                f"{func.name}: scalar parameter {p.name!r} cannot be tuned; tuning needs "
                "buffer parameters with constant shapes"
            )
        if not all(isinstance(e, IntImm) for e in p.shape):
            raise TuneError(
                f"{func.name}: buffer {p.name!r} has a symbolic shape; tuning measures one "
                "concrete shape, so tune it at chosen sizes (TuneIRMod(specialize={name: sizes}), "
                "tc.rules.SpecializeShapes)"
            )
        shape = tuple(e.value for e in p.shape if isinstance(e, IntImm))
        role = ArgRole.OUTPUT if id(p) in written else ArgRole.INPUT
        out.append(ArgInfo(p.name, shape, str(p.dtype), role))
    return tuple(out)

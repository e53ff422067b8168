"""A builder and a runner that neither compile nor run: for tests of the tuning loop itself.

:class:`HashBuilder` "builds" a candidate into its structural hash; :class:`TableRunner`
gives each candidate a fixed time, from a table of hashes or else derived from the hash, so
the same candidates always get the same measurements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tilecraft import tune as ms
from tilecraft.ir import PrimFunc, structural_hash


class HashBuilder(ms.Builder):
    """Every candidate builds; its artifact is its function's structural hash."""

    def __init__(self) -> None:
        self.built = 0

    def build(self, inputs: Sequence[ms.BuilderInput]) -> list[ms.BuilderResult]:
        out = []
        for inp in inputs:
            func = inp.mod["main"]
            assert isinstance(func, PrimFunc)
            out.append(ms.BuilderResult(structural_hash(func), None, 0.0))  # type: ignore[arg-type]
        self.built += len(inputs)
        return out


def hash_secs(key: str) -> float:
    """A time in [1 ms, 2 ms) fixed by the hash."""
    return 1e-3 * (1.0 + int(key[:8], 16) / 16**8)


class TableRunner(ms.Runner):
    """Times from ``table`` (hash -> seconds), else ``default``, else :func:`hash_secs`."""

    def __init__(
        self, table: Mapping[str, float] | None = None, default: float | None = None
    ) -> None:
        self.table = dict(table or {})
        self.default = default
        self.ran: list[str] = []

    def run(self, inputs: Sequence[ms.RunnerInput]) -> list[ms.RunnerResult]:
        out = []
        for inp in inputs:
            key = str(inp.artifact)
            self.ran.append(key)
            secs = self.table.get(key, self.default or hash_secs(key))
            out.append(ms.RunnerResult((secs, secs)))
        return out

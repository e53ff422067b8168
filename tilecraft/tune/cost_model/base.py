"""The cost model interface: learn from measured candidates, score unmeasured ones.

A model sees programs as per-store feature rows (:mod:`tilecraft.tune.features`) and learns
the *normalised throughput* of each program within its task: the task's best time divided by
the program's time (1 for the best, near 0 for slow or failed ones). Times are kept raw and
normalised when the model trains, so a new best re-scales the whole task.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import TuneError
from ..features import NUM_FEATURES


@dataclass
class TrainingSet:
    """Measured programs grouped by task: feature rows and run times (inf: failed)."""

    groups: list[str] = field(default_factory=list)
    features: list[np.ndarray] = field(default_factory=list)
    secs: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.features)

    def add(self, group: str, features: Sequence[np.ndarray], secs: Sequence[float | None]) -> None:
        """Add programs of task ``group`` (``None`` or a non-positive time: failed)."""
        if len(features) != len(secs):
            raise TuneError(
                f"cost model: {len(features)} feature arrays for {len(secs)} measurements"
            )
        for rows, s in zip(features, secs, strict=True):
            self.features.append(check_rows(rows))
            ok = s is not None and math.isfinite(s) and s > 0
            self.secs.append(float(s) if ok and s is not None else math.inf)
            self.groups.append(str(group))

    def labels(self) -> np.ndarray:
        """Normalised throughput of every program within its group."""
        best: dict[str, float] = {}
        for g, s in zip(self.groups, self.secs, strict=True):
            best[g] = min(best.get(g, math.inf), s)
        return np.array(
            [
                0.0 if not math.isfinite(s) else best[g] / s
                for g, s in zip(self.groups, self.secs, strict=True)
            ],
            dtype=np.float64,
        )


def check_rows(rows: np.ndarray) -> np.ndarray:
    """``rows`` as a ``(n >= 1, NUM_FEATURES)`` float32 array (TuneError otherwise)."""
    arr = np.asarray(rows, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] != NUM_FEATURES:
        raise TuneError(
            f"cost model: expected feature rows of shape (n >= 1, {NUM_FEATURES}), got {arr.shape}"
        )
    return arr


class CostModel(ABC):
    """Scores programs: higher means faster (comparable within one task)."""

    @abstractmethod
    def update(
        self, group: str, features: Sequence[np.ndarray], secs: Sequence[float | None]
    ) -> None:
        """Learn from measured programs of task ``group`` (``secs``: mean run time or None)."""

    @abstractmethod
    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        """One score per program (its feature rows)."""

    @property
    def informed(self) -> bool:
        """Whether the scores carry knowledge (False while they are random: a search then
        gains nothing from ranking candidates by them)."""
        return True

    @abstractmethod
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model to the directory ``path`` (JSON files, no pickle)."""

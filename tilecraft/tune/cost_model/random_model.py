"""A cost model that knows nothing: seeded random scores (the search's control)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...errors import TuneError
from .base import CostModel


class RandomModel(CostModel):
    """Uniform random scores in [0, 1), reproducible from ``seed``.

    Parameters
    ----------
    seed
        Seed of the scores.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)

    def update(
        self, group: str, features: Sequence[np.ndarray], secs: Sequence[float | None]
    ) -> None:
        """Ignored: the model does not learn."""
        del group, features, secs

    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        """A random score per program."""
        return self._rng.random(len(features))

    @property
    def informed(self) -> bool:
        """False: the scores are random."""
        return False

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the seed to ``path/model.json``."""
        Path(path).mkdir(parents=True, exist_ok=True)
        doc = {"kind": "random", "seed": self.seed}
        (Path(path) / "model.json").write_text(json.dumps(doc))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RandomModel:
        """A model from :meth:`save`'s directory (TuneError when it is not one)."""
        try:
            doc = json.loads((Path(path) / "model.json").read_text())
        except (OSError, ValueError) as e:
            raise TuneError(f"RandomModel.load: cannot read {path}: {e}") from e
        if not isinstance(doc, dict) or doc.get("kind") != "random":
            raise TuneError(f"RandomModel.load: {path} does not hold a random model")
        return cls(int(doc.get("seed", 0)))

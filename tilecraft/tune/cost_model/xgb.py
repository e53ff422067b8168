"""An XGBoost cost model: per-store scores summed per program.

Each feature row (one store) gets a score; a program's score is the sum of its rows'. The
trees are fitted with a custom objective on that sum: the squared error between a program's
summed score and its normalised throughput, its gradient spread to each of its rows. The
model retrains when its data grew by ``retrain_growth`` since the last fit (and holds at
least ``min_train`` programs); until its first fit it scores at random, seeded.

Saved as two JSON files: XGBoost's own JSON model format for the trees and a JSON document
for the settings and the training data. Nothing is unpickled when a model is loaded.

Needs the ``tune`` extra (``pip install 'tilecraft[tune]'``, the ``xgboost-cpu`` wheel).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ...errors import TuneError
from ..features import FEATURE_VERSION, NUM_FEATURES
from .base import CostModel, TrainingSet, check_rows

BOOSTER_FILE = "booster.json"
META_FILE = "model.json"


def xgboost_module() -> ModuleType:
    """The ``xgboost`` module, or TuneError saying how to install it."""
    try:
        import xgboost
    except ImportError as e:
        raise TuneError(
            "XGBModel needs the xgboost package: pip install 'tilecraft[tune]' (or use RandomModel)"
        ) from e
    return xgboost


def _stack(features: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All rows stacked, and the index of the program of every row."""
    rows = [check_rows(f) for f in features]
    owner = np.repeat(np.arange(len(rows)), [r.shape[0] for r in rows])
    return np.concatenate(rows, axis=0), owner


class XGBModel(CostModel):
    """Gradient-boosted trees over per-store features.

    Parameters
    ----------
    seed
        Seed of the trees and of the scores before the first fit.
    num_boost_round, max_depth, eta
        Trees per fit, their depth, the learning rate.
    retrain_growth, min_train
        Refit when the data grew by this fraction since the last fit and holds at least
        ``min_train`` programs.
    nthread
        XGBoost threads.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        num_boost_round: int = 60,
        max_depth: int = 6,
        eta: float = 0.2,
        retrain_growth: float = 0.2,
        min_train: int = 8,
        nthread: int = 1,
    ) -> None:
        self.xgb = xgboost_module()
        self.params: dict[str, Any] = {
            "seed": int(seed),
            "num_boost_round": int(num_boost_round),
            "max_depth": int(max_depth),
            "eta": float(eta),
            "retrain_growth": float(retrain_growth),
            "min_train": int(min_train),
            "nthread": int(nthread),
        }
        self.data = TrainingSet()
        self.booster: Any = None
        self.trained_on = 0
        self._rng = np.random.default_rng(int(seed))

    # -- learning ---------------------------------------------------------------------------
    def update(
        self, group: str, features: Sequence[np.ndarray], secs: Sequence[float | None]
    ) -> None:
        """Add measured programs; refit when the data grew enough."""
        self.data.add(group, features, secs)
        grown = len(self.data) - self.trained_on
        enough = grown >= max(1.0, self.params["retrain_growth"] * self.trained_on)
        if len(self.data) >= self.params["min_train"] and enough:
            self.fit()

    def fit(self) -> None:
        """Fit the trees on all data now (nothing happens without data)."""
        if not len(self.data):
            return
        x, owner = _stack(self.data.features)
        labels = self.data.labels()
        n = len(labels)

        def objective(preds: np.ndarray, _dtrain: object) -> tuple[np.ndarray, np.ndarray]:
            sums = np.bincount(owner, weights=preds, minlength=n)
            return (sums - labels)[owner], np.ones_like(preds)

        booster_params = {
            "max_depth": self.params["max_depth"],
            "eta": self.params["eta"],
            "seed": self.params["seed"],
            "nthread": self.params["nthread"],
            "base_score": 0.0,
            "tree_method": "hist",
            "verbosity": 0,
        }
        dtrain = self.xgb.DMatrix(x)
        self.booster = self.xgb.train(
            booster_params, dtrain, num_boost_round=self.params["num_boost_round"], obj=objective
        )
        self.trained_on = n

    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        """Summed per-store scores per program (random before the first fit)."""
        if not features:
            return np.zeros(0)
        if self.booster is None:
            return self._rng.random(len(features))
        x, owner = _stack(features)
        rows = self.booster.predict(self.xgb.DMatrix(x))
        return np.bincount(owner, weights=rows, minlength=len(features))

    @property
    def informed(self) -> bool:
        """True once fitted (the scores are random before)."""
        return self.booster is not None

    # -- files ------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``path/booster.json`` (XGBoost JSON) and ``path/model.json`` (the rest)."""
        where = Path(path)
        where.mkdir(parents=True, exist_ok=True)
        if self.booster is not None:
            self.booster.save_model(str(where / BOOSTER_FILE))
        doc = {
            "kind": "xgb",
            "feature_version": FEATURE_VERSION,
            "num_features": NUM_FEATURES,
            "params": self.params,
            "trained_on": self.trained_on,
            "has_booster": self.booster is not None,
            "groups": self.data.groups,
            "secs": [s if math.isfinite(s) else None for s in self.data.secs],
            "features": [f.tolist() for f in self.data.features],
        }
        (where / META_FILE).write_text(json.dumps(doc))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> XGBModel:
        """A model from :meth:`save`'s directory (TuneError when it is not one)."""
        where = Path(path)
        try:
            doc = json.loads((where / META_FILE).read_text())
        except (OSError, ValueError) as e:
            raise TuneError(f"XGBModel.load: cannot read {where / META_FILE}: {e}") from e
        if not isinstance(doc, dict) or doc.get("kind") != "xgb":
            raise TuneError(f"XGBModel.load: {where} does not hold an XGBoost model")
        if doc.get("feature_version") != FEATURE_VERSION or doc.get("num_features") != NUM_FEATURES:
            raise TuneError(
                f"XGBModel.load: {where} was trained on feature layout "
                f"{doc.get('feature_version')} ({doc.get('num_features')} columns); this "
                f"version extracts layout {FEATURE_VERSION} ({NUM_FEATURES} columns)"
            )
        model = cls(**{k: v for k, v in doc["params"].items() if k in _PARAM_NAMES})
        feats = [np.asarray(f, dtype=np.float32) for f in doc["features"]]
        for g, f, s in zip(doc["groups"], feats, doc["secs"], strict=True):
            model.data.add(g, [f], [s])
        if doc.get("has_booster"):
            model.booster = model.xgb.Booster()
            try:
                model.booster.load_model(str(where / BOOSTER_FILE))
            except model.xgb.core.XGBoostError as e:
                raise TuneError(f"XGBModel.load: bad booster file in {where}: {e}") from e
        model.trained_on = int(doc.get("trained_on", 0))
        return model


_PARAM_NAMES = (
    "seed",
    "num_boost_round",
    "max_depth",
    "eta",
    "retrain_growth",
    "min_train",
    "nthread",
)

"""A saved cost model read back whatever its kind (the ``kind`` field of its JSON file)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...errors import TuneError
from .base import CostModel
from .random_model import RandomModel

MODEL_FILE = "model.json"


def load_model(path: str | os.PathLike[str]) -> CostModel:
    """The model saved in directory ``path`` (:meth:`CostModel.save`); TuneError when the
    directory holds none, or one of an unknown kind or feature layout."""
    where = Path(path)
    try:
        doc = json.loads((where / MODEL_FILE).read_text())
    except (OSError, ValueError) as e:
        raise TuneError(f"load_model: cannot read {where / MODEL_FILE}: {e}") from e
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind == "random":
        return RandomModel.load(where)
    if kind == "xgb":
        from .xgb import XGBModel

        return XGBModel.load(where)
    raise TuneError(f"load_model: {where} holds a model of unknown kind {kind!r}")

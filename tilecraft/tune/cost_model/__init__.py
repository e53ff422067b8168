"""Cost models: learn from measured candidates which unmeasured ones are worth measuring.

:class:`XGBModel` (the ``tune`` extra) sums per-store scores of XGBoost trees over
:mod:`tilecraft.tune.features`; :class:`RandomModel` scores at random. Both save to and load
from a directory of JSON files; :func:`warm_start` trains a model on a database's records,
of one :func:`task_kind` or all.
"""

from .base import CostModel as CostModel
from .base import TrainingSet as TrainingSet
from .files import load_model as load_model
from .random_model import RandomModel as RandomModel
from .transfer import task_kind as task_kind
from .transfer import warm_start as warm_start
from .xgb import XGBModel as XGBModel

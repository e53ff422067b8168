"""Integer arithmetic analysis: simplification, bounds, evaluation, iterator maps, regions."""

from .analyzer import Analyzer as Analyzer
from .bound import ConstIntBound as ConstIntBound
from .evaluate import EvaluationError as EvaluationError
from .evaluate import evaluate as evaluate
from .iter_map import IterMapResult as IterMapResult
from .iter_map import IterMark as IterMark
from .iter_map import IterSplitExpr as IterSplitExpr
from .iter_map import IterSumExpr as IterSumExpr
from .iter_map import detect_iter_map as detect_iter_map
from .iter_map import normalize_to_iter_sum as normalize_to_iter_sum
from .region import IntSet as IntSet
from .region import eval_region as eval_region
from .region import eval_set as eval_set
from .region import eval_sets as eval_sets
from .region import relax_region as relax_region
from .region import union_region as union_region

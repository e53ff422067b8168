"""Design spaces: search rules applied block by block (:class:`PostOrderApply`), schedule
functions and tunable rules, whose traces record sampled decisions."""

from ...target import Target
from .add_rfactor import AddRFactor as AddRFactor
from .auto_bind import AutoBind as AutoBind
from .auto_inline import AutoInline as AutoInline
from .base import RuleSpace as RuleSpace
from .base import ScheduleFn as ScheduleFn
from .base import ScheduleFnSpace as ScheduleFnSpace
from .base import SpaceGenerator as SpaceGenerator
from .base import SpaceLike as SpaceLike
from .base import TunableRule as TunableRule
from .base import UnionSpace as UnionSpace
from .base import as_space as as_space
from .base import resampled as resampled
from .cpu_default import cpu_default_space as cpu_default_space
from .cross_thread_reduction import CrossThreadReduction as CrossThreadReduction
from .defaults import cpu_search_rules as cpu_search_rules
from .defaults import default_search_rules as default_search_rules
from .defaults import gpu_search_rules as gpu_search_rules
from .gpu_tiling import MultiLevelTilingGPU as MultiLevelTilingGPU
from .multi_level_tiling import MultiLevelTiling as MultiLevelTiling
from .parallel_vectorize_unroll import ParallelVectorizeUnroll as ParallelVectorizeUnroll
from .post_order_apply import PostOrderApply as PostOrderApply
from .random_compute_location import RandomComputeLocation as RandomComputeLocation
from .rule import SearchRule as SearchRule
from .rule_variants import RuleVariants as RuleVariants


def search_rules_space(target: Target) -> SpaceGenerator:
    """:class:`PostOrderApply` with the target's :func:`default_search_rules`."""
    rules = default_search_rules(target)
    return PostOrderApply(rules, name="post_order_apply")


def default_space(target: Target) -> SpaceGenerator:
    """The space used when none is given: :class:`PostOrderApply` with the target's
    :func:`default_search_rules`, and the default rules' schedule with its one-knob
    neighbours (:class:`RuleVariants`; on a GPU target the rules' own sampling instructions
    with ``tunable=True``), so the space holds what the rules do.
    """
    return UnionSpace([search_rules_space(target), RuleVariants()], name="default")

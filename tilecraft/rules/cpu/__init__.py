"""CPU schedule rules, one per file, and :func:`default_rules`.

``Reduction``, ``GeneralReduction``, ``Injective`` and ``Fallback`` vectorize for the target's
SIMD width and run outer loops on its cores; their numbers are in each rule's ``Config``
(:class:`VectorConfig` fields, ``Config.for_target(target)``).
"""

from ..base import ScheduleRule
from ._vector_config import VectorConfig as VectorConfig
from .fallback import Fallback as Fallback
from .general_reduction import GeneralReduction as GeneralReduction
from .injective import Injective as Injective
from .reduction import Reduction as Reduction


def default_rules() -> list[ScheduleRule]:
    """The CPU rules in the order ``ApplyDefaultSchedule`` should try them.

    Most specific first, ``Fallback`` (which takes everything) last.

    Returns
    -------
    list of ScheduleRule
        New rule instances with per-target configurations.
    """
    return [Reduction(), GeneralReduction(), Injective(), Fallback()]


__all__ = [
    "Fallback",
    "GeneralReduction",
    "Injective",
    "Reduction",
    "VectorConfig",
    "default_rules",
]

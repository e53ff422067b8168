"""Rule-based default scheduling (DLight-style): ordered rules that schedule every kernel.

:mod:`.base` holds the contract (:class:`ScheduleRule`, :class:`Decline`); ``cpu`` and ``gpu``
hold one rule per file.
"""

from . import cpu as cpu
from .base import CPURule as CPURule
from .base import Decline as Decline
from .base import GPURule as GPURule
from .base import RuleResult as RuleResult
from .base import ScheduleRule as ScheduleRule

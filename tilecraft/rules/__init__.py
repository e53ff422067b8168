"""Rule-based default scheduling (DLight-style): ordered rules that schedule every kernel.

:mod:`.base` holds the contract (:class:`ScheduleRule`, :class:`Decline`); :mod:`.common` the
helpers every rule (CPU and GPU) shares; :mod:`.apply` the pass :class:`ApplyDefaultSchedule`;
:mod:`.explain` the report of which rule took each kernel; ``cpu`` and ``gpu`` hold one rule
per file.
"""

from . import common as common
from . import cpu as cpu
from . import gpu as gpu
from .apply import SCHEDULE_RULE_ATTR as SCHEDULE_RULE_ATTR
from .apply import ApplyDefaultSchedule as ApplyDefaultSchedule
from .apply import RuleError as RuleError
from .apply import RuleOutcome as RuleOutcome
from .apply import is_scheduled as is_scheduled
from .apply import scheduled_reason as scheduled_reason
from .apply import try_rules as try_rules
from .base import CPURule as CPURule
from .base import Decline as Decline
from .base import GPURule as GPURule
from .base import RuleResult as RuleResult
from .base import ScheduleRule as ScheduleRule
from .base import already_scheduled as already_scheduled
from .defaults import default_rules as default_rules
from .explain import ExplainReport as ExplainReport
from .explain import FunctionReport as FunctionReport
from .explain import explain as explain
from .specialize import SpecializeShapes as SpecializeShapes

"""Task schedulers: which task measures its next batch of candidates.

One global budget (``max_trials_global``) is shared by every task, each task capped at
``max_trials_per_task``; a scheduler only chooses the order in which tasks spend it.
"""

from .base import TaskScheduler as TaskScheduler
from .base import TaskView as TaskView
from .base import as_scheduler as as_scheduler
from .gradient import GradientBased as GradientBased
from .round_robin import RoundRobin as RoundRobin

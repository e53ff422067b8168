"""Which default rules a target gets: the one place that decides it.

``tc.compile`` and the tuner (which measures the rules' schedule as each task's first
candidate) both ask :func:`default_rules`.
"""

from __future__ import annotations

from ..runtime.backend import backend_of
from ..target import Target, as_target
from . import cpu, gpu
from .base import ScheduleRule


def default_rules(target: Target | str) -> list[ScheduleRule]:
    """The default rules for ``target``, most specific first.

    Parameters
    ----------
    target
        A CPU target (``"cpu"``) or a CUDA target (``"cuda -arch=sm_90"``).

    Returns
    -------
    list of ScheduleRule
        :func:`tilecraft.rules.gpu.default_rules` for a target whose kernels need a GPU
        schedule, else :func:`tilecraft.rules.cpu.default_rules`.
    """
    if backend_of(as_target(target)).needs_gpu_schedule:
        return list(gpu.default_rules())
    return list(cpu.default_rules())

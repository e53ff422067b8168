"""Runners: measure built candidates in isolated processes, optionally checking their results."""

from .base import EvaluatorConfig as EvaluatorConfig
from .base import Runner as Runner
from .base import RunnerInput as RunnerInput
from .base import RunnerResult as RunnerResult
from .local import CUDARunner as CUDARunner
from .local import LocalRunner as LocalRunner
from .ray import RayRunner as RayRunner

"""Search-based tuning (MetaSchedule-style): tasks, builders, runners, databases, applying.

Tuning is decoupled from applying (K1): :func:`tune_tir` / :func:`tune_tasks` measure
candidates and write records to a database; :class:`ApplyDatabase` later replaces each
function that has a record by its best replayed schedule. Builds never tune. A task
scheduler (:mod:`.scheduler`) shares the global trial budget among the tasks, each task
measures the default rules' schedule first, and :mod:`.progress` shows a live table.

>>> from tilecraft import tune as ms
>>> db = ms.tune_tir(func, "cpu", work_dir="tune", max_trials_global=64, seed=0)
>>> sch = ms.compile_tir(db, func, "cpu")
>>> mod = ms.ApplyDatabase(work_dir="tune")(mod)
"""

from . import builder as builder
from . import cost_model as cost_model
from . import database as database
from . import features as features
from . import mutator as mutator
from . import postproc as postproc
from . import progress as progress
from . import runner as runner
from . import scheduler as scheduler
from . import search as search
from . import space as space
from .apply import ApplyDatabase as ApplyDatabase
from .apply import ApplyReport as ApplyReport
from .arg_info import ArgInfo as ArgInfo
from .arg_info import ArgRole as ArgRole
from .arg_info import args_info as args_info
from .builder import BuildArtifact as BuildArtifact
from .builder import Builder as Builder
from .builder import BuilderInput as BuilderInput
from .builder import BuilderResult as BuilderResult
from .builder import LocalBuilder as LocalBuilder
from .builder import RayBuilder as RayBuilder
from .builder import host_march as host_march
from .database import Database as Database
from .database import JSONDatabase as JSONDatabase
from .database import MemoryDatabase as MemoryDatabase
from .database import ModuleEquality as ModuleEquality
from .database import OrderedUnionDatabase as OrderedUnionDatabase
from .database import ScheduleFnDatabase as ScheduleFnDatabase
from .database import SQLiteDatabase as SQLiteDatabase
from .database import TuningRecord as TuningRecord
from .database import UnionDatabase as UnionDatabase
from .database import Workload as Workload
from .flops import flop_count as flop_count
from .progress import TuneProgress as TuneProgress
from .progress import plot_tuning_curves as plot_tuning_curves
from .runner import CUDARunner as CUDARunner
from .runner import EvaluatorConfig as EvaluatorConfig
from .runner import LocalRunner as LocalRunner
from .runner import RayRunner as RayRunner
from .runner import Runner as Runner
from .runner import RunnerInput as RunnerInput
from .runner import RunnerResult as RunnerResult
from .search import ReplayFunc as ReplayFunc
from .search import ReplayTrace as ReplayTrace
from .search import SearchStrategy as SearchStrategy
from .space import RuleSpace as RuleSpace
from .space import ScheduleFnSpace as ScheduleFnSpace
from .space import SpaceGenerator as SpaceGenerator
from .task import ExtractedTask as ExtractedTask
from .task import extract_tasks as extract_tasks
from .tune import Strategy as Strategy
from .tune import TuneIRMod as TuneIRMod
from .tune import TuneTIR as TuneTIR
from .tune import compile_tir as compile_tir
from .tune import tune_tasks as tune_tasks
from .tune import tune_tir as tune_tir

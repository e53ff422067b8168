"""The tuning entry points: ``tune_tasks``, ``tune_tir``, ``compile_tir``, ``TuneIRMod``,
``TuneTIR``.

A task scheduler (:mod:`.scheduler`: gradient-based by default, or round robin) gives turns
to the tasks, each turn measuring up to ``num_trials_per_iter`` new candidates of one task
(a task's first turn at most its share of what is left among the tasks not yet tried),
until the global budget (shared by all tasks) is spent or every task is done. A task's first
candidate is the default rules' schedule, so tuning never ends slower than the rules.
Budgets count the trials already in the database: rerunning with the same ``work_dir``
spends nothing on tasks that reached their budget and resumes the others, whose strategies
start from their records (never re-measuring a candidate already measured). Progress is
shown as a live table (:mod:`.progress`). Tuning only writes records; applying them is
:class:`~tilecraft.tune.ApplyDatabase`'s job.
"""

from __future__ import annotations

import enum
import logging
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import TuneError
from ..ir import IRModule, PrimFunc
from ..lower.merge_specializations import SPECIALIZATIONS_ATTR
from ..rules.specialize import SpecializeShapes
from ..runtime.backend import backend_of
from ..schedule import Schedule
from ..target import Target, as_target
from ._confirm import confirm
from ._defaults import rules_candidate
from ._library import LibrariesLike, library_candidates, library_plan, measure_libraries, reserved
from ._loop import TaskState, run_round, start_task
from ._pass import TunePass
from .builder.base import Builder
from .builder.local import LocalBuilder
from .cost_model.base import CostModel
from .cost_model.files import load_model
from .cost_model.random_model import RandomModel
from .database.base import Database
from .database.json_db import JSONDatabase
from .database.memory import MemoryDatabase
from .progress import TuneProgress, plot_tuning_curves, should_show
from .runner.base import Runner
from .runner.local import CUDARunner, LocalRunner
from .scheduler import TaskScheduler, as_scheduler
from .search.base import SearchStrategy
from .search.evolutionary import EvolutionarySearch
from .search.replay import ReplayFunc, ReplayTrace
from .space import SpaceLike, as_space, default_space
from .task import ExtractedTask, extract_tasks

logger = logging.getLogger("tilecraft.tune")


class Strategy(enum.Enum):
    """The built-in search strategies."""

    REPLAY_TRACE = "replay-trace"
    REPLAY_FUNC = "replay-func"
    EVOLUTIONARY = "evolutionary"


StrategyLike = Strategy | str | Callable[[], SearchStrategy]


def _strategy_kind(strategy: StrategyLike) -> Strategy | None:
    names = {s.value: s for s in Strategy}
    return strategy if isinstance(strategy, Strategy) else names.get(str(strategy))


def _strategy_factory(
    strategy: StrategyLike, model: CostModel | None = None
) -> Callable[[], SearchStrategy]:
    if callable(strategy) and not isinstance(strategy, str | Strategy):
        return strategy
    names = {s.value: s for s in Strategy}
    kind = _strategy_kind(strategy)
    if kind is Strategy.EVOLUTIONARY:
        shared = model if model is not None else RandomModel()
        return lambda: EvolutionarySearch(cost_model=shared)
    if kind is Strategy.REPLAY_TRACE:
        return ReplayTrace
    if kind is Strategy.REPLAY_FUNC:
        return ReplayFunc
    raise TuneError(f"strategy: expected one of {sorted(names)} or a factory, got {strategy!r}")


def _database(work_dir: str | os.PathLike[str] | None, database: Database | None) -> Database:
    if database is not None and work_dir is not None:
        raise TuneError("pass work_dir= or database=, not both")
    if database is not None:
        return database
    if work_dir is not None:
        return JSONDatabase(work_dir)
    current = Database.current()  # an empty database is falsy (len 0): compare with None
    return current if current is not None else MemoryDatabase()


def tune_tasks(
    tasks: Sequence[ExtractedTask],
    target: Target | str | None = None,
    *,
    max_trials_global: int,
    max_trials_per_task: int | None = None,
    num_trials_per_iter: int = 64,
    work_dir: str | os.PathLike[str] | None = None,
    database: Database | None = None,
    space: SpaceLike | None = None,
    strategy: StrategyLike = Strategy.REPLAY_TRACE,
    builder: Builder | None = None,
    runner: Runner | None = None,
    check_correctness: bool = True,
    seed: int = 0,
    task_scheduler: TaskScheduler | str = "gradient",
    seed_with_rules: bool = True,
    progress: bool | None = None,
    plot: str | os.PathLike[str] | None = None,
    cost_model: CostModel | str | None = None,
    libraries: LibrariesLike = None,
    confirm_top: int = 0,
) -> Database:
    """Tune ``tasks`` and return the database holding their records (TuneError on bad
    settings; a task that cannot be tuned, with symbolic shapes say, is skipped with a warning).

    Parameters
    ----------
    tasks, target
        From :func:`extract_tasks`; target default: the tasks', else current, else the CPU.
    max_trials_global, max_trials_per_task, num_trials_per_iter
        Trials of all tasks and of one (default: all), counting those already recorded;
        candidates measured per turn of a task.
    work_dir, database
        A :class:`JSONDatabase` in ``work_dir``, or ``database``, else the current one, else
        a new :class:`MemoryDatabase`.
    space, strategy
        A :class:`SpaceGenerator`, schedule function or tunable rule (default: the default
        space); ``"replay-trace"`` (default), ``"replay-func"`` or a strategy factory.
    builder, runner
        Default :class:`LocalBuilder` and :class:`LocalRunner` (:class:`CUDARunner` for
        CUDA), closed at the end; given ones are left open.
    check_correctness, seed
        Compare candidates with the unscheduled function; seed of the search (the same seed
        and the same measurements give the same search).
    task_scheduler
        ``"gradient"`` (default), ``"round-robin"`` or a :class:`TaskScheduler`.
    seed_with_rules
        Measure the default rules' schedule first in each task (default), so the best record
        is never slower than ``tc.compile`` without a database.
    progress
        Draw the live table and the summary: True, False, or None (default) for a terminal
        outside CI (see :mod:`tilecraft.tune.progress`).
    plot
        A PNG file to draw the tuning curves into (needs ``tilecraft[plot]``).
    libraries
        Libraries measured as one more candidate of each task they compute (``"blas"`` or
        :class:`~tilecraft.dispatch.measure.LibraryCandidate` objects; ``[]``: none). Default:
        BLAS when installed, on a CPU target, when the tuner makes its own runner (see
        :mod:`tilecraft.tune._library`).
    confirm_top
        At the end, measure each tuned task's ``confirm_top`` fastest functions and the
        rules' schedule twice more, side by side; the database ranks a function by the median
        of its measurements, so on a loaded machine a lucky measurement does not pick a
        slower schedule (0: off; these records are not trials, see :mod:`._confirm`).
    """
    _check_budget(max_trials_global, num_trials_per_iter)
    if confirm_top < 0:
        raise TuneError(f"tune: confirm_top must be >= 0, got {confirm_top}")
    _check_tasks(tasks)
    tgt = as_target(target if target is not None else (tasks[0].target if tasks else None))
    db = _database(work_dir, database)
    per_task = max_trials_global if max_trials_per_task is None else max_trials_per_task
    scheduler = as_scheduler(task_scheduler)
    model = _cost_model(cost_model, strategy, work_dir, seed)
    with _Workers(builder, runner, tgt) as (build, run):
        start = _Start(space, _strategy_factory(strategy, model), per_task, seed, seed_with_rules)
        states = start(tasks, db, tgt)
        show = should_show(progress)
        with TuneProgress(states, max_trials_global, show=show, work_dir=work_dir) as watch:
            spent = sum(s.trials for s in states)
            libs = library_candidates(libraries, runner, tgt)
            plan = library_plan(states, libs, db, max_trials_global - spent)
            budget = max_trials_global - len(plan)
            loop = _Loop(scheduler, budget, num_trials_per_iter, check_correctness)
            with reserved(plan):
                loop(states, db, build, run, watch)
            for state in states if confirm_top else ():
                if state.trials > state.resumed:
                    confirm(state, db, build, run, confirm_top)
            for state, rec in measure_libraries(plan, db, run):
                watch.update(state, [rec])
    if model is not None and work_dir is not None:
        model.save(os.path.join(work_dir, MODEL_DIR))
    if plot is not None:
        plot_tuning_curves(watch.curves(), plot)
    return db


MODEL_DIR = "cost_model"
"""Where in ``work_dir`` the evolutionary search's cost model is saved."""


def _cost_model(
    given: CostModel | str | None,
    strategy: StrategyLike,
    work_dir: str | os.PathLike[str] | None,
    seed: int,
) -> CostModel | None:
    """The one model of an ``"evolutionary"`` run (None for other strategies)."""
    if _strategy_kind(strategy) is not Strategy.EVOLUTIONARY:
        if given is not None:
            raise TuneError(f"cost_model= is for strategy='evolutionary', not {strategy!r}")
        return None
    if isinstance(given, CostModel):
        return given
    saved = None if work_dir is None else os.path.join(work_dir, MODEL_DIR)
    if given is None and saved is not None and os.path.exists(saved):
        return load_model(saved)
    if given == "random":
        return RandomModel(seed)
    if given in (None, "xgb"):
        from .cost_model.xgb import XGBModel

        try:
            return XGBModel(seed=seed)
        except TuneError:
            if given == "xgb":
                raise
            logger.info("xgboost is not installed: the evolutionary search uses RandomModel")
            return RandomModel(seed)
    raise TuneError(f"cost_model: expected a CostModel, 'xgb' or 'random', got {given!r}")


def _check_tasks(tasks: Sequence[ExtractedTask]) -> None:
    """Refuse what is not a list of tasks; warn that an empty one tunes nothing."""
    if isinstance(tasks, IRModule | PrimFunc):
        raise TuneError(
            f"tune_tasks: expected the tasks of a module, got a {type(tasks).__name__}; "
            "pass extract_tasks(mod, target)"
        )
    if not tasks:
        warnings.warn(
            "tune_tasks: no tasks to tune; the database is returned unchanged (a module "
            "straight from an export has no PrimFuncs to tune: legalize it first with "
            '`with target: mod = tc.graph.get_pipeline("zero")(mod)`, then extract_tasks)',
            stacklevel=3,
        )


class _Workers:
    """The builder and runner of a tuning run; those made here are closed at the end."""

    def __init__(self, builder: Builder | None, runner: Runner | None, target: Target) -> None:
        self.given = (builder, runner)
        self.builder = builder or LocalBuilder()
        gpu_runner = backend_of(target).runner == "cuda"
        self.runner = runner or (CUDARunner() if gpu_runner else LocalRunner())

    def __enter__(self) -> tuple[Builder, Runner]:
        return self.builder, self.runner

    def __exit__(self, *exc: object) -> None:
        if self.given[0] is None:
            self.builder.close()
        if self.given[1] is None:
            self.runner.close()


class _Start:
    """Starts every task: its strategy, its budget, the rules' schedule as first candidate."""

    def __init__(
        self,
        space: SpaceLike | None,
        factory: Callable[[], SearchStrategy],
        per_task: int,
        seed: int,
        with_rules: bool,
    ) -> None:
        self.space = space
        self.factory = factory
        self.per_task, self.seed, self.with_rules = per_task, seed, with_rules

    def __call__(
        self, tasks: Sequence[ExtractedTask], db: Database, target: Target
    ) -> list[TaskState]:
        gen = as_space(self.space) if self.space is not None else default_space(target)
        states = []
        for i, task in enumerate(tasks):
            first = rules_candidate(task.func, target, task.task_name) if self.with_rules else None
            try:
                state = start_task(
                    task, db, target, gen, self.factory(), self.per_task,
                    self.seed * 1_000_003 + i, first,
                )  # fmt: skip
            except TuneError as e:  # e.g. symbolic shapes: the other tasks are still tuned
                warnings.warn(f"task {task.task_name} is not tuned: {e}", stacklevel=4)
                continue
            states.append(state)
        return states


def _check_budget(max_trials_global: int, num_trials_per_iter: int) -> None:
    if max_trials_global < 0 or num_trials_per_iter < 1:
        raise TuneError(
            f"tune: max_trials_global must be >= 0 and num_trials_per_iter >= 1, got "
            f"{max_trials_global}, {num_trials_per_iter}"
        )


class _Loop:
    """Gives turns to the tasks until the global budget is spent or every task is done."""

    def __init__(self, scheduler: TaskScheduler, budget: int, per_iter: int, check: bool) -> None:
        self.scheduler = scheduler
        self.budget, self.per_iter, self.check = budget, per_iter, check

    def __call__(
        self,
        states: list[TaskState],
        db: Database,
        builder: Builder,
        runner: Runner,
        watch: TuneProgress,
    ) -> None:
        spent = sum(s.trials for s in states)
        while spent < self.budget and not all(s.done for s in states):
            state = states[self.scheduler.next_task(states)]
            count = min(self.per_iter, state.remaining, self.budget - spent)
            fresh = sum(1 for s in states if not s.done and s.trials == 0)
            if state.trials == 0 and fresh > 0:
                # a first turn leaves every other untried task its share of the budget (and
                # so its first candidate, the rules' schedule): 24 trials over 8 tasks went
                # 18 to the first task and none to six others
                count = min(count, max(1, (self.budget - spent) // fresh))
            if count <= 0:
                state.done = True
                continue
            records = run_round(state, count, db, builder, runner, self.check)
            spent += len(records)
            watch.update(state, records)


def _as_module(mod: IRModule | PrimFunc) -> IRModule:
    if isinstance(mod, PrimFunc):
        return IRModule({mod.name: mod})
    if isinstance(mod, IRModule):
        return mod
    raise TuneError(f"expected a PrimFunc or IRModule, got {type(mod).__name__}")


def tune_tir(
    mod: IRModule | PrimFunc,
    target: Target | str | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    max_trials_global: int = 64,
    **kwargs: Any,
) -> Database:
    """Tune every distinct PrimFunc of ``mod`` (a model module's called kernels included).

    Takes the keyword arguments of :func:`tune_tasks`; returns the database.
    """
    tgt = as_target(target)
    tasks = extract_tasks(_as_module(mod), tgt)
    return tune_tasks(tasks, tgt, work_dir=work_dir, max_trials_global=max_trials_global, **kwargs)


def compile_tir(
    database: Database, mod: IRModule | PrimFunc, target: Target | str | None = None
) -> Schedule | None:
    """The best recorded schedule of ``mod``'s function for ``target``, or None."""
    func = mod if isinstance(mod, PrimFunc) else None
    if func is None:
        funcs = _as_module(mod).prim_funcs()
        if len(funcs) != 1:
            raise TuneError(f"compile_tir: expected one PrimFunc, the module has {len(funcs)}")
        func = funcs[0][1]
    return database.lookup(func, target).schedule


class TuneIRMod(TunePass):
    """Tune the kernels of a module; returns the module unchanged (records go to the database).

    Parameters
    ----------
    work_dir
        Where records go (a :class:`JSONDatabase`); None: the current database.
    max_trials_global
        Trials of all tasks together.
    op_names
        Tune only tasks whose name contains one of these strings.
    target
        Default: the current target, else the CPU.
    specialize
        Sizes to tune functions with a symbolic extent at (tuning measures concrete
        shapes): extents per shape variable name (``{"seq": (64,)}``) or for every shape
        variable; each function gets :class:`~tilecraft.rules.SpecializeShapes` variants at
        those sizes and the variants are tuned (with their general function's weight).
        ``tc.compile(..., database=db, specialize=...)`` with the same sizes applies the
        records. Default: none (symbolic functions are not tuned, with a warning).
    **kwargs
        Further arguments of :func:`tune_tasks`.
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str] | None = None,
        max_trials_global: int = 64,
        op_names: Sequence[str] | None = None,
        *,
        target: Target | str | None = None,
        specialize: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> None:
        self.work_dir = work_dir
        self.max_trials_global = max_trials_global
        self.op_names = None if op_names is None else list(op_names)
        self.target = target
        self.specialize = specialize
        self.kwargs = kwargs
        self.database: Database | None = None

    def transform_module(self, mod: IRModule) -> IRModule:
        """Tune the selected tasks of ``mod``; ``mod`` is returned as is."""
        tgt = as_target(self.target)
        variants = mod
        if self.specialize is not None and len(self.specialize) > 0:
            variants = SpecializeShapes(self.specialize)(mod)
        tasks = extract_tasks(variants, tgt)
        if variants is not mod:  # a general function is tuned through its variants
            tasks = [t for t in tasks if not _has_variants(t)]
        if self.op_names is not None:
            tasks = [t for t in tasks if any(n in t.task_name for n in self.op_names)]
        self.database = tune_tasks(
            tasks,
            tgt,
            work_dir=self.work_dir,
            max_trials_global=self.max_trials_global,
            **self.kwargs,
        )
        return mod


def _has_variants(task: ExtractedTask) -> bool:
    """Whether every function of ``task`` has size variants (``SpecializeShapes``)."""
    return all(
        SPECIALIZATIONS_ATTR in func.attrs for m in task.dispatched for _, func in m.prim_funcs()
    )


class TuneTIR(TuneIRMod):
    """Tune every PrimFunc of a module (no ``op_names`` filter); returns it unchanged."""

    def __init__(
        self,
        work_dir: str | os.PathLike[str] | None = None,
        max_trials_global: int = 64,
        *,
        target: Target | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(work_dir, max_trials_global, target=target, **kwargs)

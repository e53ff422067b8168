"""EvolutionarySearch: a cost-model guided genetic search over a design space's decisions.

Each round (one call of ``generate``):

1. **Population.** Up to ``init_measured_ratio`` of ``population_size`` are the fastest
   measured candidates of the task (earlier runs' records included), then the space's
   sketches without sampling instructions not measured yet (each is one candidate, such as
   a variant of the default rules); the rest are fresh samples of the space's other
   sketches (their traces with every decision drawn anew).
2. **Generations.** ``num_generations`` times (none while nothing is measured and the model
   scores at random, as in a task's first round: the proposals are then random samples), the
   cost model scores the population; parents are drawn in proportion to their score, and
   each child is its parent mutated (with probability ``mutation_prob``, by a mutator drawn
   with its per-target probability) or the parent itself. Children are postprocessed;
   invalid ones are counted and dropped, and duplicates (by structural hash) kept once.
3. **Picking.** The best-scored candidates never measured are proposed, except an
   ``eps_greedy`` share that are fresh random samples, so a wrong model cannot trap the
   search.

Measurements come back through ``notify``: the model learns the normalised throughput of the
measured candidates and the fastest join the next rounds' populations.

A strategy is configured once and started per task: :meth:`EvolutionarySearch.start` returns
an :class:`EvolutionaryTask` whose every field is set when it is built.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ...errors import ScheduleError, TuneError
from ...ir import PrimFunc, structural_hash
from ...schedule import Schedule, Trace
from ...target import Target
from ..cost_model.base import CostModel
from ..cost_model.random_model import RandomModel
from ..database.workload import TuningRecord
from ..features import PerStoreFeature
from ..mutator import Mutator, default_mutators, pick_mutator
from ..mutator.base import check_probabilities
from ..postproc import Postproc, default_postprocs
from ..space.base import SpaceGenerator
from ._candidates import Candidate, CandidateMaker
from .base import DRAWS_PER_CANDIDATE, SearchStrategy

logger = logging.getLogger("tilecraft.tune")

ModelLike = CostModel | Callable[[int], CostModel] | str


def _model(model: ModelLike, seed: int) -> CostModel:
    if isinstance(model, CostModel):
        return model
    if model == "xgb":
        from ..cost_model.xgb import XGBModel

        return XGBModel(seed=seed)
    if model == "random":
        return RandomModel(seed)
    if callable(model) and not isinstance(model, str):
        made = model(seed)
        if isinstance(made, CostModel):
            return made
    raise TuneError(
        f"cost_model: expected a CostModel, a factory of one, 'xgb' or 'random', got {model!r}"
    )


class EvolutionarySearch(SearchStrategy):
    """Configuration of the evolutionary search (see the module docstring).

    Parameters
    ----------
    population_size
        Candidates per generation.
    init_measured_ratio
        Share of the first population taken from the fastest measured candidates.
    num_generations
        Generations per round.
    mutation_prob
        Probability that a child is mutated (else it is its parent).
    eps_greedy
        Share of each round's proposals that are random samples.
    cost_model
        A model, a factory ``f(seed)``, ``"xgb"`` (the default; needs the ``tune`` extra) or
        ``"random"``. A given model object is shared by every task started from this
        strategy (transfer between tasks); names and factories make one per task.
    mutators
        ``{mutator: probability}``; default :func:`~tilecraft.tune.mutator.default_mutators`.
    postprocs
        Default :func:`~tilecraft.tune.postproc.default_postprocs` of the target.
    """

    def __init__(
        self,
        *,
        population_size: int = 32,
        init_measured_ratio: float = 0.2,
        num_generations: int = 3,
        mutation_prob: float = 0.85,
        eps_greedy: float = 0.05,
        cost_model: ModelLike = "xgb",
        mutators: Mapping[Mutator, float] | None = None,
        postprocs: Sequence[Postproc] | None = None,
    ) -> None:
        super().__init__()
        if population_size < 1 or num_generations < 0:
            raise TuneError("EvolutionarySearch: population_size >= 1, num_generations >= 0")
        for name, value in (
            ("init_measured_ratio", init_measured_ratio),
            ("mutation_prob", mutation_prob),
            ("eps_greedy", eps_greedy),
        ):
            if not 0.0 <= value <= 1.0:
                raise TuneError(f"EvolutionarySearch: {name} must be in [0, 1], got {value}")
        self.population_size = population_size
        self.init_measured_ratio = init_measured_ratio
        self.num_generations = num_generations
        self.mutation_prob = mutation_prob
        self.eps_greedy = eps_greedy
        self.cost_model = cost_model
        self.mutators = None if mutators is None else check_probabilities(mutators)
        self.postprocs = None if postprocs is None else list(postprocs)
        self._task: EvolutionaryTask | None = None

    def start(
        self,
        func: PrimFunc,
        target: Target,
        space: SpaceGenerator,
        seed: int,
        records: Sequence[TuningRecord] = (),
    ) -> EvolutionaryTask:
        """The search of one task, started from its earlier ``records``."""
        return EvolutionaryTask(self, func, target, space, seed, records)

    # The tuning loop's protocol: initialize once per task, then generate / notify.
    def initialize(
        self,
        func: PrimFunc,
        target: Target,
        space: SpaceGenerator,
        seed: int,
        records: Sequence[TuningRecord] = (),
    ) -> None:
        """Start searching ``func``'s ``space`` (see :meth:`start`)."""
        super().initialize(func, target, space, seed, records)
        self._task = self.start(func, target, space, seed, records)
        self._mirror()

    def _started(self) -> EvolutionaryTask:
        if self._task is None:
            raise TuneError("EvolutionarySearch: start (or initialize) it on a task first")
        return self._task

    def _mirror(self) -> None:
        task = self._started()
        self.invalid, self.duplicates = task.invalid, task.duplicates
        self.exhausted, self.last_error = task.exhausted, task.last_error
        self.measured = task.measured

    def _draw(self) -> Schedule | None:
        return self._started()._draw()

    def generate(self, count: int) -> list[Schedule]:
        """Up to ``count`` new candidates of the started task."""
        out = self._started().generate(count)
        self._mirror()
        return out

    def notify(self, candidates: Sequence[Schedule], records: Sequence[TuningRecord]) -> None:
        """Pass the measurements to the started task."""
        self._started().notify(candidates, records)
        self._mirror()


class EvolutionaryTask(SearchStrategy):
    """The evolutionary search of one task (made by :meth:`EvolutionarySearch.start`)."""

    def __init__(
        self,
        config: EvolutionarySearch,
        func: PrimFunc,
        target: Target,
        space: SpaceGenerator,
        seed: int,
        records: Sequence[TuningRecord] = (),
    ) -> None:
        super().__init__()
        super().initialize(func, target, space, seed, records)
        self.config = config
        self.task_func = func
        self.group = structural_hash(func)
        self.model = _model(config.cost_model, seed)
        self.mutators = (
            dict(config.mutators) if config.mutators is not None else default_mutators(target)
        )
        postprocs = config.postprocs if config.postprocs is not None else None
        self.maker = CandidateMaker(
            func,
            list(postprocs) if postprocs is not None else default_postprocs(target),
            PerStoreFeature(target),
        )
        self._sketch_failures = 0
        self.sketches: list[Trace] = self._sketches(space, func, target)
        # A sketch without sampling instructions is one candidate (a rule variant, say): it
        # joins every population until measured, and random draws go to the others.
        self.fixed = [t for t in self.sketches if not t.sampling_indices()]
        self.sampled = [t for t in self.sketches if t.sampling_indices()] or self.sketches
        self.best: list[tuple[float, Trace]] = []
        self.proposed: dict[str, Candidate] = {}
        self._learn_records(records)
        self.sync()

    def sync(self) -> None:
        """Copy the candidate maker's counts into the strategy's."""
        self.invalid = self.maker.invalid + self._sketch_failures
        if self.maker.last_error is not None:
            self.last_error = self.maker.last_error

    def _sketches(self, space: SpaceGenerator, func: PrimFunc, target: Target) -> list[Trace]:
        for _ in range(DRAWS_PER_CANDIDATE):
            try:
                found = space.generate(func, target, self._seed())
            except ScheduleError as e:
                self._sketch_failures += 1
                self.last_error = f"{e.primitive}: {e.short}"
                continue
            return [s.trace.simplified(remove_postproc=True) for s in found]
        return []

    def _learn_records(self, records: Sequence[TuningRecord]) -> None:
        """Teach the model the task's earlier measurements; remember the fastest traces."""
        feats, secs = [], []
        for rec in records:
            cand = self.maker.make(rec.trace, self.rng)
            if cand is None:
                continue
            feats.append(cand.features)
            secs.append(rec.mean_secs if rec.ok else None)
            if rec.ok:
                self.best.append((rec.mean_secs, cand.trace))
        self.best.sort(key=lambda t: t[0])
        if feats:
            self.model.update(self.group, feats, secs)

    # -- proposing --------------------------------------------------------------------------
    def _draw(self) -> Schedule | None:
        """One fresh random sample of the space (None: the space has no sketch)."""
        cand = self._random_candidate()
        return None if cand is None else cand.sch

    def _random_candidate(self) -> Candidate | None:
        if not self.sampled:
            return None
        for _ in range(DRAWS_PER_CANDIDATE):
            sketch = self.sampled[self.rng.randrange(len(self.sampled))]
            cand = self.maker.make(_cleared(sketch), self.rng)
            if cand is not None:
                return cand
        return None

    def _initial_population(self, size: int) -> dict[str, Candidate]:
        population: dict[str, Candidate] = {}
        seeded = min(len(self.best), int(size * self.config.init_measured_ratio))
        for _, trace in self.best[:seeded]:
            cand = self.maker.make(trace, self.rng)
            if cand is not None:
                population.setdefault(cand.key, cand)
        for trace in self.fixed:
            cand = self.maker.make(trace, self.rng)
            if len(population) < size and cand is not None and cand.key not in self.measured:
                population.setdefault(cand.key, cand)
        for _ in range(size * DRAWS_PER_CANDIDATE):
            if len(population) >= size:
                break
            cand = self._random_candidate()
            if cand is None:
                break
            population.setdefault(cand.key, cand)
        return population

    def _scores(self, cands: Sequence[Candidate]) -> np.ndarray:
        return np.asarray(self.model.predict([c.features for c in cands]), dtype=np.float64)

    def _evolve(self, population: dict[str, Candidate]) -> dict[str, Candidate]:
        """The next generation: children of score-weighted parents, mutated or copied."""
        parents = list(population.values())
        scores = self._scores(parents)
        weights = scores - scores.min() + 1e-6
        cumulative = np.cumsum(weights)
        children: dict[str, Candidate] = {}
        for _ in range(self.config.population_size):
            pick = int(np.searchsorted(cumulative, self.rng.random() * cumulative[-1]))
            parent = parents[min(pick, len(parents) - 1)]
            child = parent
            if self.rng.random() < self.config.mutation_prob:
                mutator = pick_mutator(self.mutators, self.rng)
                trace = (
                    None
                    if mutator is None
                    else mutator.apply(self.task_func, parent.trace, self.rng)
                )
                made = None if trace is None else self.maker.make(trace, self.rng)
                child = made if made is not None else parent
            children.setdefault(child.key, child)
        return children

    def generate(self, count: int) -> list[Schedule]:
        """Up to ``count`` new candidates: the model's best, and an ε share at random."""
        guided = bool(self.best) or self.model.informed
        # With nothing measured and random scores, generations would only mutate random
        # samples into other random samples: draw the proposals directly (the first round).
        population = self._initial_population(self.config.population_size if guided else count)
        seen = dict(population)
        for _ in range(self.config.num_generations if guided else 0):
            if not population:
                break
            population = self._evolve(population)
            seen.update(population)
        fresh = [c for k, c in seen.items() if k not in self.measured]
        n_random = min(count, math.floor(count * self.config.eps_greedy + self.rng.random()))
        picks = self._best_of(fresh, count - n_random)
        picks += self._random_picks(n_random + (count - n_random - len(picks)), picks)
        for cand in picks:
            self.measured.add(cand.key)
            self.proposed[cand.key] = cand
        self.exhausted = len(picks) < count
        self.sync()
        logger.debug(
            "evolutionary search: %d proposed, %d invalid, dropped %s",
            len(picks),
            self.invalid,
            dict(self.maker.dropped),
        )
        return [c.sch for c in picks]

    def _best_of(self, cands: list[Candidate], n: int) -> list[Candidate]:
        if n <= 0 or not cands:
            return []
        scores = self._scores(cands)
        order = sorted(range(len(cands)), key=lambda i: (-scores[i], cands[i].key))
        return [cands[i] for i in order[:n]]

    def _random_picks(self, n: int, taken: list[Candidate]) -> list[Candidate]:
        out: list[Candidate] = []
        keys = {c.key for c in taken}
        for _ in range(n * DRAWS_PER_CANDIDATE):
            if len(out) >= n:
                break
            cand = self._random_candidate()
            if cand is None:
                break
            if cand.key in self.measured or cand.key in keys:
                self.duplicates += 1
                continue
            keys.add(cand.key)
            out.append(cand)
        return out

    # -- learning ---------------------------------------------------------------------------
    def notify(self, candidates: Sequence[Schedule], records: Sequence[TuningRecord]) -> None:
        """Teach the model the measured candidates; keep the fastest for later populations.

        A candidate the search did not propose (the rules' schedule, measured first) is
        learned from its record's trace, so its decisions seed and get mutated too."""
        del candidates
        feats, secs = [], []
        for rec in records:
            cand = self.proposed.pop(rec.func_hash or "", None)
            if cand is None:
                cand = self.maker.make(rec.trace, self.rng)
            if cand is None:
                continue
            feats.append(cand.features)
            secs.append(rec.mean_secs if rec.ok else None)
            if rec.ok:
                self.best.append((rec.mean_secs, cand.trace))
        self.best.sort(key=lambda t: t[0])
        if feats:
            self.model.update(self.group, feats, secs)


def _cleared(trace: Trace) -> Trace:
    """``trace`` with every sampling decision undecided (drawn anew on replay)."""
    for index in trace.sampling_indices():
        trace = trace.with_decision(index, None)
    return trace

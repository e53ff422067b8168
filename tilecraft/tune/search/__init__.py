"""Search strategies: which candidates to measure next."""

from .base import SearchStrategy as SearchStrategy
from .evolutionary import EvolutionarySearch as EvolutionarySearch
from .evolutionary import EvolutionaryTask as EvolutionaryTask
from .replay import ReplayFunc as ReplayFunc
from .replay import ReplayTrace as ReplayTrace

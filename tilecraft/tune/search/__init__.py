"""Search strategies: which candidates to measure next."""

from .base import SearchStrategy as SearchStrategy
from .replay import ReplayFunc as ReplayFunc
from .replay import ReplayTrace as ReplayTrace

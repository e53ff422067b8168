"""Mutators: neighbouring candidates made by changing one sampling decision of a trace."""

from ...target import Target, as_target
from .base import Mutator as Mutator
from .base import pick_mutator as pick_mutator
from .categorical import MutateParallel as MutateParallel
from .categorical import MutateThreadBinding as MutateThreadBinding
from .categorical import MutateTileCache as MutateTileCache
from .categorical import MutateUnroll as MutateUnroll
from .compute_location import MutateComputeLocation as MutateComputeLocation
from .tile_size import MutateTileSize as MutateTileSize


def default_mutators(target: Target | str | None = None) -> dict[Mutator, float]:
    """The mutators of ``target`` with the probability of picking each.

    CPU: tile sizes 0.85, write cache and packing 0.05, compute location 0.05, unroll 0.03,
    parallel extent 0.02.
    GPU: tile sizes 0.9, unroll 0.08, thread binding 0.02. Tile sizes carry most of the
    performance; the rest are rarer moves of decisions with few candidates.
    """
    if as_target(target).kind == "cuda":
        return {MutateTileSize(): 0.9, MutateUnroll(): 0.08, MutateThreadBinding(): 0.02}
    return {
        MutateTileSize(): 0.85,
        MutateTileCache(): 0.05,
        MutateComputeLocation(): 0.05,
        MutateUnroll(): 0.03,
        MutateParallel(): 0.02,
    }

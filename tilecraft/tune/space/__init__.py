"""Design spaces: schedule functions and tunable rules whose traces record sampled decisions."""

from ...errors import TuneError
from ...runtime.backend import backend_of
from ...target import Target
from .base import RuleSpace as RuleSpace
from .base import ScheduleFn as ScheduleFn
from .base import ScheduleFnSpace as ScheduleFnSpace
from .base import SpaceGenerator as SpaceGenerator
from .base import SpaceLike as SpaceLike
from .base import TunableRule as TunableRule
from .base import as_space as as_space
from .base import resampled as resampled
from .cpu_default import cpu_default_space as cpu_default_space


def default_space(target: Target) -> SpaceGenerator:
    """The space used when none is given: :func:`cpu_default_space` on CPUs.

    Raises
    ------
    TuneError
        For GPU targets, which need thread bindings no default space provides yet: pass
        ``space=`` (a schedule function or a rule with ``tunable=True``).
    """
    if backend_of(target).needs_gpu_schedule:
        raise TuneError(
            f"no default design space for {target} yet; pass space= (a schedule function or "
            "a rule applied with tunable=True)"
        )
    return ScheduleFnSpace(cpu_default_space, name="cpu_default_space")

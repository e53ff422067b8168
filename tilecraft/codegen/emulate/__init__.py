"""The GPU emulator's C: the GPU-lowered program, run on the CPU with thread semantics.

:func:`emit_emulator` (:mod:`.source`) turns functions lowered for the GPU into one C unit:
every kernel a thread body (:mod:`._kernel`, with :mod:`._layout` and :mod:`._warp`), every
function a host function of the CPU ABI, plus the emulator runtime (:mod:`.runtime`: fibers,
barriers, warp collectives, race shadows; its fiber switch in :mod:`._fibers`) and the
intrinsics the kernels use. Warp-collective and asynchronous intrinsics are registered with the
extension point :mod:`.intrinsics`; the tensor-core ones (:mod:`.tensor_core`) compute with the
C reference semantics of :mod:`.tensor_core_semantics`. The runtime layer
(:mod:`tilecraft.runtime.emulate`) compiles, loads and runs such a unit.
"""

from __future__ import annotations

from .intrinsics import LANE as LANE
from .intrinsics import Access as Access
from .intrinsics import AsyncIntrinsic as AsyncIntrinsic
from .intrinsics import AsyncRole as AsyncRole
from .intrinsics import CollectiveCall as CollectiveCall
from .intrinsics import LaneRegion as LaneRegion
from .intrinsics import LaneResult as LaneResult
from .intrinsics import LaneValue as LaneValue
from .intrinsics import WarpCollective as WarpCollective
from .intrinsics import register_fragment_scope as register_fragment_scope
from .intrinsics import register_intrinsic as register_intrinsic
from .intrinsics import unregister_intrinsic as unregister_intrinsic
from .source import EmulatorSource as EmulatorSource
from .source import Site as Site
from .source import SiteKind as SiteKind
from .source import emit_emulator as emit_emulator

__all__ = [
    "LANE",
    "Access",
    "AsyncIntrinsic",
    "AsyncRole",
    "CollectiveCall",
    "EmulatorSource",
    "LaneRegion",
    "LaneResult",
    "LaneValue",
    "Site",
    "SiteKind",
    "WarpCollective",
    "emit_emulator",
    "register_fragment_scope",
    "register_intrinsic",
    "unregister_intrinsic",
]

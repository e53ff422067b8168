"""Warp-collective and asynchronous intrinsics of the GPU emulator: the extension point.

A lowered GPU statement that the threads of a warp execute *together* (a shuffle, an
``mma.sync``, an ``ldmatrix``) cannot be emulated thread by thread: its result depends on the
other lanes' operands. Such a statement is registered here as a :class:`WarpCollective`:

* ``matches(stmt)`` says whether the registration handles a statement;
* ``describe(stmt)`` lists, as a :class:`CollectiveCall`, what each lane passes — values it
  evaluates (:class:`LaneValue`), values it receives and stores (:class:`LaneResult`), and
  memory it hands over by address (:class:`LaneRegion`, e.g. a register fragment or a
  shared-memory row) — plus the mask of lanes that execute it and integer immediates;
* ``c_source`` defines ``c_function``, ``void f(tc_emu_warp_call* call)``, which computes
  every arrived lane's outputs from all lanes' operands.

The emulator suspends each lane at the statement until every lane of ``mask`` (that exists in
the block) has arrived, then the last lane to arrive calls ``c_function`` once. The C view of a
call (see :mod:`.runtime`)::

    typedef struct tc_emu_warp_call {
      uint32_t present, arrived, mask;  // lanes that exist / executed the call / the mask
      int32_t warp, nops;
      const int32_t* sizes;             // bytes of each operand (a region: all its elements)
      const int64_t* imm;               // CollectiveCall.immediates
      void* const* ops[32];             // ops[lane][k]: lane's k-th operand, NULL if absent
      struct tc_emu_block* blk;
    } tc_emu_warp_call;

Operands are pointers in the order of :attr:`CollectiveCall.operands`: a :class:`LaneValue`
points to the value in its *compute* type (``float`` for 16-bit floats), a
:class:`LaneResult` to where the implementation writes the lane's result (compute type), a
:class:`LaneRegion` to the region's first element in its *storage* type (``uint16_t`` for
16-bit floats). ``tc_emu_warp_fail(call, lane, other_lane, "why")`` reports a lane that did
something no GPU defines (e.g. reading a lane that did not execute the call); the emulator then
raises :class:`~tilecraft.errors.EmulationError` after the launch. Under
``emulate="racecheck"`` the emulator checks every :class:`LaneRegion` against its buffer's
bounds, checks the regions read before the call (uninitialized or racing reads) and marks the
regions written after it, so implementations need not know about race checking.

Three helpers for operands that depend on the lane: :data:`LANE` is the executing lane's index
in its warp (``0..31``), usable in a region's ``base``; ``LaneRegion(..., lanes=mask)`` hands the
region over only from the lanes of ``mask`` (the others pass ``NULL`` and nothing of theirs is
checked: ``ldmatrix.x2`` ignores the addresses of lanes 16-31); and
:func:`register_fragment_scope` declares a storage scope whose buffers hold *warp-distributed
fragments* — each element of such a buffer is a tile spread over the 32 lanes, every lane
holding ``lane_elements`` values of it in its own storage (a WMMA fragment, whose distribution
CUDA leaves unspecified: the registration chooses one). A collective's shared C helpers (a
reference implementation several adapters call) go in ``WarpCollective.c_requires`` and are
added to a unit once.

Asynchronous copies (``cp.async``) register an :class:`AsyncIntrinsic` per role: ``COPY``
(``copy(stmt)`` gives the destination and source :class:`LaneRegion`; the copy is queued per
thread), ``COMMIT`` (the queued copies form a group) and ``WAIT`` (``in_flight(stmt)``: every
committed group but the newest ``in_flight`` ones completes now — the bytes are copied and,
under race checking, the destination counts as written by the waiting thread at that moment).
A ``COPY`` may match a loop (``For``) as well as a call statement. Under race checking the
destination of a queued copy is *in flight* from the copy to its wait: any thread reading it
(the issuing one included) or storing to it in between is reported.

:data:`SHUFFLE` (``__shfl_down_sync``/``__shfl_sync``, the lowered
:class:`~tilecraft.lower.gpu_nodes.WarpShuffle`) is registered through this same interface.
Register new intrinsics at import time of the module that defines their CUDA emission.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from ...errors import CodegenError
from ...ir import Buffer, DataType, Expr, Stmt, cast, dtype
from ...lower.gpu_nodes import FULL_MASK, WarpShuffle

_INT32 = dtype("int32")


class Access(Enum):
    """How a collective uses a :class:`LaneRegion`."""

    READ = "read"
    WRITE = "write"
    READ_WRITE = "read_write"


@dataclass(frozen=True)
class LaneValue:
    """An input each lane evaluates; passed as a pointer to the value (compute type)."""

    value: Expr


@dataclass(frozen=True)
class LaneResult:
    """An output: the implementation writes the lane's value; the lane stores it at
    ``buffer[index]`` afterwards (an ordinary store: bounds- and race-checked)."""

    buffer: Buffer
    index: Expr


@dataclass(frozen=True)
class LaneRegion:
    """``count`` elements of ``buffer`` from flat index ``base``, passed by address by the
    lanes of ``lanes`` (the others pass ``NULL``). With a ``guard`` (the source of an
    asynchronous copy), the region is read only where it holds; elsewhere the copy writes
    zeros (cp.async's zero-fill form)."""

    buffer: Buffer
    base: Expr
    count: int
    access: Access
    lanes: int = FULL_MASK
    guard: Expr | None = None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise CodegenError(f"LaneRegion {self.buffer.name}: count must be >= 1")
        if not 0 < self.lanes <= FULL_MASK:
            raise CodegenError(f"LaneRegion {self.buffer.name}: lanes must be a 32-bit mask")


@dataclass(frozen=True, eq=False)
class LaneIndex(Expr):
    """The executing thread's lane in its warp, ``0..31`` (use :data:`LANE`)."""

    dtype: DataType = _INT32


LANE = LaneIndex()
"""The executing lane's index in its warp, for the operands a ``describe`` builds."""


Operand = LaneValue | LaneResult | LaneRegion


@dataclass(frozen=True)
class CollectiveCall:
    """What every lane passes to one execution of a warp collective."""

    operands: tuple[Operand, ...]
    mask: int = FULL_MASK
    immediates: tuple[int, ...] = ()


@dataclass(frozen=True)
class WarpCollective:
    """A statement the lanes of a warp execute together (see the module docstring)."""

    name: str
    matches: Callable[[Stmt], bool]
    describe: Callable[[Stmt], CollectiveCall]
    c_function: str
    c_source: str
    c_requires: tuple[tuple[str, str], ...] = ()  # (key, C text) added to a unit once, first


class AsyncRole(Enum):
    """The part an :class:`AsyncIntrinsic` plays in an asynchronous copy."""

    COPY = "copy"
    COMMIT = "commit"
    WAIT = "wait"


@dataclass(frozen=True)
class AsyncIntrinsic:
    """One statement of asynchronous copying (see the module docstring)."""

    name: str
    role: AsyncRole
    matches: Callable[[Stmt], bool]
    copy: Callable[[Stmt], tuple[LaneRegion, LaneRegion]] | None = None
    in_flight: Callable[[Stmt], int] | None = None

    def __post_init__(self) -> None:
        if (self.role is AsyncRole.COPY) != (self.copy is not None):
            raise CodegenError(f"AsyncIntrinsic {self.name}: copy= is set iff the role is COPY")
        if (self.role is AsyncRole.WAIT) != (self.in_flight is not None):
            raise CodegenError(f"AsyncIntrinsic {self.name}: in_flight= is set iff role is WAIT")


Intrinsic = WarpCollective | AsyncIntrinsic
_REGISTRY: dict[str, Intrinsic] = {}


def register_intrinsic(intrinsic: Intrinsic) -> None:
    """Register (or replace, by name) how the emulator runs a kind of statement."""
    if not intrinsic.name.isidentifier():
        raise CodegenError(f"emulator intrinsic name must be an identifier: {intrinsic.name!r}")
    _REGISTRY[intrinsic.name] = intrinsic


def unregister_intrinsic(name: str) -> None:
    """Remove the registration ``name`` (no error when there is none)."""
    _REGISTRY.pop(name, None)


_FRAGMENT_SCOPES: dict[str, int] = {}


def register_fragment_scope(scope: str, lane_elements: int) -> None:
    """Declare ``scope`` a scope of warp-distributed fragments (see the module docstring):
    every lane stores ``lane_elements`` values of each element of a buffer in ``scope``."""
    if lane_elements < 1:
        raise CodegenError(f"fragment scope {scope!r}: lane_elements must be >= 1")
    _FRAGMENT_SCOPES[scope] = lane_elements


def lane_elements(buffer: Buffer) -> int:
    """Values one lane stores per element of ``buffer`` (1 outside fragment scopes)."""
    return _FRAGMENT_SCOPES.get(buffer.scope, 1)


def find_intrinsic(stmt: Stmt) -> Intrinsic | None:
    """The registration handling ``stmt`` (the latest registered wins), or None."""
    for entry in reversed(list(_REGISTRY.values())):
        if entry.matches(stmt):
            return entry
    return None


SHUFFLE_DOWN, SHUFFLE_IDX = 0, 1

_SHUFFLE_C = r"""/* __shfl_down_sync / __shfl_sync over the arrived lanes of a warp.
   operands: 0 result (out), 1 value (in), 2 offset or source lane (in, int32);
   immediates: kind (0 down, 1 idx), width. */
static void tc_emu_shfl(tc_emu_warp_call* c) {
  int32_t kind = (int32_t)c->imm[0], width = (int32_t)c->imm[1];
  for (int32_t lane = 0; lane < TC_EMU_WARP; ++lane) {
    if (!((c->arrived >> lane) & 1u)) continue;
    int32_t arg = *(const int32_t*)c->ops[lane][2];
    int32_t base = lane & ~(width - 1), src;
    if (kind == 0) src = (lane - base) + arg < width && arg >= 0 ? lane + arg : lane;
    else src = base + (((arg % width) + width) % width);
    if (!((c->arrived >> src) & 1u)) {
      tc_emu_warp_fail(c, lane, src, (c->present >> src) & 1u
          ? "a shuffle reads a lane that did not execute it"
          : "a shuffle reads a lane the block does not have");
      memset(c->ops[lane][0], 0xff, (size_t)c->sizes[0]);
      continue;
    }
    memcpy(c->ops[lane][0], c->ops[src][1], (size_t)c->sizes[0]);
  }
}
"""


def _describe_shuffle(stmt: Stmt) -> CollectiveCall:
    assert isinstance(stmt, WarpShuffle)
    kind = SHUFFLE_DOWN if stmt.kind == "down" else SHUFFLE_IDX
    lane = stmt.lane if str(stmt.lane.dtype) == "int32" else cast(stmt.lane, "int32")
    return CollectiveCall(
        (LaneResult(stmt.buffer, stmt.index), LaneValue(stmt.value), LaneValue(lane)),
        stmt.mask,
        (kind, stmt.width),
    )


SHUFFLE = WarpCollective(
    "shfl", lambda s: isinstance(s, WarpShuffle), _describe_shuffle, "tc_emu_shfl", _SHUFFLE_C
)
"""The warp shuffle of lowered cross-thread reductions."""
register_intrinsic(SHUFFLE)

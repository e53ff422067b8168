"""Building and calling emulated GPU programs (``tc.build(..., target=cuda, emulate=...)``).

``emulate`` chooses how a GPU-scheduled function runs without a GPU (:class:`EmulateMode`):

* ``True`` — the GPU-lowered program (the kernels and launches the CUDA backend would run)
  runs on the CPU with real thread semantics (:mod:`tilecraft.codegen.emulate`);
* ``"racecheck"`` — the same, and shared-memory conflicts within a barrier phase, global-memory
  conflicts between threads of one launch that nothing orders, reads of
  uninitialized shared or local memory and out-of-bounds accesses raise
  :class:`~tilecraft.errors.RaceCheckError`;
* ``"serial"`` — the quick mode: thread-bound loops run as plain serial loops through the CPU
  pipeline, proving only the schedule's serial meaning;
* ``False`` — no emulation: a CUDA target compiles for the GPU.

A CPU target has no GPU lowering to emulate: there ``True`` means ``"serial"`` and
``"racecheck"`` is refused.

After each call of an emulated function the runtime reads the library's fault record
(``tc_emu_error``, see :mod:`tilecraft.codegen.emulate.runtime`); a fault raises
:class:`~tilecraft.errors.EmulationError` (threads that cannot all meet at a barrier or a warp
collective, in every mode) or :class:`~tilecraft.errors.RaceCheckError` (an out-of-bounds
access raises :class:`EmulatedBoundsError`, which is also a
:class:`~tilecraft.runtime.BoundsCheckError`). The first fault is described, the launch stops
after its block, the record is cleared, and the library stays usable. Like the bounds record,
the fault record is per library: concurrent calls from several Python threads may see each
other's faults.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from ..codegen.emulate import EmulatorSource, Site, SiteKind
from ..codegen.emulate.runtime import (
    ERROR_KINDS,
    FLAG_ASYNC,
    FLAG_OTHER_WRITE,
    FLAG_SAME,
    FLAG_WRITE,
    WARP_SIZE,
)
from ..errors import EmulationError, RaceCheckError, RaceKind
from ..ir import PrimFunc
from .arguments import ArgumentError, ArgumentTypeError
from .bounds import BoundsCheckError
from .module import Module


class EmulateMode(Enum):
    """How ``tc.build`` runs a GPU schedule without a GPU (see the module docstring)."""

    OFF = "off"
    SERIAL = "serial"
    THREADS = "threads"
    RACECHECK = "racecheck"

    @property
    def truthful(self) -> bool:
        """True for the modes that run the GPU-lowered program."""
        return self in (EmulateMode.THREADS, EmulateMode.RACECHECK)


EmulateArg = bool | str | EmulateMode
"""What ``emulate=`` accepts: True, False, ``"serial"``, ``"racecheck"`` or an EmulateMode."""


def emulate_mode(value: object, where: str = "build") -> EmulateMode:
    """The :class:`EmulateMode` of an ``emulate=`` argument.

    Raises
    ------
    ArgumentTypeError
        For anything but a bool, a string or an EmulateMode.
    ArgumentError
        For a string other than ``"serial"`` and ``"racecheck"``.
    """
    if isinstance(value, EmulateMode):
        return value
    if value is True:
        return EmulateMode.THREADS
    if value is False:
        return EmulateMode.OFF
    if isinstance(value, str):
        if value in ("serial", "racecheck"):
            return EmulateMode(value)
        raise ArgumentError(
            f"{where}: emulate must be True, False, 'serial' or 'racecheck', got {value!r}"
        )
    raise ArgumentTypeError(
        f"{where}: emulate must be True, False, 'serial' or 'racecheck', got "
        f"{type(value).__name__} {value!r}"
    )


class EmulatedBoundsError(RaceCheckError, BoundsCheckError):
    """An emulated kernel accessed a buffer out of bounds (the access was skipped)."""


class FaultRecord(ctypes.Structure):
    """Layout of the C ``tc_emu_record``."""

    _fields_ = [
        ("count", ctypes.c_int64),
        ("kernel", ctypes.c_char_p),
        ("detail", ctypes.c_char_p),
        ("kind", ctypes.c_int32),
        ("site", ctypes.c_int32),
        ("other_site", ctypes.c_int32),
        ("flags", ctypes.c_int32),
        ("thread", ctypes.c_int32),
        ("other", ctypes.c_int32),
        ("block", ctypes.c_int32 * 3),
        ("dim", ctypes.c_int32 * 3),
        ("other_block", ctypes.c_int32 * 3),
        ("pad", ctypes.c_int32),
        ("phase", ctypes.c_int64),
        ("index", ctypes.c_int64),
        ("extent", ctypes.c_int64),
    ]


Index3 = tuple[int, int, int]


def _xyz(linear: int, dim: tuple[int, ...]) -> Index3:
    x, y = max(dim[0], 1), max(dim[1], 1)
    return (linear % x, (linear // x) % y, linear // (x * y))


def _text(t: Index3) -> str:
    return f"({t[0]}, {t[1]}, {t[2]})"


class _Fault:
    """One read-out fault record, with the unit's sites to name what it touched."""

    def __init__(self, rec: FaultRecord, emu: EmulatorSource) -> None:
        self.kind = ERROR_KINDS.get(rec.kind, "fault")
        self.kernel = (rec.kernel or b"?").decode(errors="replace")
        self.detail = (rec.detail or b"").decode(errors="replace")
        self.function = emu.kernels.get(self.kernel, self.kernel)
        self.site = emu.sites[rec.site] if 0 <= rec.site < len(emu.sites) else None
        other = rec.other_site
        self.other_site = emu.sites[other] if 0 <= other < len(emu.sites) else None
        self.flags = rec.flags
        dim = tuple(int(d) for d in rec.dim)
        self.block: Index3 = (int(rec.block[0]), int(rec.block[1]), int(rec.block[2]))
        ob = rec.other_block
        self.other_block: Index3 = (int(ob[0]), int(ob[1]), int(ob[2]))
        self.linear = int(rec.thread)  # the thread's linear index (-1: none)
        self.thread = _xyz(rec.thread, dim) if rec.thread >= 0 else None
        self.other = _xyz(rec.other, dim) if rec.other >= 0 else None
        self.phase, self.index, self.extent = int(rec.phase), int(rec.index), int(rec.extent)
        self.count = int(rec.count)

    @property
    def threads(self) -> tuple[Index3, ...]:
        return tuple(t for t in (self.thread, self.other) if t is not None)

    def fields(self, buffer: str) -> dict[str, Any]:
        """Keyword arguments of :class:`~tilecraft.errors.RaceCheckError` for this fault."""
        return {"buffer": buffer, "index": self.index, "phase": self.phase,
                "kernel": self.kernel, "block": self.block, "threads": self.threads}  # fmt: skip

    def where(self) -> str:
        return f"kernel {self.kernel}, block {_text(self.block)}"

    def more(self) -> str:
        n = self.count - 1
        return f"; {n} more fault{'s' if n > 1 else ''} in this call" if n > 0 else ""


def _site_text(site: Site | None, numbered: bool = False) -> str:
    if site is None:
        return "its end"
    if site.kind is SiteKind.BARRIER:
        return f"barrier #{site.ordinal}"
    if site.kind is SiteKind.COLLECTIVE:
        number = f" (warp operation #{site.ordinal} of the kernel)" if numbered else ""
        return f"warp collective {site.intrinsic!r}{number}"
    return f"{site.kind.value} {site.buffer}"


def _conflict(f: _Fault) -> RaceCheckError:
    assert f.site is not None
    assert f.thread is not None
    if f.flags & FLAG_ASYNC:
        return _in_flight(f, "stores", "an asynchronous copy overwrites it whenever it lands")
    if f.site.scope == "global":
        return _global_conflict(f)
    this = "stores" if f.flags & FLAG_WRITE else "loads"
    earlier = "stored" if f.flags & FLAG_OTHER_WRITE else "loaded"
    buf = f.site.buffer
    same = " (both stored the same value)" if f.flags & FLAG_SAME else ""
    if f.flags & FLAG_SAME:
        hint = (
            "several threads store the same element in one barrier phase: let one thread "
            "store each element, or separate the stores with a barrier"
        )
    else:
        hint = "a barrier (__syncthreads) is missing between the two accesses"
    msg = (
        f"{f.function}: shared-memory race in {f.where()}: thread {_text(f.thread)} {this} "
        f"{buf}[{f.index}] in barrier phase {f.phase}, where thread {_text(f.other or f.thread)} "
        f"{earlier} it with no barrier between them{same}. Hint: {hint}{f.more()}"
    )
    return RaceCheckError(msg, kind=RaceKind.CONFLICT, **f.fields(buf))


def _global_conflict(f: _Fault) -> RaceCheckError:
    """Two threads of one launch access one global element, one of them storing, unordered."""
    assert f.site is not None
    assert f.thread is not None
    this = "stores" if f.flags & FLAG_WRITE else "loads"
    earlier = "stored" if f.flags & FLAG_OTHER_WRITE else "loaded"
    buf, other = f.site.buffer, f.other or f.thread
    same = " (both stored the same value)" if f.flags & FLAG_SAME else ""
    if f.other_block != f.block:
        why = "different blocks: nothing orders them within a launch"
        hint = "let one block own each element, or split the work into two launches"
    else:
        why = f"the same barrier phase {f.phase} of one block"
        hint = (
            "let one thread store each element"
            if f.flags & FLAG_SAME
            else "a barrier (__syncthreads) is missing between the two accesses"
        )
    msg = (
        f"{f.function}: global-memory race in kernel {f.kernel}: thread {_text(f.thread)} of "
        f"block {_text(f.block)} {this} {buf}[{f.index}], where thread {_text(other)} of block "
        f"{_text(f.other_block)} {earlier} it with no ordering between them ({why}){same}. "
        f"Hint: {hint}{f.more()}"
    )
    return RaceCheckError(msg, kind=RaceKind.CONFLICT, **f.fields(buf))


def _in_flight(f: _Fault, verb: str, why: str) -> RaceCheckError:
    """An access to the destination of a cp.async that is still in flight."""
    assert f.site is not None
    assert f.thread is not None
    buf = f.site.buffer
    own = f.other is None or f.other == f.thread
    issuer = "its own" if own else f"thread {_text(f.other or f.thread)}'s"
    msg = (
        f"{f.function}: {f.site.scope} memory race in {f.where()}: thread {_text(f.thread)} "
        f"{verb} {buf}[{f.index}] in barrier phase {f.phase} while {issuer} "
        f"asynchronous copy (cp.async) to it is in flight ({why}). Hint: the issuing thread "
        "must wait for its group (cp.async.wait_group) before the access, with a barrier "
        f"between the wait and other threads' accesses{f.more()}"
    )
    kind = RaceKind.UNINITIALIZED if verb == "loads" else RaceKind.CONFLICT
    return RaceCheckError(msg, kind=kind, **f.fields(buf))


def _uninitialized(f: _Fault) -> RaceCheckError:
    assert f.site is not None
    assert f.thread is not None
    if f.flags & FLAG_ASYNC:
        return _in_flight(f, "loads", "its bytes are not there before the wait")
    buf, scope = f.site.buffer, f.site.scope
    owner = "the block" if scope.startswith("shared") else "the thread"
    hint = (
        " Hint: 'local' memory is private to each thread; a value another thread stored is in "
        "that thread's copy"
        if owner == "the thread"
        else ""
    )
    msg = (
        f"{f.function}: uninitialized read in {f.where()}: thread {_text(f.thread)} loads "
        f"{scope} {buf}[{f.index}] in barrier phase {f.phase}, which {owner} never wrote."
        f"{hint}{f.more()}"
    )
    return RaceCheckError(msg, kind=RaceKind.UNINITIALIZED, **f.fields(buf))


def _out_of_bounds(f: _Fault) -> EmulatedBoundsError:
    kind, buf = (f.site.kind.value, f.site.buffer) if f.site else ("access", "?")
    thread = _text(f.thread) if f.thread else "?"
    msg = (
        f"{f.function}: out-of-bounds {kind} {buf}[{f.index}]: index {f.index} on dimension 0 is "
        f"outside [0, {f.extent}) ({f.where()}, thread {thread}, barrier phase {f.phase}). The "
        f"access was skipped: nothing outside the buffer was read or written{f.more()}"
    )
    return EmulatedBoundsError(msg, kind=RaceKind.OUT_OF_BOUNDS, **f.fields(buf))


def _sync_fault(f: _Fault) -> EmulationError:
    if f.kind == "launch":
        msg = f"{f.function}: cannot launch kernel {f.kernel}: {f.detail}{f.more()}"
        return EmulationError(msg, kernel=f.kernel, block=f.block)
    me = _text(f.thread) if f.thread else "?"
    if f.site is None:  # reported by a collective's implementation
        what = f"thread {me}" + (f" and thread {_text(f.other)}" if f.other else "")
    else:
        a, b = f.site, f.other_site
        numbered = b is not None and a.intrinsic == b.intrinsic and a.ordinal != b.ordinal
        what = f"thread {me} waits at {_site_text(a, numbered)}"
        if f.other is not None:
            there = "has exited" if b is None else f"waits at {_site_text(b, numbered)}"
            what += f" while thread {_text(f.other)} {there}"
    warp = f" in warp {f.linear // WARP_SIZE}" if f.kind == "collective" and f.linear >= 0 else ""
    msg = (
        f"{f.function}: threads of block {_text(f.block)} in kernel {f.kernel} cannot proceed: "
        f"{f.detail} ({what}){warp}; a GPU would hang or give undefined results{f.more()}"
    )
    return EmulationError(msg, kernel=f.kernel, block=f.block, threads=f.threads)


def fault_error(rec: FaultRecord, emu: EmulatorSource) -> EmulationError:
    """The error describing the first fault of ``rec``."""
    f = _Fault(rec, emu)
    if f.kind == "conflict":
        return _conflict(f)
    if f.kind == "uninitialized":
        return _uninitialized(f)
    if f.kind == "out of bounds":
        return _out_of_bounds(f)
    return _sync_fault(f)


class EmulatedModule(Module):
    """A built emulator library: ``lib["main"](*args)`` runs the GPU program on the CPU.

    Parameters
    ----------
    path
        The compiled library.
    source
        Its full C text (``lib.source``).
    emulator
        The emulator unit it was compiled from (programs, sites).
    originals
        Function name -> the function as given to ``build`` (argument shapes are checked
        against it).
    """

    def __init__(
        self, path: Path, source: str, emulator: EmulatorSource, originals: dict[str, PrimFunc]
    ) -> None:
        self.emulator = emulator
        functions = {name: (originals[name], low) for name, low in emulator.functions.items()}
        super().__init__(path, source, functions, emulator.symbols)

    @property
    def racecheck(self) -> bool:
        """True when the race checker is compiled in."""
        return self.emulator.racecheck

    def _bounds_hook(
        self, functions: dict[str, tuple[PrimFunc, PrimFunc]], symbols: dict[str, str]
    ) -> Callable[[], None] | None:
        del functions, symbols
        self._bounds_checked = self.emulator.bounds_check
        try:
            self._record: FaultRecord | None = FaultRecord.in_dll(self._lib, "tc_emu_error")
        except ValueError:  # ctypes reports a missing symbol as ValueError
            self._record = None
        return self.check_faults

    def check_faults(self) -> None:
        """Raise (and clear) the fault the last call recorded, if any."""
        rec = self._record
        if rec is None or rec.count == 0:
            return
        err = fault_error(rec, self.emulator)
        ctypes.memset(ctypes.addressof(rec), 0, ctypes.sizeof(rec))
        raise err

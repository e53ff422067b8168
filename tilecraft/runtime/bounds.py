"""Reading the violation record of a bounds-checked library (``tc.build(..., bounds_check=True)``).

A bounds-checked kernel skips every out-of-range load (it yields 0) and store, counts them, and
keeps the details of the first one in the library's exported ``tc_bounds_error`` record (see
:data:`tilecraft.codegen._c_helpers.BOUNDS`). After each call the runtime looks at the count;
when it is not zero it clears the record and raises :class:`BoundsCheckError` naming the
function, the access (load or store, buffer), the index values and the extents. The kernel
never touched memory outside its buffers, so the process and the library stay usable.

The record is per library, not per call: calls of one bounds-checked library from several
Python threads at once may report a violation to the wrong caller. Bounds checking is a
debugging mode; it slows kernels down (every access is compared, loops rarely vectorize).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence

from ..errors import TilecraftError

MAX_NDIM = 8  # TC_BOUNDS_MAX_NDIM in the C record


class BoundsCheckError(TilecraftError, IndexError):
    """A bounds-checked kernel accessed a buffer outside its shape (nothing was accessed)."""


class BoundsRecord(ctypes.Structure):
    """Layout of the C ``tc_bounds_record``."""

    _fields_ = [
        ("count", ctypes.c_int64),
        ("func", ctypes.c_char_p),
        ("site", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dim", ctypes.c_int32),
        ("pad", ctypes.c_int32),
        ("index", ctypes.c_int64 * MAX_NDIM),
        ("extent", ctypes.c_int64 * MAX_NDIM),
    ]


def find_record(lib: ctypes.CDLL) -> BoundsRecord | None:
    """The library's violation record, or None when it has none (no checked access)."""
    try:
        return BoundsRecord.in_dll(lib, "tc_bounds_error")
    except ValueError:  # ctypes reports a missing symbol as ValueError
        return None


def _tuple_text(values: Sequence[int]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def raise_if_violated(
    record: BoundsRecord, names: Mapping[str, str], sites: Mapping[str, Sequence[str]]
) -> None:
    """Raise :class:`BoundsCheckError` (and clear the record) if a violation was recorded.

    Parameters
    ----------
    record
        The library's record.
    names
        C symbol -> function name.
    sites
        Function name -> its site descriptions (``"store B"``), by site number.
    """
    count = record.count
    if count == 0:
        return
    symbol = (record.func or b"?").decode(errors="replace")
    name = names.get(symbol, symbol)
    site_list = sites.get(name, ())
    what = site_list[record.site] if 0 <= record.site < len(site_list) else f"site {record.site}"
    kind, _, buffer = what.partition(" ")
    ndim = max(0, min(record.ndim, MAX_NDIM))
    index = [record.index[d] for d in range(ndim)]
    extent = [record.extent[d] for d in range(ndim)]
    dim = record.dim
    ctypes.memset(ctypes.addressof(record), 0, ctypes.sizeof(record))
    where = f"{buffer}[{', '.join(str(i) for i in index)}]"
    bad = (
        f"index {index[dim]} on dimension {dim} is outside [0, {extent[dim]})"
        if 0 <= dim < ndim
        else "index out of range"
    )
    more = f"; {count} out-of-range accesses in this call, the first is shown" if count > 1 else ""
    raise BoundsCheckError(
        f"{name}: out-of-bounds {kind} {where}: {bad} (buffer {buffer!r} has shape "
        f"{_tuple_text(extent)}){more}. The access was skipped: nothing outside the buffer was "
        "read or written"
    )

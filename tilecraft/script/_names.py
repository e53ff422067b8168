"""Names of the script namespace ``T`` shared by the printer, the parser and the stubs."""

from __future__ import annotations

import keyword

from ..errors import IRError
from ..ir import DEVICE_INTRINSICS, INTRINSICS, DataType, dtype

LOOP_KINDS = ("serial", "parallel", "vectorized", "unroll", "thread_binding")
"""``T.<kind>(...)`` loop iterators (``range`` is the plain serial loop)."""

STMT_NAMES = frozenset(
    {
        "prim_func", "ir_module", "Buffer", "func_attr", "module_attr", "grid", *LOOP_KINDS,
        "block", "init", "axis.spatial", "axis.reduce", "axis.opaque", "axis.remap", "reads",
        "writes", "where", "block_attr", "alloc_buffer", "allocate", "let", "seq", "evaluate",
    }
)  # fmt: skip
"""Functions of ``T`` that build statements, declarations or functions."""

EXPR_NAMES = frozenset(
    {"Select", "if_then_else", "Cast", "min", "max", *INTRINSICS, *DEVICE_INTRINSICS}
)
"""Functions of ``T`` that build expressions (besides the dtype constructors)."""

RESERVED = frozenset({"T", "range", *keyword.kwlist, *keyword.softkwlist})
"""Identifiers the printer never gives to a variable or buffer."""


def dtype_of_name(name: str) -> DataType | None:
    """The dtype spelled exactly ``name`` (``"int64"``, ``"float16x4"``), or None."""
    try:
        dt = dtype(name)
    except IRError:
        return None
    return dt if str(dt) == name else None


def is_known(name: str) -> bool:
    """True if ``T.<name>`` exists in the script namespace."""
    return name in STMT_NAMES or name in EXPR_NAMES or dtype_of_name(name) is not None

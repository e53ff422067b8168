"""Coverage of torch's Core ATen opset by the importer, from torch's own operator list.

Each Core ATen overload (tagged ``torch.Tag.core``) is either supported (a converter exists),
or excluded because it has no meaning at inference: random (``nondeterministic_seeded``),
autograd-only (``*_backward``), an ``out=`` variant, or about storage rather than values
(``as_strided``, ``empty_strided``...). The rest are missing: with the reason when it is
known (``missing: needs complex dtypes``), plain ``missing`` for an operator a new torch added.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._complex import COMPLEX
from ._errors import WHY_UNSUPPORTED, import_torch
from ._importer import _ASSERTS, _SYMBOLIC
from ._registry import HANDLERS

_STORAGE = {"aten::as_strided"}


@dataclass(frozen=True)
class CoverageRow:
    """One Core ATen overload: ``status`` is ``supported``, ``excluded: <why>``, ``missing:
    <why>`` or ``missing``."""

    name: str
    status: str


def core_aten_ops() -> list[str]:
    """Names (``aten::add.Tensor``) of every overload torch tags as Core ATen."""
    torch = import_torch()
    names: list[str] = []
    # every registered operator, not only the packets loaded so far (dir(torch.ops.aten))
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        packet_name, _, overload = full.removeprefix("aten::").partition(".")
        packet = getattr(torch.ops.aten, packet_name, None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if op is not None and torch.Tag.core in op.tags:
            names.append(op.name())
    return sorted(set(names))


def _status(torch: object, name: str) -> str:
    if name in HANDLERS or name in COMPLEX or name in _SYMBOLIC or name in _ASSERTS:
        return "supported"
    packet, _, overload = name.removeprefix("aten::").partition(".")
    op = getattr(getattr(torch.ops.aten, packet), overload or "default")  # type: ignore[attr-defined]
    if torch.Tag.nondeterministic_seeded in op.tags:  # type: ignore[attr-defined]
        return "excluded: random"
    if "backward" in packet:
        return "excluded: autograd-only"
    if overload == "out" or packet.endswith("_"):
        return "excluded: out= / in-place variant"
    if name in _STORAGE:
        return "excluded: storage layout, not values"
    if name in WHY_UNSUPPORTED:
        return f"missing: {WHY_UNSUPPORTED[name]}"
    return "missing"


def coverage() -> list[CoverageRow]:
    """The coverage table: one row per Core ATen overload, sorted by name."""
    torch = import_torch()
    return [CoverageRow(n, _status(torch, n)) for n in core_aten_ops()]

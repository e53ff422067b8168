"""Errors of the PyTorch frontend."""

from __future__ import annotations

from typing import Any

from ...errors import TilecraftError


class TorchFrontendError(TilecraftError):
    """A PyTorch program the importer cannot take (or PyTorch is not installed)."""


# Core ATen operators with a meaning at inference that the importer cannot express yet, and why
WHY_UNSUPPORTED: dict[str, str] = {}


class UnsupportedOpsError(TorchFrontendError):
    """Every operator of a program the importer does not support, in one error.

    ``missing`` maps each operator name to the places (node name and source line) it occurs.
    """

    def __init__(self, missing: dict[str, list[str]]) -> None:
        self.missing = missing
        lines = [f"{len(missing)} unsupported operator(s) in the exported program:"]
        for name, places in sorted(missing.items()):
            why = f" ({WHY_UNSUPPORTED[name]})" if name in WHY_UNSUPPORTED else ""
            lines.append(f"  {name}{why}  ({len(places)}x) at " + "; ".join(places[:3]))
        super().__init__("\n".join(lines))


def import_torch() -> Any:
    """The ``torch`` module; TorchFrontendError naming the extra when it is missing."""
    try:
        import torch
    except ImportError:
        raise TorchFrontendError(
            "tilecraft.frontend.torch needs PyTorch: pip install 'tilecraft[torch]'"
        ) from None
    return torch

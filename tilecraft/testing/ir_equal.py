"""``assert_ir_equal``: compare two IR nodes up to renaming, with a readable failure."""

from __future__ import annotations

from typing import Any

from ..ir import structural_equal


def _text(node: Any) -> str | None:
    try:
        return str(node.script())
    except NotImplementedError:
        return None


def assert_ir_equal(actual: Any, expected: Any) -> None:
    """Raise AssertionError unless ``actual`` and ``expected`` are structurally equal.

    Uses :func:`tilecraft.ir.structural_equal`; while that is unavailable it compares the
    script text. The message shows both script forms (when a printer is available).
    """
    try:
        equal = structural_equal(actual, expected)
    except NotImplementedError:
        a, b = _text(actual), _text(expected)
        if a is None or b is None:
            raise AssertionError(
                "assert_ir_equal: neither structural_equal nor the script printer is available"
            ) from None
        equal = a == b
    if not equal:
        a, b = _text(actual), _text(expected)
        raise AssertionError(
            "IR differs\n--- actual ---\n"
            + (a or repr(actual))
            + "\n--- expected ---\n"
            + (b or repr(expected))
        )

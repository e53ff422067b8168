"""The script parser at its limits: only ScriptParseError escapes, and what parses prints back."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.errors import ScriptParseError
from tilecraft.ir import structural_equal
from tilecraft.script import parser

HEAD = '@T.prim_func\ndef main(A: T.Buffer((4,), "float32"), n: T.int32):\n'
HUGE = "1" + "0" * 400


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (f"    A[0] = T.float32({HUGE})\n", r"int too large to convert to float"),  # was raw
        (f"    A[0] = A[0] + {HUGE}\n", r"int too large to convert to float"),  # was raw
        ("    A[0] = T.float32(" + "-" * 100_000 + "1)\n", r"nests too deeply for Python"),
        ("    A[0] = n" + ".b" * 100_000 + "\n", r"nests too deeply for Python"),  # was raw
        ("    A[0] = T.float32(1.0)  # \ud800\n", r"unreadable script text"),  # was raw
        ("    A[0] = T.float32(1.0)\x00\n", r"null bytes"),
    ],
)
def test_overflow_and_nesting_raise_script_parse_error(body: str, message: str) -> None:
    with pytest.raises(ScriptParseError, match=message):
        tc.script.parse(HEAD + body)


def test_source_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parser, "MAX_SOURCE_CHARS", 50)
    with pytest.raises(ScriptParseError, match=r"exceeds the limit of 50"):
        tc.script.parse(HEAD + "    A[0] = T.float32(1.0)\n")


@pytest.mark.parametrize(
    "body",
    [
        "".join(f"    x{k}: T.int32 = {k}\n" for k in range(600)) + "    A[x599 - 596] = A[0]\n",
        "    A[0] = " + " + ".join(["A[n]"] * 1500) + "\n",
        '    A[0] = T.Cast("float32", ' + "-" * 300 + "n)\n",  # printed -x, not 0 - (...)
        "    A[0] = " + " if n < 0 else ".join(["A[1]"] * 300) + "\n",  # a conditional chain
        "    if " + "not " * 1000 + "n < 1:\n        A[0] = A[1]\n",
    ],
)
def test_long_and_deep_text_parses_prints_and_reads_back(body: str) -> None:
    """Regression: these recursed once per binding or operator (RecursionError or a "nested
    too deeply" error), or printed brackets nested deeper than Python reads back."""
    func = tc.script.parse(HEAD + body)
    text = func.script()
    back = tc.script.parse(text)
    assert structural_equal(back, func)
    assert back.script() == text

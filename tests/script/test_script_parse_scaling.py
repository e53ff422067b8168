"""Parsing work grows linearly with the number of parameters (10,000 parameters once took 35 s).

The default test counts the lines of tilecraft code that parsing executes (a ``sys.settrace``
line count): the count is a property of the code, not of the machine's load, so doubling the
parameters must double it, give or take the fixed part. A parameter-ordering step that scanned
every parameter name for each parameter made it grow 3.3-fold from 400 to 800 parameters. A
wall-clock check on 10,000 parameters runs with the slow tests.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import tilecraft as tc

PACKAGE = str(Path(tc.__file__).parent)


def _source(n: int) -> str:
    """``main`` with ``n`` buffer parameters (and two scalars among them) using two of them."""
    params = [f'A{i}: T.Buffer((4,), "float32")' for i in range(n)]
    params[n // 2] = "m: T.int32"
    params[n // 3] = "k: T.int64"
    return (
        f"def main({', '.join(params)}):\n"
        "    for i in range(4):\n"
        '        with T.block("B"):\n'
        "            vi = T.axis.spatial(4, i)\n"
        "            A0[vi] = A1[vi] + T.float32(1.0)\n"
    )


def _lines_executed(text: str) -> int:
    """How many lines of tilecraft code ``tc.script.parse(text)`` executes."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        tc.script.parse(text)
    finally:
        sys.settrace(previous)
    return count


def test_parse_work_is_linear_in_the_number_of_parameters() -> None:
    small, large = _lines_executed(_source(400)), _lines_executed(_source(800))
    assert 1.5 < large / small < 2.3, (small, large)


def test_parameters_keep_their_written_order() -> None:
    func = tc.script.parse(_source(50))
    names = [p.name for p in func.params]
    assert names[:3] == ["A0", "A1", "A2"]
    assert names[50 // 3] == "k"
    assert names[50 // 2] == "m"
    assert len(names) == 50


@pytest.mark.slow
def test_ten_thousand_parameters_parse_in_seconds() -> None:
    text = _source(10_000)
    start = time.perf_counter()
    func = tc.script.parse(text)
    assert time.perf_counter() - start < 10.0  # 35 s when quadratic, under 1 s now
    assert len(func.params) == 10_000

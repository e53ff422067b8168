"""The script parsers may be called from several threads at once.

CPython 3.11's AST constructor keeps its recursion counter in interpreter-wide state, so two
threads parsing at once can make ``ast.parse`` raise ``SystemError`` when the interpreter
switches between them mid-parse (a garbage collection running a finalizer is enough). This is
what made a multi-threaded pass-instrument test fail now and then; tilecraft serializes its
calls of the parser.
"""

from __future__ import annotations

import ast
import gc
import threading
import time

import pytest

import tilecraft.script._python as pyparse
from tilecraft.graph.script import parse as parse_graph
from tilecraft.ir import PrimFunc
from tilecraft.script import parse

ADD_ONE = """
@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)
"""

GRAPH = """
@R.function
def main(x: R.Tensor(("n", 8), "float32")) -> R.Tensor(("n", 8), "float32"):
    with R.dataflow():
        y = R.add(x, x)
        R.output(y)
    return y
"""


def test_parse_python_never_runs_two_parses_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    inside = 0
    most = 0
    count_lock = threading.Lock()
    real_parse = ast.parse

    def slow_parse(text: str, mode: str = "exec") -> ast.AST:
        nonlocal inside, most
        with count_lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.002)  # give the other threads every chance to enter
        with count_lock:
            inside -= 1
        return real_parse(text, mode=mode)

    monkeypatch.setattr(ast, "parse", slow_parse)

    def worker() -> None:
        for _ in range(10):
            pyparse.parse_python("x = 1")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1


def test_parse_python_mutes_syntax_warnings_and_keeps_errors() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning shown would be an error here
        tree = pyparse.parse_python('s = "\\d"')
    assert isinstance(tree, ast.Module)
    assert isinstance(pyparse.parse_python("1 + 2", mode="eval"), ast.Expression)
    with pytest.raises(SyntaxError):
        pyparse.parse_python("def (")


class _Finalized:
    """A cyclic object whose finalizer lets the interpreter switch threads during a GC."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        time.sleep(0)


def test_script_parsers_survive_threads_switching_inside_the_parser() -> None:
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(60):
                for _ in range(20):
                    _Finalized()
                if (i + n) % 2:
                    assert isinstance(parse(ADD_ONE), PrimFunc)
                else:
                    parse_graph(GRAPH)
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)

    old = gc.get_threshold()
    # Young collections often (so finalizers run inside parses), full ones rarely (a full
    # collection of a large test process is slow enough to hide the race).
    gc.set_threshold(50, 1000, 1000)
    try:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*old)
    assert errors == []

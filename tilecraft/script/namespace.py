"""The script namespace ``T``: decorators that parse source, and inert stand-ins for the rest.

``from tilecraft.script import T``. ``T.prim_func`` and ``T.ir_module`` read the decorated
function's or class's *source* (``inspect`` + ``ast``) and return the IR; the body never runs.
Every other name (``T.Buffer``, ``T.int32``, ``T.grid``, ...) is an inert callable, so that
annotations evaluated when ``def`` runs, and ``T.module_attr`` in a class body, do nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ScriptParseError
from ..ir import IRModule, PrimFunc
from ._names import EXPR_NAMES, STMT_NAMES
from .parser import parse_object


class _Stub:
    """An inert stand-in for a script function: calling it returns itself."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: object, **kwargs: object) -> _Stub:
        return self

    def __repr__(self) -> str:
        return f"T.{self._name}"


class _Axis:
    """``T.axis.spatial`` / ``reduce`` / ``opaque`` / ``remap`` stand-ins."""

    spatial = _Stub("axis.spatial")
    reduce = _Stub("axis.reduce")
    opaque = _Stub("axis.opaque")
    remap = _Stub("axis.remap")


def prim_func(func: Callable[..., Any]) -> PrimFunc:
    """Decorator: parse the decorated function's source into a :class:`~tilecraft.ir.PrimFunc`.

    Raises
    ------
    ScriptParseError
        When the source is not valid script (positions refer to the source file).
    """
    result = parse_object(func)
    if not isinstance(result, PrimFunc):
        raise ScriptParseError(f"@T.prim_func on {func!r} did not yield a function")
    return result


def ir_module(cls: type) -> IRModule:
    """Decorator: parse the decorated class's source into an :class:`~tilecraft.ir.IRModule`."""
    result = parse_object(cls)
    if not isinstance(result, IRModule):
        raise ScriptParseError(f"@T.ir_module on {cls!r} did not yield a module")
    return result


axis = _Axis()
Buffer = _Stub("Buffer")
func_attr = _Stub("func_attr")
module_attr = _Stub("module_attr")
grid = _Stub("grid")
serial = _Stub("serial")
parallel = _Stub("parallel")
vectorized = _Stub("vectorized")
unroll = _Stub("unroll")
thread_binding = _Stub("thread_binding")
block = _Stub("block")
init = _Stub("init")
reads = _Stub("reads")
writes = _Stub("writes")
where = _Stub("where")
block_attr = _Stub("block_attr")
alloc_buffer = _Stub("alloc_buffer")
allocate = _Stub("allocate")
let = _Stub("let")
seq = _Stub("seq")
evaluate = _Stub("evaluate")
Select = _Stub("Select")
Cast = _Stub("Cast")


def __getattr__(name: str) -> _Stub:
    """Dtype constructors (``T.int32``, ``T.float16x4``) and expression functions."""
    from ._names import dtype_of_name

    if name in EXPR_NAMES or name in STMT_NAMES or dtype_of_name(name) is not None:
        return _Stub(name)
    raise AttributeError(f"the script namespace T has no attribute {name!r}")

"""C source generation for the CPU: one exported function per lowered PrimFunc.

ABI (what :mod:`tilecraft.runtime` calls through ctypes): a PrimFunc ``f`` becomes ::

    TC_EXPORT void f(const float* restrict A, float* restrict C, int32_t n);

with one argument per parameter of the *lowered* function, in order: buffers as (``restrict``)
pointers to their storage type — ``const`` when never written; ``float16``/``bfloat16`` stored
as ``uint16_t`` and computed in ``float`` —, scalar parameters by value (the symbolic shape
variables :class:`~tilecraft.lower.ExposeShapeVars` appended come last). Buffers are row-major
and contiguous. Parallel loops get ``#pragma omp parallel for``, vectorized loops
``#pragma omp simd``, unrolled loops ``#pragma GCC unroll``. Large allocations live on the heap.
The libm functions a unit calls that have vector variants in glibc's libmvec are redeclared
with ``__attribute__((simd))`` (active when the build defines ``TC_LIBMVEC``), so loops calling
``expf``/``logf``/... vectorize.

The exported symbol is the function's name unless that is a C keyword or a name the included
headers declare (``main``, ``exp``, ``tanhf``, ``abs``...): those get a trailing underscore
(``main_``, ``exp_``), with a number added if another function already has that symbol;
:attr:`CSource.symbols` maps names to symbols, so ``lib["exp"]`` works. Locals named like such
names (a buffer ``expf`` in a kernel that calls ``expf``) get a ``v_`` prefix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import CodegenError
from ..ir import (
    Allocate,
    Buffer,
    DataType,
    Expr,
    For,
    ForKind,
    IntImm,
    PrimFunc,
    Var,
)
from ..lower import LOWERED_ATTR, PARALLEL_MIN_WORK_ATTR, parallel_condition
from ..lower.bounds_check import OutOfBounds
from ..target import Target, as_target
from . import _c_helpers
from ._bounds import Bound
from ._names import C_RESERVED
from .base import (
    SourceEmitter,
    banner,
    compute_type_of,
    contains,
    join_unit,
    symbol_of,
    symbol_table,
    written_buffers,
)

STACK_LIMIT_BYTES = 16 * 1024
"""Allocations of constant size up to this many bytes go on the stack; larger ones on the heap."""

_INT_CTYPES = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
               "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
               "uint64": "uint64_t"}  # fmt: skip
_HALF_HELPERS = {"float16": ("f16", _c_helpers.F16), "bfloat16": ("bf16", _c_helpers.BF16)}
_PRAGMAS = {ForKind.PARALLEL: "#pragma omp parallel for", ForKind.VECTORIZED: "#pragma omp simd"}


def storage_ctype(dt: DataType) -> str:
    """The C type that stores one element of ``dt`` in memory."""
    if dt.lanes != 1:
        raise CodegenError(f"C codegen: vector dtype {dt} is not supported; use a vectorized loop")
    if dt.is_bool:
        return "bool"
    if dt.code.value == "bfloat" or (dt.is_float and dt.bits == 16):
        return "uint16_t"
    if dt.is_float:
        return "float" if dt.bits == 32 else "double"
    return _INT_CTYPES[str(dt)]


def compute_ctype(dt: DataType) -> str:
    """The C type values of ``dt`` are computed in (16-bit floats compute in ``float``)."""
    return compute_type_of(dt, storage_ctype)


def c_symbol(name: str) -> str:
    """The exported C symbol of a PrimFunc ``name`` alone in its unit (``main`` -> ``main_``).

    C keywords and names declared by the headers the unit includes (``exp``, ``tanhf``,
    ``abs``...) get a trailing underscore; see :func:`~tilecraft.codegen.base.symbol_of`.
    In a unit of several functions, :attr:`CSource.symbols` is authoritative.
    """
    return symbol_of(name, C_RESERVED)


@dataclass(frozen=True)
class CSource:
    """Generated C text and the lowered functions it defines (name -> PrimFunc).

    ``symbols`` maps each function name to its exported C symbol (see :func:`c_symbol`).
    """

    text: str
    functions: dict[str, PrimFunc]
    symbols: dict[str, str]


class CCodegen:
    """Emit C for lowered PrimFuncs into one translation unit."""

    def __init__(self, target: Target, *, bounds_check: bool = False) -> None:
        self.target = target
        self.bounds_check = bounds_check
        self.helpers: dict[str, str] = {}
        self.bodies: list[str] = []
        self.libm_calls: set[tuple[str, str, int]] = set()

    # entry points -----------------------------------------------------------------------
    def add_function(self, func: PrimFunc, symbol: str | None = None) -> None:
        """Emit ``func`` (already lowered: no blocks, one-dimensional buffers).

        ``symbol`` is its exported name (default :func:`c_symbol` of its name).
        """
        _FunctionEmitter(self, func, symbol or c_symbol(func.name)).emit()

    def finish(self) -> str:
        """The whole translation unit."""
        checked = " Every buffer access is bounds-checked." if self.bounds_check else ""
        head = [
            f"/* {banner(self.target)}{checked} */",
            "#include <math.h>",
            "#include <stdbool.h>",
            "#include <stddef.h>",
            "#include <stdint.h>",
            "#include <stdio.h>",
            "#include <stdlib.h>",
            "#include <string.h>",
            "",
            '#define TC_EXPORT __attribute__((visibility("default")))',
            "",
            _c_helpers.simd_math(sorted(self.libm_calls)),
        ]
        return join_unit(["\n".join(head), *self.helpers.values(), *self.bodies])

    def need(self, key: str, text: str) -> None:
        """Add helper ``text`` under ``key`` once."""
        self.helpers.setdefault(key, text)


class _FunctionEmitter(SourceEmitter):
    """Emit one function: signature, then its statements."""

    INTRINSICS = {
        "round": "nearbyint{f}({x})",  # half to even, like numpy
        "exp10": "pow{f}(10.0{f}, {x})",
        "rsqrt": "({one} / sqrt{f}({x}))",
        "isnan": "(isnan({x}) != 0)",
        "isinf": "(isinf({x}) != 0)",
        "isfinite": "(isfinite({x}) != 0)",
    }
    LET_BLOCK = True
    HALF = {
        "float16": ("tc_f16_to_f32({})", "tc_f32_to_f16({})", "tc_round_f16({})"),
        "bfloat16": ("tc_bf16_to_f32({})", "tc_f32_to_bf16({})", "tc_round_bf16({})"),
    }

    def __init__(self, cg: CCodegen, func: PrimFunc, symbol: str) -> None:
        super().__init__(func.name, symbol, C_RESERVED)
        self.cg = cg
        self.func = func
        self.symbol = symbol
        self.written = written_buffers(func.body)

    def emit(self) -> None:
        args = self.params(self.func.params)
        self.out.emit(f"TC_EXPORT void {self.symbol}({', '.join(args) or 'void'}) {{")
        self.nested(self.func.body)
        self.out.emit("}")
        self.cg.bodies.append(self.out.text())

    # hooks ------------------------------------------------------------------------------
    def storage_type(self, dt: DataType) -> str:
        return storage_ctype(dt)

    def buffer_param(self, p: Buffer) -> None:
        self._check_flat(p)

    def scalar_bound(self, p: Var) -> Bound:
        dims = [d for b in self.func.params if isinstance(b, Buffer) for d in b.shape]
        return (0, None) if contains(dims, lambda n: n is p) else (None, None)

    def _check_flat(self, buf: Buffer) -> None:
        if buf.ndim != 1:
            raise self.fail(
                f"buffer {buf.name!r} has rank {buf.ndim}; "
                "codegen needs lowered functions (tilecraft.lower.lower)"
            )

    def loop(self, s: For) -> None:
        if s.kind is ForKind.THREAD_BINDING:
            raise self.fail(
                f"loop {s.loop_var.name!r} is bound to {s.thread}; run the GPU schedule on "
                "the CPU with tc.build(..., emulate=True)"
            )
        pragma = _PRAGMAS.get(s.kind)
        if s.kind is ForKind.PARALLEL and PARALLEL_MIN_WORK_ATTR in s.annotations:
            # work that depends on a symbolic extent: threads only when it is large enough
            need = int(s.annotations[PARALLEL_MIN_WORK_ATTR])  # type: ignore[arg-type]
            pragma = f"{pragma} if({self.expr(parallel_condition(s, need))})"
        if s.kind is ForKind.UNROLLED:
            n = s.extent.value if isinstance(s.extent, IntImm) else 8
            pragma = f"#pragma GCC unroll {max(1, min(n, 1024))}"
        self.serial_loop(s, pragma)

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        self._check_flat(buf)
        name = self.buf(buf)
        ctype = storage_ctype(buf.dtype)
        self.out.emit("{")
        self.out.level += 1
        size = buf.shape[0]
        heap = not (
            isinstance(size, IntImm) and size.value * buf.dtype.itemsize <= STACK_LIMIT_BYTES
        )
        if heap:
            self.cg.need("alloc", _c_helpers.ALLOC)
            self.out.emit(
                f"{ctype}* restrict {name} = ({ctype}*)tc_alloc(sizeof({ctype}) * "
                f"(size_t)({self.expr(size)}));"
            )
        else:
            assert isinstance(size, IntImm)
            # aligned explicitly: gcc 12 vectorizes stores into a stack array of an OpenMP
            # outlined function with aligned moves without realigning that function's stack
            self.out.emit(f"{ctype} {name}[{max(size.value, 1)}] __attribute__((aligned(64)));")
        self.stmt(s.body)
        if heap:
            # the size of the block: a pooled block is reused for a request of at least half
            # it, so the pool must know it (no header in front: blocks keep malloc's placement)
            self.out.emit(f"tc_release({name}, sizeof({ctype}) * (size_t)({self.expr(size)}));")
        self.out.level -= 1
        self.out.emit("}")

    def helper_fn(self, fn: str, dt: DataType) -> str:
        ctype = compute_ctype(dt)
        suffix = ctype.replace("_t", "")
        if fn in ("min", "max"):
            self.cg.need(f"minmax_{suffix}", _c_helpers.minmax(ctype, suffix))
        else:
            self.cg.need(f"floordiv_{suffix}", _c_helpers.floordiv(ctype, suffix))
        return f"tc_{fn}_{suffix}"

    def non_finite(self, v: float, single: bool) -> str:
        if math.isnan(v):
            return "NAN" if single else "((double)NAN)"
        text = "INFINITY" if single else "((double)INFINITY)"
        return text if v > 0 else f"(-{text})"

    def math_fn(self, op: str, single: bool, arity: int) -> str:
        name = op + "f" if single else op
        self.cg.libm_calls.add((name, "float" if single else "double", arity))
        return name

    def note_half(self, dt: str) -> None:
        self.cg.need(_HALF_HELPERS[dt][0], _HALF_HELPERS[dt][1])

    def other_expr(self, e: Expr) -> str:
        if not isinstance(e, OutOfBounds):
            return super().other_expr(e)
        self.cg.need("bounds", _c_helpers.BOUNDS)
        idx = ", ".join(f"(int64_t)({self.expr(i)})" for i in e.indices)
        ext = ", ".join(f"(int64_t)({self.expr(x)})" for x in e.extents)
        call = (
            f'tc_bounds_fail("{self.symbol}", {e.site}, {len(e.indices)}, '
            f"(const int64_t[]){{{idx}}}, (const int64_t[]){{{ext}}})"
        )
        return f"(({self.compute_type(e.dtype)}){call})"


def emit_c(
    functions: Mapping[str, PrimFunc],
    target: Target | str | None = None,
    *,
    bounds_check: bool = False,
) -> CSource:
    """Emit one C translation unit for already-lowered functions.

    Parameters
    ----------
    functions
        Function name -> the function lowered for C (by the CPU backend's pipeline,
        ``tilecraft.runtime.backend_of(target).lower``): no blocks, one-dimensional buffers.
    target
        The target (default: the current target, else the CPU).
    bounds_check
        The functions were lowered with bounds checks: the unit defines the exported
        ``tc_bounds_error`` record they report to (see :mod:`tilecraft.runtime.bounds`).

    Returns
    -------
    CSource
        The C text, the functions by name (the ABI of each is its params) and their symbols.

    Raises
    ------
    CodegenError
        When a function has not been lowered.
    """
    tgt = as_target(target)
    symbols = symbol_table(functions, C_RESERVED)
    cg = CCodegen(tgt, bounds_check=bounds_check)
    for name, low in functions.items():
        if not low.attrs.get(LOWERED_ATTR):
            raise CodegenError(
                f"C codegen {name}: the function is not lowered; lower it first "
                "(tilecraft.runtime.backend_of(target).lower, or tilecraft.lower.lower)"
            )
        cg.add_function(low, symbols[name])
    return CSource(cg.finish(), dict(functions), symbols)

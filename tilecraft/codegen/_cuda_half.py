"""What CUDA emission adds for 16-bit floats and narrow vectors (package-private).

:class:`NativeHalf` is the base of the CUDA kernel emitter: on a target with half arithmetic
(sm_53+), float16 values are computed in ``__half`` (``+ - * /``, comparisons, ``select``,
min/max) instead of a round trip through float per operation; math functions (``exp``...) still
run in float, rounded back once; constants are exact bit patterns. bfloat16 keeps computing in
float. :func:`vector_type` names the type of a 32/64/128-bit vector access of any element
type (``uint4`` viewed as eight ``__half`` for a ``half8`` access); a 256-bit load is two
``uint4`` (:func:`vector_parts`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..ir import Buffer, BufferLoad, Call, Cast, DataType, Expr, FloatImm, Var, dtype
from .base import SourceEmitter

HALF_PRELUDE = "".join(
    f"template <> __device__ __forceinline__ __half tc_{fn}<__half>(__half a, __half b) "
    f"{{ __half m = b {op} a ? b : a; return __hisnan(b) ? b : m; }}\n"
    for fn, op in (("min", "<"), ("max", ">"))
)
"""NaN-propagating min/max of native half values (with cuda_fp16.h)."""

_NAMED_VECTORS = {
    ("float32", 2): "float2",
    ("float32", 4): "float4",
    ("int32", 2): "int2",
    ("int32", 4): "int4",
    ("float64", 2): "double2",
    ("int64", 2): "longlong2",
    ("float16", 2): "__half2",
    ("bfloat16", 2): "__nv_bfloat162",
}


def vector_type(dt: DataType, lanes: int, storage: str) -> tuple[str, str | None]:
    """The CUDA type of a ``lanes``-wide access of ``dt`` (stored as ``storage``), and the
    element type to view it as (None: the type has ``.x/.y/.z/.w`` members)."""
    named = _NAMED_VECTORS.get((str(dt), lanes))
    if named is not None:
        return named, None
    carrier = {32: "unsigned int", 64: "uint2", 128: "uint4", 256: "uint4"}[dt.bits * lanes]
    return carrier, storage


def vector_parts(dt: DataType, lanes: int) -> int:
    """How many accesses of :func:`vector_type`'s type one ``lanes``-wide access of ``dt`` is
    (2 for a 256-bit shared-memory load: two 128-bit halves, as a ``uint4[2]``)."""
    return max(dt.bits * lanes // 128, 1)


class NativeHalf(SourceEmitter):
    """The shared emitter with hooks computing float16 in ``__half`` where the target has
    half arithmetic; the CUDA kernel emitter derives from it."""

    def vector_load(
        self, name: str, kind: tuple[str, str | None, int], address: str, cond: str
    ) -> None:
        """Declare ``name`` (and its element view ``name_e``) holding the vector load at
        ``address`` (``kind``: :func:`vector_type` and :func:`vector_parts`); under ``cond``
        (non-empty) only: predicated as a whole (zeros when it fails). A 256-bit load is two
        128-bit ones into ``uint4 name[2]``."""
        vtype, view, parts = kind
        loads = [f"*((const {vtype}*)({address}) + {p})" for p in range(parts)]
        if parts > 1:
            self.out.emit(f"{vtype} {name}[{parts}] = {{}};")
            fill = " ".join(f"{name}[{p}] = {ld};" for p, ld in enumerate(loads))
            self.out.emit(f"if ({cond}) {{ {fill} }}" if cond else fill)
        elif not cond:
            self.out.emit(f"const {vtype} {name} = *(const {vtype}*)({address});")
        else:  # predicated as a whole: no lane reads it when the guard fails
            self.out.emit(f"{vtype} {name} = {{}};")
            self.out.emit(f"if ({cond}) {name} = *(const {vtype}*)({address});")
        if view is not None:
            ref = name if parts > 1 else f"&{name}"
            self.out.emit(f"const {view}* {name}_e = (const {view}*){ref};")

    def half_target(self) -> bool:
        """True when the target has half arithmetic (sm_53+)."""
        raise NotImplementedError

    def native_half(self, dt: DataType) -> bool:
        """``dt`` is computed in its own type: float16 on a GPU with half arithmetic."""
        return str(dt) == "float16" and self.half_target()

    def params(self, params: Iterable[Buffer | Var]) -> list[str]:
        """As the shared emitter, but a float16 scalar keeps the ``float`` the runtime passes
        (:meth:`half_prologue` converts it once)."""
        params = list(params)
        args = super().params(params)
        self.prologue: list[str] = []
        for k, p in enumerate(params):
            if isinstance(p, Var) and self.native_half(p.dtype):
                name = self.names.get(p, p.name)
                wide = self.names.get((p, "float"), f"{name}_f32")
                args[k] = f"float {wide}"
                self.prologue.append(f"const __half {name} = __float2half({wide});")
        return args

    def compute_type(self, dt: DataType) -> str:
        return "__half" if self.native_half(dt) else super().compute_type(dt)

    def load(self, e: BufferLoad) -> str:
        return self.element(e) if self.native_half(e.dtype) else super().load(e)

    def stored(self, dt: DataType, value: Expr) -> str:
        if self.native_half(dt) and self.native_half(value.dtype):
            return self.expr(value)
        return super().stored(dt, value)

    def cast(self, e: Cast) -> str:
        src, dst = e.value.dtype, e.dtype
        if not (self.native_half(src) or self.native_half(dst)):
            return super().cast(e)
        self.note_half("float16")
        value = self.expr(e.value)
        if self.native_half(src) and self.native_half(dst):
            return value
        if self.native_half(dst):
            return f"__float2half((float)({value}))"
        if dst.is_bool:
            return f"(__half2float({value}) != 0.0f)"
        if str(dst) == "float32":
            return f"__half2float({value})"
        return f"(({self.compute_type(dst)})(__half2float({value})))"

    def call(self, e: Call) -> str:
        if not any(self.native_half(a.dtype) for a in e.args):
            return super().call(e)
        # math functions run in float (exact to half precision); the result is rounded back
        f32 = dtype("float32")
        args = tuple(Cast(f32, a) if self.native_half(a.dtype) else a for a in e.args)
        out = e.dtype if not self.native_half(e.dtype) else f32
        text = super().call(Call(out, e.op, args))
        if not self.native_half(e.dtype):
            return text
        return f"__float2half({text})"

    def float_literal(self, e: FloatImm) -> str:
        if not self.native_half(e.dtype):
            return super().float_literal(e)
        bits = int(np.asarray(e.value, dtype=np.float16).view(np.uint16))
        return f"__ushort_as_half((unsigned short){bits:#06x}u)"  # exact, no conversion

"""CUDA C++ source generation from lowered GPU programs.

Each :class:`~tilecraft.lower.gpu_split_host_device.Kernel` becomes ::

    extern "C" __global__ void __launch_bounds__(256) main_kernel0(
        const float* __restrict__ A, float* __restrict__ B, int n) { ... }

Buffers are pointers to their storage type (``__half``/``__nv_bfloat16`` for 16-bit floats,
computed in ``float``), scalars are passed by value, thread-bound loops bind their variable to
``blockIdx``/``threadIdx`` (with a guard when their extent is below the launch extent),
``shared`` buffers are ``__shared__`` arrays, ``shared.dyn`` buffers are carved from one
``extern __shared__`` array, ``local`` buffers are register arrays. Loops the vectorizer marked
(``tc.vector_lanes``) become one vector load per input and one vector store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import CodegenError
from ..ir import (
    DEVICE_INTRINSICS,
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    DataType,
    Evaluate,
    Expr,
    For,
    ForKind,
    IntImm,
    Stmt,
    Var,
)
from ..lower.gpu_nodes import ThreadSync, WarpShuffle
from ..lower.gpu_split_host_device import GPUProgram, Kernel, dyn_shared_layout
from ..lower.gpu_vectorize import VECTOR_ATTR, is_vector_access, vector_plan
from ..lower.software_pipeline import ASYNC_COPY_ATTR
from ..target import Target, as_target
from ._bounds import Bound
from ._cuda_half import HALF_PRELUDE, NativeHalf, vector_parts, vector_type
from ._names import CUDA_RESERVED
from .base import (
    MATH_UNARY,
    banner,
    compute_type_of,
    contains,
    is_zero,
    join_unit,
    written_buffers,
)
from .cuda_tensor_core import (
    TENSOR_CORE_PRELUDE,
    TENSOR_CORE_PRELUDE_BF16,
    TENSOR_CORE_PRELUDE_S8,
    emit_async_copy,
    emit_device_call,
    wmma_fragment_decl,
    written_by_device_calls,
)

_STORAGE = {
    "bool": "bool",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "uint8": "unsigned char",
    "uint16": "unsigned short",
    "uint32": "unsigned int",
    "uint64": "unsigned long long",
    "float32": "float",
    "float64": "double",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
}
_LANE = "xyzw"

_SIGNED = {"signed char": "unsigned char", "short": "unsigned short", "int": "unsigned int",
           "long long": "unsigned long long"}  # fmt: skip
PRELUDE = (
    """\
template <typename T> __device__ __forceinline__ T tc_min(T a, T b) { return a < b ? a : b; }
template <typename T> __device__ __forceinline__ T tc_max(T a, T b) { return a > b ? a : b; }
"""
    # floats: NaN propagates, as numpy's minimum/maximum (fminf/fmaxf would drop it)
    + "".join(
        f"template <> __device__ __forceinline__ {t} tc_{fn}<{t}>({t} a, {t} b) "
        f"{{ {t} m = b {op} a ? b : a; return b != b ? b : m; }}\n"
        for t in ("float", "double")
        for fn, op in (("min", "<"), ("max", ">"))
    )
    # -a with wrap-around (MIN stays MIN): negating MIN in signed arithmetic is undefined
    + "".join(
        f"__device__ __forceinline__ {t} tc_negwrap({t} a) {{ return ({t})(0u - ({u})a); }}\n"
        for t, u in _SIGNED.items()
    )
    # integer division with numpy's results: x // 0 == x % 0 == 0, MIN // -1 wraps to MIN;
    # tc_u* are the unsigned variants (only the zero divisor needs care)
    + """\
template <typename T> __device__ __forceinline__ T tc_floordiv(T a, T b) {
  if (b == T(0)) return T(0);
  if (b == T(-1)) return tc_negwrap(a);
  T q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> __device__ __forceinline__ T tc_floormod(T a, T b) {
  if (b == T(0) || b == T(-1)) return T(0);
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> __device__ __forceinline__ T tc_div(T a, T b) {
  if (b == T(0)) return T(0);
  if (b == T(-1)) return tc_negwrap(a);
  return a / b;
}
template <typename T> __device__ __forceinline__ T tc_ufloordiv(T a, T b) {
  return b == T(0) ? T(0) : a / b;
}
template <typename T> __device__ __forceinline__ T tc_ufloormod(T a, T b) {
  return b == T(0) ? T(0) : a % b;
}
template <typename T> __device__ __forceinline__ T tc_udiv(T a, T b) {
  return b == T(0) ? T(0) : a / b;
}
"""
)


def storage_type(dt: DataType) -> str:
    """The CUDA type storing one element of ``dt``."""
    if dt.lanes != 1:
        raise CodegenError(f"CUDA codegen: vector dtype {dt} in IR is not supported")
    return _STORAGE[str(dt)]


def compute_type(dt: DataType) -> str:
    """The CUDA type values of ``dt`` are computed in (16-bit floats compute in ``float``)."""
    return compute_type_of(dt, storage_type)


@dataclass(frozen=True)
class CUDASource:
    """Generated CUDA text and the lowered programs it implements (by function name)."""

    text: str
    programs: dict[str, GPUProgram]

    def show_source(self) -> None:
        """Print the CUDA text."""
        print(self.text)  # noqa: T201


class CUDACodegen:
    """Emit CUDA for lowered GPU programs into one translation unit."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.bodies: list[str] = []
        self.uses_f16 = False
        self.uses_bf16 = False
        self.features: set[str] = set()  # tensor-core code: "f16", "bf16", "s8", "wmma"

    def add_program(self, prog: GPUProgram) -> None:
        """Emit every kernel of ``prog``."""
        for k in prog.kernels:
            _KernelEmitter(self, k).emit()

    def finish(self) -> str:
        """The whole translation unit."""
        head = [f"// {banner(self.target)}"]
        if self.uses_f16:
            head.append("#include <cuda_fp16.h>")
        if self.uses_bf16:
            head.append("#include <cuda_bf16.h>")
        if "wmma" in self.features:
            head.append("#include <mma.h>")
        preludes = [PRELUDE + (HALF_PRELUDE if self.uses_f16 else "")]
        if "f16" in self.features:
            preludes.append(TENSOR_CORE_PRELUDE)
        if "bf16" in self.features:
            preludes.append(TENSOR_CORE_PRELUDE_BF16)
        if "s8" in self.features:
            preludes.append(TENSOR_CORE_PRELUDE_S8)
        return join_unit(["\n".join(head) + "\n", *preludes, *self.bodies])


class _KernelEmitter(NativeHalf):
    """Emit one kernel: ``extern "C" __global__`` signature, then its statements."""

    LANG = "CUDA"
    RESTRICT = "__restrict__"
    INT64 = "{}LL"
    UINT64 = "{}ull"
    MATH_UNARY = MATH_UNARY | {"exp10", "rsqrt"}
    INTRINSICS = {
        "round": "rint{f}({x})",  # half to even, like numpy
        "isnan": "isnan({x})",
        "isinf": "isinf({x})",
        "isfinite": "isfinite({x})",
    }
    HALF = {
        "float16": ("__half2float({})", "__float2half({})", "__half2float(__float2half({}))"),
        "bfloat16": (
            "__bfloat162float({})",
            "__float2bfloat16({})",
            "__bfloat162float(__float2bfloat16({}))",
        ),
    }
    UNKNOWN_STMT_HINT = "lower it for the GPU first (tilecraft.lower.gpu_pipeline.lower_gpu)"

    def __init__(self, cg: CUDACodegen, kernel: Kernel) -> None:
        super().__init__(kernel.name, kernel.name, CUDA_RESERVED)
        self.cg = cg
        self.k = kernel
        self.written = written_buffers(kernel.body, (BufferStore, WarpShuffle))
        self.written |= written_by_device_calls(kernel.body)
        self.features = cg.features
        self.load_override: dict[int, str] = {}  # template over {lane} (x/y/z/w) or {index}
        self.var_override: dict[int, str] = {}
        self.lane = 0
        self.launch = dict(
            zip(("blockIdx.x", "blockIdx.y", "blockIdx.z"), kernel.grid, strict=True)
        )
        self.launch.update(
            zip(("threadIdx.x", "threadIdx.y", "threadIdx.z"), kernel.block, strict=True)
        )

    def emit(self) -> None:
        args = self.params(self.k.params)
        threads = self.k.threads_per_block
        bounds = f"__launch_bounds__({threads}) " if threads else ""
        self.out.emit(f'extern "C" __global__ void {bounds}{self.k.name}(')
        self.out.emit("    " + (",\n    ".join(args) if args else "") + ") {")
        self.out.level += 1
        if self.k.dyn_shared:
            self.out.emit("extern __shared__ __align__(32) unsigned char tc_dyn_smem[];")
        for line in self.prologue:
            self.out.emit(line)
        self.stmt(self.k.body)
        self.out.level -= 1
        self.out.emit("}")
        self.cg.bodies.append(self.out.text())

    def _note_dtype(self, dt: DataType) -> None:
        self.note_half(str(dt.element_of()))

    def note_half(self, dt: str) -> None:
        if dt == "float16":
            self.cg.uses_f16 = True
        elif dt == "bfloat16":
            self.cg.uses_bf16 = True

    # hooks --------------------------------------------------------------------------------
    def storage_type(self, dt: DataType) -> str:
        return storage_type(dt)

    def line(self, text: str) -> None:
        self.out.emit(text)

    def stmt(self, s: Stmt) -> None:
        call = s.value if isinstance(s, Evaluate) else None
        if isinstance(call, Call) and call.op in DEVICE_INTRINSICS:
            emit_device_call(self, call)  # tensor-core code (cuda_tensor_core.py)
            self.cg.uses_f16 = self.cg.uses_f16 or "f16" in self.features
            self.cg.uses_bf16 = self.cg.uses_bf16 or "bf16" in self.features
            return
        super().stmt(s)

    def half_target(self) -> bool:
        return self.cg.target.compute_capability >= 53

    def buffer_param(self, p: Buffer) -> None:
        self._note_dtype(p.dtype)

    def scalar_bound(self, p: Var) -> Bound:
        return (0, None) if p.dtype.is_integer else (None, None)

    def other_stmt(self, s: Stmt) -> None:
        if isinstance(s, ThreadSync):
            self.out.emit("__syncthreads();")
        elif isinstance(s, WarpShuffle):
            self.shuffle(s)
        else:
            super().other_stmt(s)

    def other_expr(self, e: Expr) -> str:
        if isinstance(e, _Raw):
            return e.text
        return super().other_expr(e)

    def element(self, e: BufferLoad) -> str:
        self._note_dtype(e.dtype)
        over = self.load_override.get(id(e))
        if over is None:
            return super().element(e)
        return over.format(lane=_LANE[self.lane % 4], index=self.lane)

    def var(self, e: Var) -> str:
        over = self.var_override.get(id(e))
        return over if over is not None else super().var(e)

    def helper_fn(self, fn: str, dt: DataType) -> str:
        unsigned = "u" if dt.is_uint and fn not in ("min", "max") else ""
        return f"tc_{unsigned}{fn}<{self.compute_type(dt)}>"

    def non_finite(self, v: float, single: bool) -> str:
        if single:
            bits = "0x7fffffff" if math.isnan(v) else "0x7f800000" if v > 0 else "0xff800000"
            return f"__int_as_float({bits})"
        if math.isnan(v):
            return "__longlong_as_double(0x7ff8000000000000LL)"
        bits = "0x7ff0000000000000LL" if v > 0 else "0xfff0000000000000LL"
        return f"__longlong_as_double({bits})"

    # CUDA-only statements -------------------------------------------------------------
    def shuffle(self, s: WarpShuffle) -> None:
        ctype = self.compute_type(s.value.dtype)
        value = f"({ctype})({self.expr(s.value)})"
        lane = self.expr(s.lane)
        fn = "__shfl_down_sync" if s.kind == "down" else "__shfl_sync"
        call = f"{fn}({s.mask:#010x}u, {value}, {lane}, {s.width})"
        self.out.emit(
            f"{self.buf(s.buffer)}[{self.expr(s.index)}] = "
            f"{self.stored(s.buffer.dtype, _Raw(s.value.dtype, call))};"
        )

    def loop(self, s: For) -> None:
        if s.kind is ForKind.THREAD_BINDING:
            self.thread_loop(s)
        elif s.annotations.get(ASYNC_COPY_ATTR) and emit_async_copy(self, s):
            self.defined.add(id(s.loop_var))
        elif s.annotations.get(VECTOR_ATTR):
            self.vector_loop(s)
        elif s.kind is ForKind.PARALLEL:
            raise self.fail(
                f"parallel loop {s.loop_var.name!r} inside a kernel; bind it to threads instead"
            )
        else:
            unroll = s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED)
            self.serial_loop(s, "#pragma unroll" if unroll else None)

    def thread_loop(self, s: For) -> None:
        tag = s.thread or ""
        if tag not in self.launch:
            raise self.fail(f"loop {s.loop_var.name!r} is bound to {tag}, which CUDA lacks")
        var = self.names.get(s.loop_var, s.loop_var.name)
        ctype = compute_type(s.loop_var.dtype)
        hw = f"(({ctype}){tag})" if ctype != "int" else f"(int){tag}"
        value = hw if is_zero(s.min) else f"{self.expr(s.min)} + {hw}"
        launch = self.launch[tag]
        guarded = not _same_const(s.extent, launch) and not (
            not isinstance(launch, IntImm) and s.extent is launch
        )
        self.bind_loop_var(s)
        self.out.emit(f"const {ctype} {var} = {value};")
        if guarded:
            if contains(s.body, lambda n: isinstance(n, (ThreadSync, WarpShuffle))):
                raise self.fail(
                    f"loop {s.loop_var.name!r} on {tag} has extent {s.extent} below the launch "
                    f"extent {launch} and contains a barrier; bind equal extents to {tag}"
                )
            self.out.emit(f"if ({var} < {self.expr(s.extent)}) {{")
            self.nested(s.body)
            self.out.emit("}")
        else:
            self.stmt(s.body)

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        self._note_dtype(buf.dtype)
        name = self.buf(buf)
        ctype = storage_type(buf.dtype)
        size = buf.shape[0]
        if buf.scope == "shared.dyn":
            offsets, _ = dyn_shared_layout(self.k.dyn_shared)
            pos = next(i for i, b in enumerate(self.k.dyn_shared) if b is buf)
            self.out.emit(f"{ctype}* {name} = ({ctype}*)(tc_dyn_smem + {self.expr(offsets[pos])});")
        elif not isinstance(size, IntImm):
            raise self.fail(
                f"{buf.scope} buffer {buf.name!r} has symbolic size {size}; use "
                "'shared.dyn' for shared memory of run-time size"
            )
        elif buf.scope == "shared":
            self.out.emit(f"__shared__ __align__(32) {ctype} {name}[{max(size.value, 1)}];")
        elif buf.scope == "local":
            self.out.emit(f"{ctype} {name}[{max(size.value, 1)}];")
        elif buf.scope.startswith("wmma."):
            self.out.emit(wmma_fragment_decl(self, buf, max(size.value, 1)))
        else:
            raise self.fail(f"global buffer {buf.name!r} allocated inside a kernel")
        self.stmt(s.body)

    def vector_loop(self, s: For) -> None:
        plan = vector_plan(s)
        if plan is None:
            raise self.fail(
                f"loop {s.loop_var.name!r} is marked vectorized but its accesses "
                "are not contiguous and aligned"
            )
        store = plan.store
        lanes = plan.lanes
        self.out.emit("{")
        self.out.level += 1
        loaded: dict[tuple[int, str, str], str] = {}  # one load per buffer, address, guard
        for load, base, guard in plan.loads:
            if not is_vector_access(load.buffer):
                continue  # a register tile: one scalar per lane
            address = f"{self.buf(load.buffer)} + {self.expr(base)}"
            cond = "" if guard is None else self.expr(guard)
            key = (id(load.buffer), address, cond)
            view = vector_type(load.buffer.dtype, lanes, storage_type(load.buffer.dtype))[1]
            if key not in loaded:
                loaded[key] = f"tc_vec{len(loaded)}"
                dt = load.buffer.dtype
                vtype = vector_type(dt, lanes, storage_type(dt))[0]
                self.vector_load(loaded[key], (vtype, view, vector_parts(dt, lanes)), address, cond)
            name = loaded[key]
            self.load_override[id(load)] = name + (".{lane}" if view is None else "_e[{index}]")
        vector_store = is_vector_access(store.buffer)
        vtype, view = vector_type(store.buffer.dtype, lanes, storage_type(store.buffer.dtype))
        if vector_store:
            self.out.emit(f"{vtype} tc_vout;")
            if view is not None:
                self.out.emit(f"{view}* tc_vout_e = ({view}*)&tc_vout;")
        self.defined.add(id(s.loop_var))
        half = str(store.buffer.dtype) in ("float16", "bfloat16")
        for lane in range(lanes):
            self.var_override[id(s.loop_var)] = str(lane)
            self.lane = lane
            text = self.stored(store.buffer.dtype, store.value) if half else self.expr(store.value)
            if not vector_store:
                index = self.expr(store.indices[0])
                self.out.emit(f"{self.buf(store.buffer)}[{index}] = {text};")
            elif view is None:
                self.out.emit(f"tc_vout.{_LANE[lane]} = {text};")
            else:
                self.out.emit(f"tc_vout_e[{lane}] = {text};")
        self.var_override.pop(id(s.loop_var), None)
        for load, *_ in plan.loads:
            self.load_override.pop(id(load), None)
        if vector_store:
            dst = f"{self.buf(store.buffer)} + {self.expr(plan.store_base)}"
            self.out.emit(f"*({vtype}*)({dst}) = tc_vout;")
        self.out.level -= 1
        self.out.emit("}")


@dataclass(frozen=True, eq=False)
class _Raw(Expr):
    """Already-rendered CUDA text standing in for an expression (emitter-internal)."""

    dtype: DataType
    text: str


def _same_const(a: Expr, b: Expr) -> bool:
    return isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value


def emit_cuda(programs: Mapping[str, GPUProgram], target: Target | str | None = None) -> CUDASource:
    """Emit one CUDA translation unit for already-lowered GPU programs.

    Parameters
    ----------
    programs
        Function name -> its program lowered by the CUDA backend
        (``tilecraft.runtime.backend_of(target).lower``, i.e.
        :func:`~tilecraft.lower.gpu_pipeline.lower_gpu`).
    target
        A CUDA target (default: the current target, else ``cuda -arch=sm_90``).

    Returns
    -------
    CUDASource
        The CUDA text and, per function name, the lowered :class:`GPUProgram`.
    """
    tgt = as_target(target) if target is not None else (Target.current() or Target("cuda"))
    cg = CUDACodegen(tgt)
    for prog in programs.values():
        cg.add_program(prog)
    return CUDASource(cg.finish(), dict(programs))

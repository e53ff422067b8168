"""CUDA emission of tensor-core operations: ``ldmatrix``, ``mma.sync``, ``cp.async`` (inline
PTX) and WMMA (``nvcuda::wmma``).

The CUDA kernel emitter (:mod:`tilecraft.codegen.cuda`) hands over three things:

- ``T.evaluate`` of a hardware device intrinsic (:data:`tilecraft.ir.device_intrin.HARDWARE_OPS`)
  -> :func:`emit_device_call`;
- a loop annotated ``tc.async_copy`` -> :func:`emit_async_copy` (``cp.async.cg.shared.global``
  of 16 bytes per thread; a loop that is not a contiguous, 16-byte aligned copy falls back to
  ordinary loads and stores, which the pipeline's waits and barriers order just as well);
- an allocation in a ``wmma.*`` scope -> :func:`wmma_fragment_decl`.

Fragment registers of ``mma`` are ``local`` arrays of ``__half``/``__nv_bfloat16``/``float``
(``signed char``/``int`` for int8 ``m16n8k32``); two 16-bit elements (four int8) travel in
one 32-bit register through :data:`TENSOR_CORE_PRELUDE`'s (:data:`TENSOR_CORE_PRELUDE_S8`'s)
pack and unpack helpers (no type punning of arrays, so no alignment requirement).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..arith import Analyzer
from ..errors import CodegenError
from ..ir import (
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    DataType,
    Expr,
    For,
    IntImm,
    Node,
    Stmt,
    Var,
    post_order_visit,
    substitute,
)
from ..lower.gpu_vectorize import copy_source, divisible

TENSOR_CORE_PRELUDE = """\
__device__ __forceinline__ unsigned tc_pack_f16(__half a, __half b) {
  return (unsigned)__half_as_ushort(a) | ((unsigned)__half_as_ushort(b) << 16);
}
__device__ __forceinline__ __half tc_lo_f16(unsigned r) {
  return __ushort_as_half((unsigned short)(r & 0xffffu));
}
__device__ __forceinline__ __half tc_hi_f16(unsigned r) {
  return __ushort_as_half((unsigned short)(r >> 16));
}
"""
TENSOR_CORE_PRELUDE_BF16 = """\
__device__ __forceinline__ unsigned tc_pack_bf16(__nv_bfloat16 a, __nv_bfloat16 b) {
  return (unsigned)__bfloat16_as_ushort(a) | ((unsigned)__bfloat16_as_ushort(b) << 16);
}
__device__ __forceinline__ __nv_bfloat16 tc_lo_bf16(unsigned r) {
  return __ushort_as_bfloat16((unsigned short)(r & 0xffffu));
}
__device__ __forceinline__ __nv_bfloat16 tc_hi_bf16(unsigned r) {
  return __ushort_as_bfloat16((unsigned short)(r >> 16));
}
"""
TENSOR_CORE_PRELUDE_S8 = """\
__device__ __forceinline__ unsigned tc_pack_s8(signed char a, signed char b, signed char c,
                                               signed char d) {
  return (unsigned)(unsigned char)a | ((unsigned)(unsigned char)b << 8) |
         ((unsigned)(unsigned char)c << 16) | ((unsigned)(unsigned char)d << 24);
}
__device__ __forceinline__ signed char tc_byte_s8(unsigned r, int i) {
  return (signed char)((r >> (8 * i)) & 0xffu);
}
"""
_WMMA_USE = {
    "wmma.matrix_a": "nvcuda::wmma::matrix_a",
    "wmma.matrix_b": "nvcuda::wmma::matrix_b",
    "wmma.matrix_b_col": "nvcuda::wmma::matrix_b",
    "wmma.accumulator": "nvcuda::wmma::accumulator",
}
_SHORT = {"float16": "f16", "bfloat16": "bf16"}


class Emitter(Protocol):
    """What the emission helpers need from the CUDA kernel emitter."""

    features: set[str]

    def line(self, text: str) -> None:
        """Add one line at the current indentation."""

    def expr(self, e: Expr) -> str:
        """Emit an expression."""

    def buf(self, b: Buffer) -> str:
        """The identifier of a buffer."""

    def storage_type(self, dt: DataType) -> str:
        """The CUDA type storing one element."""

    def fail(self, what: str) -> CodegenError:
        """A codegen error naming the kernel."""


def _element(em: Emitter, a: Expr) -> str:
    """The lvalue ``buf[index]`` of an element-address argument."""
    assert isinstance(a, BufferLoad)
    return f"{em.buf(a.buffer)}[{em.expr(a.indices[0])}]"


def _address(em: Emitter, a: Expr) -> str:
    """The pointer ``buf + index`` of an element-address argument."""
    assert isinstance(a, BufferLoad)
    return f"({em.buf(a.buffer)} + {em.expr(a.indices[0])})"


def _shared_address(em: Emitter, a: Expr) -> str:
    return f"(unsigned)__cvta_generic_to_shared({_address(em, a)})"


def _const(em: Emitter, e: Expr, what: str) -> int:
    if not isinstance(e, IntImm):
        raise em.fail(f"{what} must be a constant, got {e!r}")
    return e.value


def _short(em: Emitter, a: Expr) -> str:
    """``f16`` / ``bf16`` for an element of a 16-bit float buffer (and note the feature)."""
    dt = str(a.dtype)
    if dt not in _SHORT:
        raise em.fail(f"tensor-core operand of dtype {dt}; expected float16 or bfloat16")
    em.features.add(_SHORT[dt])
    return _SHORT[dt]


def _check_aligned(em: Emitter, a: Expr, nbytes: int, what: str) -> None:
    """``a``'s element offset is provably a multiple of ``nbytes`` bytes."""
    assert isinstance(a, BufferLoad)
    per = nbytes * 8 // a.buffer.dtype.bits
    if not divisible(a.indices[0], per):
        raise em.fail(
            f"{what} address {em.buf(a.buffer)} + {em.expr(a.indices[0])} is not provably "
            f"{nbytes}-byte aligned; pad rows to a multiple of {per} elements (storage_align)"
        )


def _ldmatrix(em: Emitter, call: Call) -> None:
    num = int(call.op[-1])
    trans = _const(em, call.args[0], "ldmatrix .trans")
    dst = call.args[3:]
    short = _short(em, dst[0])
    _check_aligned(em, call.args[1], 16, "ldmatrix row")
    regs = ", ".join(f"%{i}" for i in range(num))
    suffix = ".trans" if trans else ""
    outs = ", ".join(f'"=r"(tc_r[{i}])' for i in range(num))
    em.line("{")
    em.line(f"  unsigned tc_r[{num}];")
    em.line(
        f'  asm volatile("ldmatrix.sync.aligned.m8n8.x{num}{suffix}.shared.b16 {{{regs}}}, '
        f'[%{num}];\\n" : {outs} : "r"({_shared_address(em, call.args[1])}) : "memory");'
    )
    for i in range(num):
        em.line(f"  {_element(em, dst[2 * i])} = tc_lo_{short}(tc_r[{i}]);")
        em.line(f"  {_element(em, dst[2 * i + 1])} = tc_hi_{short}(tc_r[{i}]);")
    em.line("}")


def _int8(em: Emitter, a: Expr, what: str) -> None:
    if str(a.dtype) != "int8":
        raise em.fail(f"{what} of dtype {a.dtype}; expected int8")
    em.features.add("s8")


def _ldmatrix_b8(em: Emitter, call: Call) -> None:
    """``ldmatrix`` of int8 rows (16 per row): four int8 per destination register."""
    num = int(call.op[-1])
    dst = call.args[2:]
    _int8(em, dst[0], "ldmatrix destination")
    _check_aligned(em, call.args[0], 16, "ldmatrix row")
    regs = ", ".join(f"%{i}" for i in range(num))
    outs = ", ".join(f'"=r"(tc_r[{i}])' for i in range(num))
    em.line("{")
    em.line(f"  unsigned tc_r[{num}];")
    em.line(
        f'  asm volatile("ldmatrix.sync.aligned.m8n8.x{num}.shared.b16 {{{regs}}}, '
        f'[%{num}];\\n" : {outs} : "r"({_shared_address(em, call.args[0])}) : "memory");'
    )
    for i in range(num):
        for h in range(4):
            em.line(f"  {_element(em, dst[4 * i + h])} = tc_byte_s8(tc_r[{i}], {h});")
    em.line("}")


def _mma_s8(em: Emitter, call: Call) -> None:
    """``mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32`` on the lane's 4 + 16 + 8 elements."""
    c, a, b = call.args[0:4], call.args[4:20], call.args[20:28]
    _int8(em, a[0], "mma.sync A")
    _int8(em, b[0], "mma.sync B")
    if str(c[0].dtype) != "int32":
        raise em.fail(f"int8 mma.sync accumulator of dtype {c[0].dtype}; expected int32")
    quads = [a[i : i + 4] for i in range(0, 16, 4)] + [b[i : i + 4] for i in range(0, 8, 4)]
    ins = ", ".join(f'"r"(tc_pack_s8({", ".join(_element(em, x) for x in q)}))' for q in quads)
    outs = ", ".join(f'"+r"({_element(em, x)})' for x in c)
    ptx = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
    em.line(
        f'asm volatile("{ptx} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, '
        f'{{%0, %1, %2, %3}};\\n" : {outs} : {ins});'
    )


def _mma(em: Emitter, call: Call) -> None:
    c, a, b = call.args[0:4], call.args[4:12], call.args[12:16]
    short = _short(em, a[0])
    if _short(em, b[0]) != short:
        raise em.fail("mma.sync operands A and B have different dtypes")
    pairs = [*zip(a[0::2], a[1::2], strict=True), *zip(b[0::2], b[1::2], strict=True)]
    ins = ", ".join(f'"r"(tc_pack_{short}({_element(em, x)}, {_element(em, y)}))' for x, y in pairs)
    if str(c[0].dtype) == "float16":  # fp16 accumulators: two f16x2 registers, read and written
        if short != "f16":
            raise em.fail("mma.sync with an fp16 accumulator takes fp16 operands")
        _mma_f16_accumulator(em, [_element(em, x) for x in c], ins)
        return
    ptx = f"mma.sync.aligned.m16n8k16.row.col.f32.{short}.{short}.f32"
    outs = ", ".join(f'"+f"({_element(em, x)})' for x in c)
    em.line(
        f'asm volatile("{ptx} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, '
        f'{{%0, %1, %2, %3}};\\n" : {outs} : {ins});'
    )


def _mma_f16_accumulator(em: Emitter, c: list[str], ins: str) -> None:
    """``mma.sync ... .f16.f16.f16.f16`` on the lane's accumulator elements ``c``."""
    ptx = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"
    em.line("{")
    em.line(f"  unsigned tc_c[2] = {{tc_pack_f16({c[0]}, {c[1]}), tc_pack_f16({c[2]}, {c[3]})}};")
    em.line(
        f'  asm volatile("{ptx} {{%0, %1}}, {{%2, %3, %4, %5}}, {{%6, %7}}, {{%0, %1}};\\n" : '
        f'"+r"(tc_c[0]), "+r"(tc_c[1]) : {ins});'
    )
    for i, x in enumerate(c):
        em.line(f"  {x} = tc_{'hi' if i % 2 else 'lo'}_f16(tc_c[{i // 2}]);")
    em.line("}")


def _leading_dim(em: Emitter, first: Expr, next_row: Expr) -> str:
    """``ldm`` of a WMMA memory tile; checks the alignment WMMA requires (a 32-byte aligned
    pointer, ``ldm`` a multiple of 16 bytes)."""
    assert isinstance(first, BufferLoad)
    assert isinstance(next_row, BufferLoad)
    _check_aligned(em, first, 32, "WMMA tile")
    ldm = Analyzer().simplify(next_row.indices[0] - first.indices[0])
    if not divisible(ldm, 128 // first.buffer.dtype.bits):
        raise em.fail(f"WMMA leading dimension {em.expr(ldm)} is not a multiple of 16 bytes")
    return em.expr(ldm)


def _wmma(em: Emitter, call: Call) -> None:
    em.features.add("wmma")
    ns = "nvcuda::wmma::"
    args = call.args
    if call.op == "wmma_fill_fragment":
        em.line(f"{ns}fill_fragment({_element(em, args[0])}, {em.expr(args[1])});")
    elif call.op == "wmma_mma_sync":
        d, a, b, c = (_element(em, x) for x in args)
        em.line(f"{ns}mma_sync({d}, {a}, {b}, {c});")
    elif call.op == "wmma_load_sync":
        ldm = _leading_dim(em, args[1], args[3])
        em.line(f"{ns}load_matrix_sync({_element(em, args[0])}, {_address(em, args[1])}, {ldm});")
    else:
        ldm = _leading_dim(em, args[0], args[2])
        em.line(
            f"{ns}store_matrix_sync({_address(em, args[0])}, {_element(em, args[3])}, {ldm}, "
            f"{ns}mem_row_major);"
        )


def emit_device_call(em: Emitter, call: Call) -> None:
    """Emit one hardware device intrinsic as a statement."""
    op = call.op
    if op.startswith("ptx_ldmatrix_b8_"):
        _ldmatrix_b8(em, call)
    elif op.startswith("ptx_ldmatrix_"):
        _ldmatrix(em, call)
    elif op == "ptx_mma_m16n8k16":
        _mma(em, call)
    elif op == "ptx_mma_m16n8k32":
        _mma_s8(em, call)
    elif op == "ptx_cp_async_commit":
        em.line('asm volatile("cp.async.commit_group;\\n" ::: "memory");')
    elif op == "ptx_cp_async_wait":
        n = _const(em, call.args[0], "cp.async.wait_group count")
        em.line(f'asm volatile("cp.async.wait_group {n};\\n" ::: "memory");')
    elif op.startswith("wmma_"):
        _wmma(em, call)
    else:
        raise em.fail(f"{op} is a warp tile operation; lower it first (LowerWarpFragments)")


@dataclass(frozen=True)
class AsyncCopy:
    """A loop issued as one 16-byte ``cp.async``: ``dst[dst_base + v] = src[src_base + v]``
    for ``v`` in ``0 .. lanes - 1``; with a ``guard``, zeros where it fails (the zero-fill
    form: source size 0, nothing read)."""

    dst: Buffer
    dst_base: Expr
    src: Buffer
    src_base: Expr
    lanes: int
    guard: Expr | None = None


def async_copy_of(loop: For) -> AsyncCopy | None:
    """The ``cp.async`` a copy loop is emitted as; None when the loop is not a contiguous copy
    of 16 aligned bytes (CUDA then emits ordinary loads and stores)."""
    store = loop.body
    if not isinstance(store, BufferStore):
        return None
    source = copy_source(store.value, loop.loop_var)
    if source is None:
        return None
    load, guard = source
    if not isinstance(loop.extent, IntImm) or not isinstance(loop.min, IntImm):
        return None
    lanes = loop.extent.value
    if lanes * store.buffer.dtype.bits != 128 or loop.min.value != 0:
        return None
    bases = []
    for access in (store, load):
        base = _contiguous_base(access.indices[0], loop.loop_var)
        if base is None or not divisible(base, lanes):
            return None
        bases.append(base)
    return AsyncCopy(store.buffer, bases[0], load.buffer, bases[1], lanes, guard)


def emit_async_copy(em: Emitter, loop: For) -> bool:
    """Emit a 16-byte ``cp.async`` for a copy loop; False (nothing emitted) when the loop is
    not a contiguous copy of 16 aligned bytes from global to shared memory."""
    copy = async_copy_of(loop)
    if copy is None:
        return False
    dst = f"(unsigned)__cvta_generic_to_shared({em.buf(copy.dst)} + {em.expr(copy.dst_base)})"
    src = f"({em.buf(copy.src)} + {em.expr(copy.src_base)})"
    if copy.guard is None:
        em.line(
            f'asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: "r"({dst}), '
            f'"l"({src}) : "memory");'
        )
        return True
    # zero-fill form: a source size of 0 reads nothing and writes 16 zero bytes
    cond = em.expr(copy.guard)
    src = f"(({cond}) ? {src} : {em.buf(copy.src)})"
    em.line(
        f'asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"({dst}), '
        f'"l"({src}), "r"(({cond}) ? 16 : 0) : "memory");'
    )
    return True


def _contiguous_base(index: Expr, var: Var) -> Expr | None:
    ana = Analyzer()
    base = ana.simplify(substitute(index, {var: IntImm(var.dtype, 0)}))
    step = ana.simplify(substitute(index, {var: IntImm(var.dtype, 1)}) - base)
    return base if isinstance(step, IntImm) and step.value == 1 else None


def wmma_fragment_decl(em: Emitter, buf: Buffer, count: int) -> str:
    """``nvcuda::wmma::fragment<...> name[count];`` for a ``wmma.*`` buffer."""
    em.features.add("wmma")
    use = _WMMA_USE[buf.scope]
    elem = em.storage_type(buf.dtype)
    layout = {"wmma.accumulator": "", "wmma.matrix_b_col": ", nvcuda::wmma::col_major"}.get(
        buf.scope, ", nvcuda::wmma::row_major"
    )
    return f"nvcuda::wmma::fragment<{use}, 16, 16, 16, {elem}{layout}> {em.buf(buf)}[{count}];"


def written_by_device_calls(body: Stmt) -> set[int]:
    """``id`` of every buffer a hardware device intrinsic writes through an address
    (``wmma_store_sync``'s destination)."""
    out: set[int] = set()

    def fn(n: Node) -> None:
        if isinstance(n, Call) and n.op == "wmma_store_sync":
            first = n.args[0]
            if isinstance(first, BufferLoad):
                out.add(id(first.buffer))

    post_order_visit(body, fn)
    return out

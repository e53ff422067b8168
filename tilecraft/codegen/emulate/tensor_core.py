"""Tensor-core intrinsics in the GPU emulator: ``ldmatrix``, ``mma.sync``, WMMA, ``cp.async``.

Registers (at import; :mod:`.source` imports this module) the hardware device intrinsics of
lowered tensor-core code (:data:`tilecraft.ir.device_intrin.HARDWARE_OPS`) with the emulator's
extension point (:mod:`.intrinsics`); the arithmetic is the C reference of
:mod:`.tensor_core_semantics`, reached through small adapters from ``tc_emu_warp_call``:

* ``ptx_ldmatrix_x{1,2,4}`` — lane ``l < 8 num`` hands over the 8-element shared-memory row it
  addresses (a read region, so the race checker sees the rows); every lane's ``2 num``
  destination registers are write regions of its ``local`` fragment.
* ``ptx_mma_m16n8k16`` — each lane's 16 register operands are regions of its fragments
  (``c`` read and written, ``a`` and ``b`` read: a register nothing wrote is an uninitialized
  read).
* ``ptx_ldmatrix_b8_x{2,4}`` / ``ptx_mma_m16n8k32`` — the int8 forms (rows of 16 int8, four
  per register; an int32 accumulator), as above.
* WMMA (fp16 into fp32; int8 into int32) — CUDA leaves the distribution of a fragment over
  the lanes unspecified; the emulator chooses one: lane ``l`` holds row ``l // 2``, columns
  ``8 (l % 2) .. 8 (l % 2) + 7`` of each 16x16 fragment in its own storage
  (:func:`~.intrinsics.register_fragment_scope`: 8 values per fragment and lane), and
  ``load_matrix_sync`` / ``store_matrix_sync`` move exactly that lane's 8 elements of the
  memory tile (regions: bounds- and race-checked per lane). ``mma_sync`` gathers the 32
  lanes' parts into tiles, runs the reference and scatters ``d``.
* ``cp.async`` — a loop annotated ``tc.async_copy`` that CUDA codegen issues as one 16-byte
  ``cp.async`` (:func:`~..cuda_tensor_core.async_copy_of`: the same decision) is queued per
  thread; ``ptx_cp_async_commit`` / ``ptx_cp_async_wait(n)`` close a group / complete all but
  the ``n`` newest. Under race checking the destination is in flight until its wait.

A collective that needs the whole warp (``mma``, WMMA) run by fewer lanes is reported.
"""

from __future__ import annotations

from ...arith import Analyzer
from ...errors import CodegenError
from ...ir import BufferLoad, Call, Evaluate, Expr, For, IntImm, Stmt, cast
from ...lower.software_pipeline import ASYNC_COPY_ATTR
from ..cuda_tensor_core import async_copy_of
from .intrinsics import (
    LANE,
    Access,
    AsyncIntrinsic,
    AsyncRole,
    CollectiveCall,
    LaneRegion,
    LaneValue,
    WarpCollective,
    register_fragment_scope,
    register_intrinsic,
)
from .tensor_core_semantics import TENSOR_CORE_EMULATION_C

WMMA_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.matrix_b_col", "wmma.accumulator")
WMMA_LANE_ELEMENTS = 8
"""Values of one 16x16 WMMA fragment each lane holds (256 / 32)."""

_ADAPTERS_C = r"""/* tensor-core adapters: tc_emu_warp_call -> tensor_core_semantics C */
static int tc_emu_tc_whole_warp(tc_emu_warp_call* c, const char* why) {
  if (c->arrived == 0xffffffffu) return 1;
  int32_t first = __builtin_ctz(c->arrived), missing = __builtin_ctz(~c->arrived);
  tc_emu_warp_fail(c, first, missing, why);
  return 0;
}
#define TC_EMU_OP(lane, k) (c->ops[lane][k])

/* ptx_ldmatrix_x{num}: op 0 the lane's row (lanes < 8 num), ops 1.. its destinations. */
static void tc_emu_tc_ldmatrix(tc_emu_warp_call* c) {
  int num = (int)c->imm[0], trans = (int)c->imm[1];
  const uint16_t* base = 0;
  int64_t offs[32] = {0};
  uint16_t dst[32][8];
  for (int l = 0; l < 8 * num; ++l) {
    if (!((c->arrived >> l) & 1u)) {
      tc_emu_warp_fail(c, __builtin_ctz(c->arrived), l,
                       "ldmatrix needs the row address of a lane that did not execute it");
      return;
    }
    const uint16_t* row = (const uint16_t*)TC_EMU_OP(l, 0);
    if (!base || row < base) base = row;
  }
  for (int l = 0; l < 8 * num; ++l) offs[l] = (const uint16_t*)TC_EMU_OP(l, 0) - base;
  tc_emu_ldmatrix(num, trans, base, offs, dst);
  for (int l = 0; l < 32; ++l)
    if ((c->arrived >> l) & 1u)
      for (int e = 0; e < 2 * num; ++e) *(uint16_t*)TC_EMU_OP(l, 1 + e) = dst[l][e];
}

/* ptx_mma_m16n8k16: ops 0..3 c (float, or fp16 when imm[1]; read and written), 4..11 a,
   12..15 b (16-bit). */
static void tc_emu_tc_mma(tc_emu_warp_call* c) {
  if (!tc_emu_tc_whole_warp(c, "mma.sync needs all 32 lanes of the warp")) return;
  uint16_t a[32][8], b[32][4], acc16[32][4];
  float acc[32][4];
  int half = (int)c->imm[1];
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 4; ++e) {
      if (half) acc16[l][e] = *(const uint16_t*)TC_EMU_OP(l, e);
      else acc[l][e] = *(const float*)TC_EMU_OP(l, e);
    }
    for (int e = 0; e < 8; ++e) a[l][e] = *(const uint16_t*)TC_EMU_OP(l, 4 + e);
    for (int e = 0; e < 4; ++e) b[l][e] = *(const uint16_t*)TC_EMU_OP(l, 12 + e);
  }
  if (half)
    tc_emu_mma_m16n8k16_f16((const uint16_t(*)[8])a, (const uint16_t(*)[4])b, acc16);
  else
    tc_emu_mma_m16n8k16((int)c->imm[0], (const uint16_t(*)[8])a, (const uint16_t(*)[4])b, acc);
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 4; ++e) {
      if (half) *(uint16_t*)TC_EMU_OP(l, e) = acc16[l][e];
      else *(float*)TC_EMU_OP(l, e) = acc[l][e];
    }
}

/* ptx_ldmatrix_b8_x{num}: op 0 the lane's row of 16 int8 (lanes < 8 num), ops 1.. its 4 num
   destinations. */
static void tc_emu_tc_ldmatrix_b8(tc_emu_warp_call* c) {
  int num = (int)c->imm[0];
  const int8_t* rows[32] = {0};
  int8_t dst[32][16];
  for (int l = 0; l < 8 * num; ++l) {
    if (!((c->arrived >> l) & 1u)) {
      tc_emu_warp_fail(c, __builtin_ctz(c->arrived), l,
                       "ldmatrix needs the row address of a lane that did not execute it");
      return;
    }
    rows[l] = (const int8_t*)TC_EMU_OP(l, 0);
  }
  tc_emu_ldmatrix_b8(num, rows, dst);
  for (int l = 0; l < 32; ++l)
    if ((c->arrived >> l) & 1u)
      for (int e = 0; e < 4 * num; ++e) *(int8_t*)TC_EMU_OP(l, 1 + e) = dst[l][e];
}

/* ptx_mma_m16n8k32: ops 0..3 c (int32, read and written), 4..19 a, 20..27 b (int8). */
static void tc_emu_tc_mma_s8(tc_emu_warp_call* c) {
  if (!tc_emu_tc_whole_warp(c, "mma.sync needs all 32 lanes of the warp")) return;
  int8_t a[32][16], b[32][8];
  int32_t acc[32][4];
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 4; ++e) acc[l][e] = *(const int32_t*)TC_EMU_OP(l, e);
    for (int e = 0; e < 16; ++e) a[l][e] = *(const int8_t*)TC_EMU_OP(l, 4 + e);
    for (int e = 0; e < 8; ++e) b[l][e] = *(const int8_t*)TC_EMU_OP(l, 20 + e);
  }
  tc_emu_mma_m16n8k32_s8((const int8_t(*)[16])a, (const int8_t(*)[8])b, acc);
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 4; ++e) *(int32_t*)TC_EMU_OP(l, e) = acc[l][e];
}

/* WMMA: lane l holds row l / 2, columns 8 (l % 2) .. + 7 of a 16x16 fragment. */
static void tc_emu_tc_wmma_copy(tc_emu_warp_call* c) {  /* op 0 <- op 1, this lane's part */
  if (!tc_emu_tc_whole_warp(c, "a WMMA load or store needs all 32 lanes of the warp")) return;
  for (int l = 0; l < 32; ++l) memcpy(TC_EMU_OP(l, 0), TC_EMU_OP(l, 1), (size_t)c->sizes[0]);
}

static void tc_emu_tc_wmma_fill(tc_emu_warp_call* c) {  /* op 0 (float; int32: imm 0) = op 1 */
  if (!tc_emu_tc_whole_warp(c, "wmma::fill_fragment needs all 32 lanes of the warp")) return;
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 8; ++e) {
      float v = *(const float*)TC_EMU_OP(l, 1);
      if (c->imm[0]) ((int32_t*)TC_EMU_OP(l, 0))[e] = (int32_t)v;
      else ((float*)TC_EMU_OP(l, 0))[e] = v;
    }
}

/* int8 WMMA: ops d, a, b (int8), c (int32); imm 0: B a col_major fragment. */
static void tc_emu_tc_wmma_mma_s8(tc_emu_warp_call* c) {
  int8_t a[16][16], b[16][16];
  int32_t acc[16][16], d[16][16];
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 8; ++e) {
      int i = l / 2, j = 8 * (l % 2) + e;
      a[i][j] = ((const int8_t*)TC_EMU_OP(l, 1))[e];
      int8_t bv = ((const int8_t*)TC_EMU_OP(l, 2))[e];
      if (c->imm[0]) b[j][i] = bv; else b[i][j] = bv;
      acc[i][j] = ((const int32_t*)TC_EMU_OP(l, 3))[e];
    }
  tc_emu_wmma_mma_s8(d, (const int8_t(*)[16])a, (const int8_t(*)[16])b,
                     (const int32_t(*)[16])acc);
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 8; ++e) ((int32_t*)TC_EMU_OP(l, 0))[e] = d[l / 2][8 * (l % 2) + e];
}

static void tc_emu_tc_wmma_mma(tc_emu_warp_call* c) {  /* ops: d, a, b (fp16), c (float) */
  if (!tc_emu_tc_whole_warp(c, "wmma::mma_sync needs all 32 lanes of the warp")) return;
  if (c->imm[1]) {
    tc_emu_tc_wmma_mma_s8(c);
    return;
  }
  float a[16][16], b[16][16], acc[16][16], d[16][16];
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 8; ++e) {
      int i = l / 2, j = 8 * (l % 2) + e;
      a[i][j] = tc_emu_f16_to_f32(((const uint16_t*)TC_EMU_OP(l, 1))[e]);
      /* a col_major B fragment holds the n x k memory tile as loaded: transposed here */
      float bv = tc_emu_f16_to_f32(((const uint16_t*)TC_EMU_OP(l, 2))[e]);
      if (c->imm[0]) b[j][i] = bv; else b[i][j] = bv;
      acc[i][j] = ((const float*)TC_EMU_OP(l, 3))[e];
    }
  tc_emu_wmma_mma(d, (const float(*)[16])a, (const float(*)[16])b, (const float(*)[16])acc);
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 8; ++e) ((float*)TC_EMU_OP(l, 0))[e] = d[l / 2][8 * (l % 2) + e];
}
"""
_REQUIRES = (
    ("tc_emu_tensor_core_reference", TENSOR_CORE_EMULATION_C),
    ("tc_emu_tensor_core_adapters", _ADAPTERS_C),
)
_LDMATRIX_OPS = {"ptx_ldmatrix_x1": 1, "ptx_ldmatrix_x2": 2, "ptx_ldmatrix_x4": 4}
_LDMATRIX_B8_OPS = {"ptx_ldmatrix_b8_x2": 2, "ptx_ldmatrix_b8_x4": 4}
_SHORT = {"float16": 0, "bfloat16": 1}


def _call(s: Stmt, *ops: str) -> Call | None:
    """The device call ``s`` evaluates when its op is one of ``ops``."""
    if isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op in ops:
        return s.value
    return None


def _address(e: Expr, what: str) -> BufferLoad:
    if not isinstance(e, BufferLoad) or len(e.indices) != 1:
        raise CodegenError(f"emulator codegen: {what} must be a flat element address, got {e}")
    return e


def _element(e: Expr, access: Access, what: str) -> LaneRegion:
    """One register (a fragment element) of the lane."""
    a = _address(e, what)
    return LaneRegion(a.buffer, a.indices[0], 1, access)


def _dtype(e: Expr, allowed: tuple[str, ...], what: str) -> str:
    dt = str(e.dtype)
    if dt not in allowed:
        raise CodegenError(f"emulator codegen: {what} of dtype {dt}; the emulator has {allowed}")
    return dt


def _describe_ldmatrix(s: Stmt) -> CollectiveCall:
    call = _call(s, *_LDMATRIX_OPS)
    assert call is not None
    num = _LDMATRIX_OPS[call.op]
    trans = call.args[0]
    if not isinstance(trans, IntImm):
        raise CodegenError(f"emulator codegen: {call.op} .trans must be a constant")
    first = _address(call.args[1], f"{call.op} row")
    _dtype(first, tuple(_SHORT), f"{call.op} shared row")
    rows = LaneRegion(first.buffer, first.indices[0], 8, Access.READ, lanes=(1 << 8 * num) - 1)
    dst = tuple(_element(d, Access.WRITE, f"{call.op} destination") for d in call.args[3:])
    return CollectiveCall((rows, *dst), immediates=(num, trans.value))


def _describe_mma(s: Stmt) -> CollectiveCall:
    call = _call(s, "ptx_mma_m16n8k16")
    assert call is not None
    kind = _dtype(call.args[4], tuple(_SHORT), "mma.sync A")
    if str(call.args[12].dtype) != kind:
        raise CodegenError("emulator codegen: mma.sync operands A and B have different dtypes")
    acc_dt = _dtype(call.args[0], ("float32", "float16"), "mma.sync accumulator")
    if acc_dt == "float16" and kind != "float16":
        raise CodegenError("emulator codegen: an fp16 mma.sync accumulator takes fp16 A and B")
    acc = tuple(_element(x, Access.READ_WRITE, "mma.sync C") for x in call.args[0:4])
    ab = tuple(_element(x, Access.READ, "mma.sync A/B") for x in call.args[4:16])
    return CollectiveCall((*acc, *ab), immediates=(_SHORT[kind], int(acc_dt == "float16")))


def _describe_ldmatrix_b8(s: Stmt) -> CollectiveCall:
    call = _call(s, *_LDMATRIX_B8_OPS)
    assert call is not None
    num = _LDMATRIX_B8_OPS[call.op]
    first = _address(call.args[0], f"{call.op} row")
    _dtype(first, ("int8",), f"{call.op} shared row")
    rows = LaneRegion(first.buffer, first.indices[0], 16, Access.READ, lanes=(1 << 8 * num) - 1)
    dst = tuple(_element(d, Access.WRITE, f"{call.op} destination") for d in call.args[2:])
    return CollectiveCall((rows, *dst), immediates=(num,))


def _describe_mma_s8(s: Stmt) -> CollectiveCall:
    call = _call(s, "ptx_mma_m16n8k32")
    assert call is not None
    _dtype(call.args[4], ("int8",), "int8 mma.sync A")
    _dtype(call.args[20], ("int8",), "int8 mma.sync B")
    _dtype(call.args[0], ("int32",), "int8 mma.sync accumulator")
    acc = tuple(_element(x, Access.READ_WRITE, "mma.sync C") for x in call.args[0:4])
    ab = tuple(_element(x, Access.READ, "mma.sync A/B") for x in call.args[4:28])
    return CollectiveCall((*acc, *ab))


def _fragment(e: Expr, access: Access, what: str) -> LaneRegion:
    """This lane's part of WMMA fragment ``e``."""
    a = _address(e, what)
    if a.buffer.scope not in WMMA_SCOPES:
        raise CodegenError(f"emulator codegen: {what} is in scope {a.buffer.scope!r}")
    n = WMMA_LANE_ELEMENTS
    return LaneRegion(a.buffer, a.indices[0] * n, n, access)


def _tile_part(first: Expr, next_row: Expr, access: Access, what: str) -> LaneRegion:
    """This lane's 8 elements of the 16x16 memory tile at ``first`` (rows ``ldm`` apart)."""
    f, r = _address(first, what), _address(next_row, what)
    if f.buffer is not r.buffer:
        raise CodegenError(f"emulator codegen: {what}: tile rows in different buffers")
    ldm = Analyzer().simplify(r.indices[0] - f.indices[0])
    lane = cast(LANE, str(ldm.dtype)) if str(ldm.dtype) != "int32" else LANE
    base = f.indices[0] + lane // 2 * ldm + lane % 2 * WMMA_LANE_ELEMENTS
    return LaneRegion(f.buffer, base, WMMA_LANE_ELEMENTS, access)


def _describe_wmma(s: Stmt) -> CollectiveCall:
    call = _call(s, "wmma_load_sync", "wmma_store_sync", "wmma_fill_fragment", "wmma_mma_sync")
    assert call is not None
    args = call.args
    if call.op == "wmma_load_sync":
        _dtype(args[1], ("float16", "int8"), "wmma::load_matrix_sync memory")
        if str(args[0].dtype) != str(args[1].dtype):
            raise CodegenError("emulator codegen: wmma::load_matrix_sync converts dtypes")
        frag = _fragment(args[0], Access.WRITE, "wmma::load_matrix_sync fragment")
        return CollectiveCall((frag, _tile_part(args[1], args[3], Access.READ, call.op)))
    if call.op == "wmma_store_sync":
        acc = _dtype(args[3], ("float32", "int32"), "wmma::store_matrix_sync fragment")
        _dtype(args[0], (acc,), "wmma::store_matrix_sync memory")
        frag = _fragment(args[3], Access.READ, "wmma::store_matrix_sync fragment")
        return CollectiveCall((_tile_part(args[0], args[2], Access.WRITE, call.op), frag))
    if call.op == "wmma_fill_fragment":
        acc = _dtype(args[0], ("float32", "int32"), "wmma::fill_fragment fragment")
        frag = _fragment(args[0], Access.WRITE, "wmma::fill_fragment fragment")
        value = LaneValue(cast(args[1], "float32"))
        return CollectiveCall((frag, value), immediates=(int(acc == "int32"),))
    ab = _dtype(args[1], ("float16", "int8"), "wmma::mma_sync A")
    _dtype(args[2], (ab,), "wmma::mma_sync B")
    acc = _dtype(args[3], ("float32",) if ab == "float16" else ("int32",), "wmma::mma_sync C")
    _dtype(args[0], (acc,), "wmma::mma_sync D")
    ops = (Access.WRITE, Access.READ, Access.READ, Access.READ)
    b_col = _address(args[2], "wmma::mma_sync B").buffer.scope == "wmma.matrix_b_col"
    return CollectiveCall(
        tuple(_fragment(x, a, "wmma::mma_sync operand") for x, a in zip(args, ops, strict=True)),
        immediates=(int(b_col), int(ab == "int8")),
    )


def _wmma(name: str, op: str, c_function: str) -> WarpCollective:
    return WarpCollective(
        name, lambda s: _call(s, op) is not None, _describe_wmma, c_function, "", _REQUIRES
    )


def _is_async_copy(s: Stmt) -> bool:
    return (
        isinstance(s, For)
        and bool(s.annotations.get(ASYNC_COPY_ATTR))
        and async_copy_of(s) is not None
    )


def _copy_regions(s: Stmt) -> tuple[LaneRegion, LaneRegion]:
    assert isinstance(s, For)
    copy = async_copy_of(s)
    assert copy is not None
    return (
        LaneRegion(copy.dst, copy.dst_base, copy.lanes, Access.WRITE),
        LaneRegion(copy.src, copy.src_base, copy.lanes, Access.READ, guard=copy.guard),
    )


def _in_flight(s: Stmt) -> int:
    call = _call(s, "ptx_cp_async_wait")
    assert call is not None
    n = call.args[0]
    if not isinstance(n, IntImm):
        raise CodegenError("emulator codegen: cp.async.wait_group count must be a constant")
    return n.value


INTRINSICS: tuple[WarpCollective | AsyncIntrinsic, ...] = (
    WarpCollective(
        "tc_ldmatrix",
        lambda s: _call(s, *_LDMATRIX_OPS) is not None,
        _describe_ldmatrix,
        "tc_emu_tc_ldmatrix",
        "",
        _REQUIRES,
    ),
    WarpCollective(
        "tc_mma_m16n8k16",
        lambda s: _call(s, "ptx_mma_m16n8k16") is not None,
        _describe_mma,
        "tc_emu_tc_mma",
        "",
        _REQUIRES,
    ),
    WarpCollective(
        "tc_ldmatrix_b8",
        lambda s: _call(s, *_LDMATRIX_B8_OPS) is not None,
        _describe_ldmatrix_b8,
        "tc_emu_tc_ldmatrix_b8",
        "",
        _REQUIRES,
    ),
    WarpCollective(
        "tc_mma_m16n8k32",
        lambda s: _call(s, "ptx_mma_m16n8k32") is not None,
        _describe_mma_s8,
        "tc_emu_tc_mma_s8",
        "",
        _REQUIRES,
    ),
    _wmma("tc_wmma_load", "wmma_load_sync", "tc_emu_tc_wmma_copy"),
    _wmma("tc_wmma_store", "wmma_store_sync", "tc_emu_tc_wmma_copy"),
    _wmma("tc_wmma_fill", "wmma_fill_fragment", "tc_emu_tc_wmma_fill"),
    _wmma("tc_wmma_mma", "wmma_mma_sync", "tc_emu_tc_wmma_mma"),
    AsyncIntrinsic("tc_cp_async", AsyncRole.COPY, _is_async_copy, copy=_copy_regions),
    AsyncIntrinsic(
        "tc_cp_async_commit",
        AsyncRole.COMMIT,
        lambda s: _call(s, "ptx_cp_async_commit") is not None,
    ),
    AsyncIntrinsic(
        "tc_cp_async_wait",
        AsyncRole.WAIT,
        lambda s: _call(s, "ptx_cp_async_wait") is not None,
        in_flight=_in_flight,
    ),
)
"""The tensor-core registrations (all made at import)."""

for _scope in WMMA_SCOPES:
    register_fragment_scope(_scope, WMMA_LANE_ELEMENTS)
for _entry in INTRINSICS:
    register_intrinsic(_entry)

"""Reference semantics of the tensor-core hardware intrinsics, in C, over a warp's 32 lanes.

A truthful GPU emulator runs each thread of a block with its own registers; a warp-collective
intrinsic (``ldmatrix``, ``mma.sync``, WMMA) takes the operands of all 32 lanes of a warp at
once, and ``cp.async`` completes at a later ``cp.async.wait_group``. This module is the
extension point for such an emulator: :data:`WARP_INTRINSICS` maps each hardware device
intrinsic of lowered IR (:data:`tilecraft.ir.device_intrin.HARDWARE_OPS`) to a C function of
:data:`TENSOR_CORE_EMULATION_C` and says how its IR operands map onto the C arguments.

Operand conventions (``lane`` is ``threadIdx.x % 32`` of a warp whose ``threadIdx.x`` rows
are 32 wide; the 16-bit floats travel as their ``uint16_t`` bit patterns):

- ``ptx_ldmatrix_x{1,2,4}(trans, first, last, d0, ...)``: lane ``l`` gives the offset of
  ``first`` in the shared buffer (``offs[l]``; ``last`` only delimits the 8 elements it
  names); lane ``l`` receives ``2 * num`` elements in ``dst[l]``, written back to its ``d``
  operands in order. Only lanes ``0 .. 8 num - 1`` address rows (lane ``8 j + r`` gives row
  ``r`` of matrix ``j``).
- ``ptx_ldmatrix_b8_x{2,4}(first, last, d0, ...)``: ``ldmatrix`` on int8 rows (16 per row);
  lane ``l`` receives ``4 * num`` int8.
- ``ptx_mma_m16n8k32(c0..c3, a0..a15, b0..b7)``: int8 products summed exactly in int32.
- ``ptx_mma_m16n8k16(c0..c3, a0..a7, b0..b3)``: lane ``l``'s operands in ``c[l]``
  (read and written), ``a[l]``, ``b[l]``; fragment layouts in
  :mod:`tilecraft.lower.warp_layouts`. Products of the 16-bit inputs are exact in ``float``;
  sums are taken in ``float`` in increasing ``k`` starting from ``c`` (the hardware's
  summation order and internal precision are unspecified: compare with a tolerance).
- ``wmma_*``: a WMMA fragment's distribution over lanes is unspecified, so an emulator keeps
  one 16x16 tile per fragment per *warp*; the C functions work on such tiles
  (``ldm`` is the leading dimension in elements, derived from the IR operands as in CUDA
  codegen: ``next_row - first``).
- ``cp.async`` (a loop annotated ``tc.async_copy``) / ``ptx_cp_async_commit`` /
  ``ptx_cp_async_wait(n)``: per thread, copies join the open group; a commit closes it; a wait
  performs every copy of all committed groups but the ``n`` newest (the bytes are read at that
  moment, one legal behaviour: the source must not change before the wait, and the
  destination must not be read before it — a race checker should flag both).
"""

from __future__ import annotations

from dataclasses import dataclass

TENSOR_CORE_EMULATION_C = r"""
#include <stdint.h>
#include <string.h>

/* 16-bit floats: fp16 <-> float (round to nearest even), bf16 -> float */
static float tc_emu_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: normalize */
    int e = -1;
    do { man <<= 1; ++e; } while (!(man & 0x400));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static float tc_emu_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t tc_emu_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to infinity */
  if (ax < 0x38800000u) {                                    /* subnormal or zero */
    float a, scaled;
    memcpy(&a, &ax, sizeof a);
    scaled = a * 16777216.0f; /* exact: a power of two */
    uint32_t i = (uint32_t)scaled;
    float frac = scaled - (float)i;
    if (frac > 0.5f || (frac == 0.5f && (i & 1u))) i += 1u;
    return (uint16_t)(sign | i);
  }
  uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13), rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1u; /* round to nearest even */
  return (uint16_t)(sign | h);
}

static float tc_emu_to_f32(int kind, uint16_t h) {
  return kind ? tc_emu_bf16_to_f32(h) : tc_emu_f16_to_f32(h);
}

/* ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16: lane 8j+r gives (as offs[8j+r] into
   base) the address of row r of matrix j; register j of lane l gets row l/4, columns 2(l%4)
   and +1 of matrix j (with trans: column l/4, rows 2(l%4) and +1). */
void tc_emu_ldmatrix(int num, int trans, const uint16_t *base, const int64_t offs[32],
                     uint16_t dst[32][8]) {
  for (int l = 0; l < 32; ++l) {
    for (int j = 0; j < num; ++j) {
      for (int h = 0; h < 2; ++h) {
        int row = trans ? 2 * (l % 4) + h : l / 4;
        int col = trans ? l / 4 : 2 * (l % 4) + h;
        dst[l][2 * j + h] = base[offs[8 * j + row] + col];
      }
    }
  }
}

/* mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}.{f16|bf16}.f32 (kind 0: f16, 1: bf16):
   D = A B + C with the m16n8k16 fragment layouts; c is read and written. */
void tc_emu_mma_m16n8k16(int kind, const uint16_t a[32][8], const uint16_t b[32][4],
                         float c[32][4]) {
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    for (int e = 0; e < 8; ++e)
      A[g + 8 * ((e / 2) % 2)][2 * t + e % 2 + 8 * (e / 4)] = tc_emu_to_f32(kind, a[l][e]);
    for (int e = 0; e < 4; ++e) {
      B[2 * t + e % 2 + 8 * (e / 2)][g] = tc_emu_to_f32(kind, b[l][e]);
      C[g + 8 * (e / 2)][2 * t + e % 2] = c[l][e];
    }
  }
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    for (int e = 0; e < 4; ++e) {
      int i = g + 8 * (e / 2), j = 2 * t + e % 2;
      float acc = C[i][j];
      for (int k = 0; k < 16; ++k) acc += A[i][k] * B[k][j];
      c[l][e] = acc;
    }
  }
}

/* mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16: fp16 A, B and accumulator; each lane's
   sums are formed in fp32 and rounded to fp16 once per instruction. */
void tc_emu_mma_m16n8k16_f16(const uint16_t a[32][8], const uint16_t b[32][4],
                             uint16_t c[32][4]) {
  float acc[32][4];
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 4; ++e) acc[l][e] = tc_emu_f16_to_f32(c[l][e]);
  tc_emu_mma_m16n8k16(0, a, b, acc);
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 4; ++e) c[l][e] = tc_emu_f32_to_f16(acc[l][e]);
}

/* ldmatrix.sync.aligned.m8n8.x{num}.shared.b16 on int8 data: lane 8j+r gives (rows[8j+r])
   row r of matrix j, 16 int8; register j of lane l gets row l/4, bytes 4(l%4) .. +3. */
void tc_emu_ldmatrix_b8(int num, const int8_t *const rows[32], int8_t dst[32][16]) {
  for (int l = 0; l < 32; ++l)
    for (int j = 0; j < num; ++j)
      for (int h = 0; h < 4; ++h) dst[l][4 * j + h] = rows[8 * j + l / 4][4 * (l % 4) + h];
}

/* mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32: D = A B + C with the m16n8k32 fragment
   layouts, exact in int32 (wrapping as the hardware's .s32 does not saturate). */
void tc_emu_mma_m16n8k32_s8(const int8_t a[32][16], const int8_t b[32][8], int32_t c[32][4]) {
  int32_t A[16][32], B[32][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    for (int e = 0; e < 16; ++e) A[g + 8 * ((e / 4) % 2)][4 * t + e % 4 + 16 * (e / 8)] = a[l][e];
    for (int e = 0; e < 8; ++e) B[4 * t + e % 4 + 16 * (e / 4)][g] = b[l][e];
    for (int e = 0; e < 4; ++e) C[g + 8 * (e / 2)][2 * t + e % 2] = c[l][e];
  }
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    for (int e = 0; e < 4; ++e) {
      int i = g + 8 * (e / 2), j = 2 * t + e % 2;
      uint32_t acc = (uint32_t)C[i][j];
      for (int k = 0; k < 32; ++k) acc += (uint32_t)(A[i][k] * B[k][j]);
      c[l][e] = (int32_t)acc;
    }
  }
}

/* WMMA 16x16x16, one tile per fragment per warp. Operands are row major. */
void tc_emu_wmma_load_f16(float tile[16][16], const uint16_t *ptr, int64_t ldm) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) tile[i][j] = tc_emu_f16_to_f32(ptr[i * ldm + j]);
}

void tc_emu_wmma_fill(float tile[16][16], float value) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) tile[i][j] = value;
}

void tc_emu_wmma_mma(float d[16][16], const float a[16][16], const float b[16][16],
                     const float c[16][16]) {
  float out[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float acc = c[i][j];
      for (int k = 0; k < 16; ++k) acc += a[i][k] * b[k][j];
      out[i][j] = acc;
    }
  memcpy(d, out, sizeof out);
}

/* int8 WMMA (sm_72+): int8 operands, int32 accumulator (wrapping, as mma.sync's). */
void tc_emu_wmma_mma_s8(int32_t d[16][16], const int8_t a[16][16], const int8_t b[16][16],
                        const int32_t c[16][16]) {
  int32_t out[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      uint32_t acc = (uint32_t)c[i][j];
      for (int k = 0; k < 16; ++k) acc += (uint32_t)((int32_t)a[i][k] * (int32_t)b[k][j]);
      out[i][j] = (int32_t)acc;
    }
  memcpy(d, out, sizeof out);
}

void tc_emu_wmma_store_f32(float *ptr, int64_t ldm, const float tile[16][16]) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) ptr[i * ldm + j] = tile[i][j];
}

/* cp.async: one queue per thread. */
#define TC_EMU_MAX_ASYNC 256
typedef struct {
  void *dst[TC_EMU_MAX_ASYNC];
  const void *src[TC_EMU_MAX_ASYNC];
  int bytes[TC_EMU_MAX_ASYNC];
  int group[TC_EMU_MAX_ASYNC]; /* -1: open (not committed) */
  int count;
  int committed;
} tc_emu_async_state;

int tc_emu_cp_async(tc_emu_async_state *s, void *dst, const void *src, int bytes) {
  if (s->count == TC_EMU_MAX_ASYNC) return -1;
  s->dst[s->count] = dst;
  s->src[s->count] = src;
  s->bytes[s->count] = bytes;
  s->group[s->count] = -1;
  s->count += 1;
  return 0;
}

void tc_emu_cp_async_commit(tc_emu_async_state *s) {
  for (int i = 0; i < s->count; ++i)
    if (s->group[i] < 0) s->group[i] = s->committed;
  s->committed += 1;
}

void tc_emu_cp_async_wait(tc_emu_async_state *s, int n) {
  int keep = 0;
  for (int i = 0; i < s->count; ++i) {
    int done = s->group[i] >= 0 && s->group[i] < s->committed - n;
    if (done) {
      memcpy(s->dst[i], s->src[i], (size_t)s->bytes[i]);
    } else {
      s->dst[keep] = s->dst[i];
      s->src[keep] = s->src[i];
      s->bytes[keep] = s->bytes[i];
      s->group[keep] = s->group[i];
      keep += 1;
    }
  }
  s->count = keep;
}
"""
"""C reference implementations (compile with any C11 compiler; no dependencies)."""


@dataclass(frozen=True)
class WarpIntrinsic:
    """How an IR hardware intrinsic maps onto its C reference.

    Attributes
    ----------
    op
        The IR device intrinsic (``ptx_mma_m16n8k16``).
    c_function
        The C function of :data:`TENSOR_CORE_EMULATION_C`.
    collective
        Executed by the 32 lanes of a warp together (else per thread).
    operands
        How the IR arguments become C arguments, in words.
    """

    op: str
    c_function: str
    collective: bool
    operands: str


WARP_INTRINSICS: dict[str, WarpIntrinsic] = {
    w.op: w
    for w in (
        *(
            WarpIntrinsic(
                f"ptx_ldmatrix_x{n}",
                "tc_emu_ldmatrix",
                True,
                f"num={n}, trans=arg0; base/offs[lane] from arg1 (shared buffer, element "
                f"offset); dst[lane][0:{2 * n}] written back to args 3..",
            )
            for n in (1, 2, 4)
        ),
        WarpIntrinsic(
            "ptx_mma_m16n8k16",
            "tc_emu_mma_m16n8k16",
            True,
            "kind=0 for float16, 1 for bfloat16 (dtype of arg4); c[lane] = args 0..3 "
            "(read and written back), a[lane] = args 4..11, b[lane] = args 12..15; fp16 "
            "accumulators (args 0..3 float16): tc_emu_mma_m16n8k16_f16",
        ),
        *(
            WarpIntrinsic(
                f"ptx_ldmatrix_b8_x{n}",
                "tc_emu_ldmatrix_b8",
                True,
                f"num={n}; rows[lane] = address of arg0 (16 int8); dst[lane][0:{4 * n}] "
                "written back to args 2..",
            )
            for n in (2, 4)
        ),
        WarpIntrinsic(
            "ptx_mma_m16n8k32",
            "tc_emu_mma_m16n8k32_s8",
            True,
            "c[lane] = args 0..3 (int32, read and written back), a[lane] = args 4..19, "
            "b[lane] = args 20..27 (int8)",
        ),
        WarpIntrinsic(
            "wmma_load_sync",
            "tc_emu_wmma_load_f16",
            True,
            "tile of fragment arg0 (per warp); ptr = address of arg1; ldm = arg3 - arg1",
        ),
        WarpIntrinsic("wmma_fill_fragment", "tc_emu_wmma_fill", True, "tile of arg0, arg1"),
        WarpIntrinsic("wmma_mma_sync", "tc_emu_wmma_mma", True, "tiles of args 0, 1, 2, 3"),
        WarpIntrinsic(
            "wmma_mma_sync (int8)",
            "tc_emu_wmma_mma_s8",
            True,
            "tiles of args 0, 1, 2, 3: int32 d, int8 a and b, int32 c",
        ),
        WarpIntrinsic(
            "wmma_store_sync",
            "tc_emu_wmma_store_f32",
            True,
            "ptr = address of arg0; ldm = arg2 - arg0; tile of fragment arg3",
        ),
        WarpIntrinsic(
            "cp_async",
            "tc_emu_cp_async",
            False,
            "each iteration group of a loop annotated tc.async_copy: dst = address of the "
            "stored element at lane 0 of the vector, src = address of the loaded one, 16 bytes",
        ),
        WarpIntrinsic("ptx_cp_async_commit", "tc_emu_cp_async_commit", False, "no operands"),
        WarpIntrinsic("ptx_cp_async_wait", "tc_emu_cp_async_wait", False, "n = arg0"),
    )
}
"""The extension point: IR intrinsic -> C reference (see the module docstring)."""

"""C helper functions the C emitter adds to a translation unit when the code uses them."""

from __future__ import annotations

F16 = r"""static inline float tc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t ex = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (ex == 0x1Fu) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (ex != 0u) {
    bits = sign | ((ex + 112u) << 23) | (mant << 13);
  } else {
    float sub = (float)mant * 5.9604644775390625e-8f;  /* mant * 2^-24 */
    return sign ? -sub : sub;
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t tc_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);        /* NaN */
  if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);       /* rounds to infinity */
  if (ax < 0x38800000u) {                                         /* subnormal or zero */
    float a;
    memcpy(&a, &ax, sizeof a);
    return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
  }
  uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7FFFFFu) >> 13);
  uint32_t rest = ax & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1u;  /* round to nearest even */
  return (uint16_t)(sign | h);
}

static inline float tc_round_f16(float f) { return tc_f16_to_f32(tc_f32_to_f16(f)); }
"""

BF16 = r"""static inline float tc_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t tc_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);  /* NaN */
  x += 0x7FFFu + ((x >> 16) & 1u);                                            /* nearest even */
  return (uint16_t)(x >> 16);
}

static inline float tc_round_bf16(float f) { return tc_bf16_to_f32(tc_f32_to_bf16(f)); }
"""

ALLOC = r"""/* Heap temporaries come from a small pool of this library's freed blocks: a
   kernel called again gets the same memory back instead of new pages from the system (glibc
   returns the top of its heap once several megabytes are free, and every call faulted them in
   again). At most TC_POOL_SLOTS blocks and TC_POOL_MAX bytes are kept; a block is reused for
   a request of at least half its size; tc_release is told the size tc_alloc was asked for. */
#define TC_POOL_SLOTS 8
#define TC_POOL_MAX ((size_t)256 << 20)
static unsigned char* tc_pool_block[TC_POOL_SLOTS];
static size_t tc_pool_size[TC_POOL_SLOTS];
static size_t tc_pool_total;
static int tc_pool_lock;

static void tc_pool_enter(void) {
  while (__atomic_exchange_n(&tc_pool_lock, 1, __ATOMIC_ACQUIRE))
    while (__atomic_load_n(&tc_pool_lock, __ATOMIC_RELAXED)) {}
}

static void tc_pool_leave(void) { __atomic_store_n(&tc_pool_lock, 0, __ATOMIC_RELEASE); }

/* The smallest pooled block of at least `size` bytes and at most twice that, taken out. */
static unsigned char* tc_pool_take(size_t* size) {
  int best = -1;
  tc_pool_enter();
  for (int i = 0; i < TC_POOL_SLOTS; ++i)
    if (tc_pool_block[i] && tc_pool_size[i] >= *size && tc_pool_size[i] / 2u <= *size &&
        (best < 0 || tc_pool_size[i] < tc_pool_size[best]))
      best = i;
  unsigned char* p = NULL;
  if (best >= 0) {
    p = tc_pool_block[best];
    *size = tc_pool_size[best];
    tc_pool_block[best] = NULL;
    tc_pool_total -= *size;
  }
  tc_pool_leave();
  return p;
}

/* Out of line and marked like malloc: the compiler keeps knowing that the block aliases
   nothing and is 64-byte aligned, as it knew of aligned_alloc's (without that, a GEMM packing
   its weight into such a block ran 30% slower). */
__attribute__((malloc, assume_aligned(64), noinline)) static void* tc_alloc(size_t bytes) {
  size_t size = (bytes + 63u) / 64u * 64u;
  if (size == 0) size = 64u;
  unsigned char* p = tc_pool_take(&size);
  if (p == NULL) p = (unsigned char*)aligned_alloc(64, size);
  if (p == NULL) {
    fprintf(stderr, "tilecraft: out of memory allocating %zu bytes\n", bytes);
    abort();
  }
  return p;
}

/* Give a tc_alloc block back: into a free slot, or in place of a smaller pooled block, while
   the pool stays under TC_POOL_MAX; otherwise (or for what it displaced) to the system. */
__attribute__((noinline)) static void tc_release(void* q, size_t bytes) {
  unsigned char* p = (unsigned char*)q;
  size_t size = (bytes + 63u) / 64u * 64u;
  if (size == 0) size = 64u;
  tc_pool_enter();
  int slot = 0;  /* a free slot, else the one holding the smallest block */
  for (int i = 0; i < TC_POOL_SLOTS; ++i) {
    if (!tc_pool_block[i]) {
      slot = i;
      break;
    }
    if (tc_pool_size[i] < tc_pool_size[slot]) slot = i;
  }
  unsigned char* out = p;
  if (!tc_pool_block[slot] || tc_pool_size[slot] < size) {
    size_t gone = tc_pool_block[slot] ? tc_pool_size[slot] : 0u;
    if (tc_pool_total - gone + size <= TC_POOL_MAX) {
      out = tc_pool_block[slot];
      tc_pool_block[slot] = p;
      tc_pool_size[slot] = size;
      tc_pool_total = tc_pool_total - gone + size;
    }
  }
  tc_pool_leave();
  free(out);
}

__attribute__((destructor)) static void tc_pool_drain(void) {
  for (int i = 0; i < TC_POOL_SLOTS; ++i) {
    free(tc_pool_block[i]);
    tc_pool_block[i] = NULL;
  }
  tc_pool_total = 0;
}
"""


LIBMVEC_OLD = frozenset({"exp", "log", "sin", "cos", "pow"})
"""libm functions with vector variants in glibc's libmvec since 2.22."""
LIBMVEC_NEW = frozenset({"tanh", "expm1", "log1p", "log2", "exp2", "erf", "log10", "atan",
                         "asin", "acos", "sinh", "cosh", "tan", "atan2", "hypot"})  # fmt: skip
"""libm functions with vector variants in glibc's libmvec since 2.35."""


def simd_math(used: list[tuple[str, str, int]]) -> str:
    """Declarations of the vector variants (glibc's libmvec) of the libm functions ``used``.

    ``used`` holds ``(c_name, c_type, arity)``, e.g. ``("expf", "float", 1)``. glibc declares
    these only under ``-ffast-math``; redeclaring them with the ``simd`` attribute lets loops
    that call them vectorize. The build defines ``TC_LIBMVEC`` when it links libmvec.
    """
    old, new = [], []
    for name, ctype, arity in used:
        base = name[:-1] if ctype == "float" else name
        decl = f"TC_SIMD {ctype} {name}({', '.join([ctype] * arity)});"
        if base in LIBMVEC_OLD:
            old.append(decl)
        elif base in LIBMVEC_NEW:
            new.append(decl)
    if not old and not new:
        return ""
    lines = [
        "#if defined(TC_LIBMVEC) && defined(__x86_64__) && defined(__GLIBC__) && defined(_OPENMP)",
        '#define TC_SIMD __attribute__((simd("notinbranch")))',
        *old,
    ]
    if new:
        lines += ["#if __GLIBC_PREREQ(2, 35)", *new, "#endif"]
    lines += ["#undef TC_SIMD", "#endif"]
    return "\n".join(lines) + "\n"


def floordiv(ctype: str, suffix: str) -> str:
    """Integer division helpers with numpy's results and no trap, for a C integer type.

    ``tc_floordiv``/``tc_floormod`` round toward negative infinity; ``tc_div`` truncates (C).
    Like numpy, ``x // 0``, ``x % 0`` and ``x / 0`` give 0, and ``MIN // -1`` wraps to ``MIN``
    (with its remainder 0): the hardware traps (SIGFPE) on both, so they never reach ``/``.
    """
    if ctype.startswith("uint"):
        return (
            f"static inline {ctype} tc_floordiv_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  return b == 0 ? 0 : a / b;\n"
            f"}}\n\n"
            f"static inline {ctype} tc_floormod_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  return b == 0 ? 0 : a % b;\n"
            f"}}\n\n"
            f"static inline {ctype} tc_div_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  return b == 0 ? 0 : a / b;\n"
            f"}}\n"
        )
    neg = f"({ctype})(0u - (u{ctype})a)"  # -a with wrap-around: MIN stays MIN
    return (
        f"static inline {ctype} tc_floordiv_{suffix}({ctype} a, {ctype} b) {{\n"
        f"  if (b == 0) return 0;\n"
        f"  if (b == -1) return {neg};\n"
        f"  {ctype} q = a / b, r = a % b;\n"
        f"  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;\n"
        f"}}\n\n"
        f"static inline {ctype} tc_floormod_{suffix}({ctype} a, {ctype} b) {{\n"
        f"  if (b == 0 || b == -1) return 0;\n"
        f"  {ctype} r = a % b;\n"
        f"  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
        f"}}\n\n"
        f"static inline {ctype} tc_div_{suffix}({ctype} a, {ctype} b) {{\n"
        f"  if (b == 0) return 0;\n"
        f"  if (b == -1) return {neg};\n"
        f"  return a / b;\n"
        f"}}\n"
    )


def minmax(ctype: str, suffix: str) -> str:
    """``min``/``max`` evaluating each operand once.

    For floats NaN propagates, as numpy's ``minimum``/``maximum`` (C's ``fminf``/``fmaxf``
    drop it). The form keeps the common path fast: ``b > a ? b : a`` is one ``maxps`` that
    already returns ``a`` when ``a`` is NaN, and only ``b`` is tested for NaN, so in a
    reduction ``tc_max(acc, x)`` the NaN test is off the accumulator's dependency chain.
    """
    if ctype in ("float", "double"):
        return (
            f"static inline {ctype} tc_min_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  {ctype} m = b < a ? b : a;\n"
            f"  return b != b ? b : m;\n"
            f"}}\n"
            f"static inline {ctype} tc_max_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  {ctype} m = b > a ? b : a;\n"
            f"  return b != b ? b : m;\n"
            f"}}\n"
        )
    return (
        f"static inline {ctype} tc_min_{suffix}({ctype} a, {ctype} b) {{ return a < b ? a : b; }}\n"
        f"static inline {ctype} tc_max_{suffix}({ctype} a, {ctype} b) {{ return a > b ? a : b; }}\n"
    )


BOUNDS_MAX_NDIM = 8
"""Index values a bounds violation record keeps (the first dimensions of the access)."""

BOUNDS = f"""#define TC_BOUNDS_MAX_NDIM {BOUNDS_MAX_NDIM}
typedef struct {{
  int64_t count;     /* out-of-range accesses since the runtime last cleared the record */
  const char* func;  /* symbol of the function of the first one */
  int32_t site;      /* its site number (the function's tc.bounds_sites attribute) */
  int32_t ndim;
  int32_t dim;       /* the first dimension out of range */
  int32_t pad;
  int64_t index[TC_BOUNDS_MAX_NDIM];
  int64_t extent[TC_BOUNDS_MAX_NDIM];
}} tc_bounds_record;

TC_EXPORT tc_bounds_record tc_bounds_error;

/* Record an out-of-range access (the first one keeps its details) and yield 0; the access
   itself is skipped, so nothing outside a buffer is read or written. */
__attribute__((cold, noinline)) static int tc_bounds_fail(
    const char* func, int32_t site, int32_t ndim, const int64_t* index, const int64_t* extent) {{
  if (__atomic_fetch_add(&tc_bounds_error.count, 1, __ATOMIC_RELAXED) != 0) return 0;
  int32_t dim = 0;
  for (int32_t d = ndim - 1; d >= 0; --d) {{
    if (index[d] < 0 || index[d] >= extent[d]) dim = d;
  }}
  tc_bounds_error.func = func;
  tc_bounds_error.site = site;
  tc_bounds_error.ndim = ndim;
  tc_bounds_error.dim = dim;
  for (int32_t d = 0; d < ndim && d < TC_BOUNDS_MAX_NDIM; ++d) {{
    tc_bounds_error.index[d] = index[d];
    tc_bounds_error.extent[d] = extent[d];
  }}
  return 0;
}}
"""
"""The violation record (exported, read by :mod:`tilecraft.runtime.bounds`) and the reporter
bounds-checked code calls (see :class:`tilecraft.lower.bounds_check.InsertBoundsChecks`)."""

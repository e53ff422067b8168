"""The C runtime of the GPU emulator: thread fibers, barriers, warp collectives, race shadows.

:mod:`.source` emits every kernel of a lowered GPU program as a C *thread body* — the
kernel's statements as one CUDA thread executes them — and calls :data:`RUNTIME`'s
``tc_emu_launch`` for each launch. The runtime runs the blocks of the grid one after another;
inside a block:

* A kernel without barriers or warp collectives runs its threads one after another to the
  end (the fast path: no thread can observe another's progress except through races, which
  the race checker reports whatever the order).
* Otherwise every thread is a *fiber* with its own stack (so its ``local`` arrays and scalars
  are its own): the scheduler resumes each runnable thread in turn until it reaches a barrier
  (``__syncthreads``), a warp collective or its end. When every thread waits at the same
  barrier, the barrier phase advances and all resume. A warp collective runs its C
  implementation once every lane its mask names has arrived (the last lane to arrive runs it
  over all lanes' operands; see :mod:`.intrinsics`). Each collective statement is its
  own site: a lane that reaches another one while its warp's collective is open, or one
  outside the mask, is reported and never resumed (its operands are never mixed with the
  warp's). Threads that can no longer all meet (one exited, or waits elsewhere) are reported,
  not waited for; the block then stops and its suspended fibers are dropped with their stacks.

Fibers switch with a few instructions of assembly on x86-64 ELF systems and with
``swapcontext`` elsewhere (or when ``TC_EMU_UCONTEXT`` is defined); on the GEMM of the tests
the assembly switch made barrier-heavy kernels several times faster (see the module's tests).

Race checking (``tc.build(..., emulate="racecheck")``) keeps one shadow entry per byte of the
block's shared memory (used at each element's first byte): the phase and thread of the last
write, the phase and up to two threads of the reads, and the block generation that last
initialized it; ``local`` arrays get one "initialized" byte per element; global buffers get a
shadow per element for each launch (:mod:`._global`: conflicts between threads of one launch
that no barrier of their block orders). An access that
conflicts (another thread of the block, same phase, one of them a write), reads memory nothing
initialized, or falls outside its buffer is recorded in the exported ``tc_emu_error`` (the first
one with its details, all counted) and the launch stops after the current block; the runtime
(:mod:`tilecraft.runtime.emulate`) raises the error after the call. Out-of-range accesses are
skipped, so the process survives. Shared memory, ``local`` arrays and global temporaries start
filled with ``0xff`` bytes (NaN for floats) in every mode, so reading what nothing wrote shows.
"""

from __future__ import annotations

from ._fibers import ASYNC, FIBERS
from ._global import GLOBAL_SHADOW

WARP_SIZE = 32
"""Lanes per warp."""
MAX_THREADS = 1024
"""Threads per block the runtime accepts (CUDA's limit)."""
STACK_BASE_BYTES = 64 * 1024
"""Stack of a fiber beyond its ``local`` arrays (scalars, spills, libm calls)."""

ERROR_KINDS = {1: "conflict", 2: "uninitialized", 3: "out of bounds", 4: "barrier",
               5: "collective", 6: "launch"}  # fmt: skip
"""``tc_emu_record.kind`` codes."""
FLAG_WRITE, FLAG_OTHER_WRITE, FLAG_SAME, FLAG_ASYNC = 1, 2, 4, 8
"""``tc_emu_record.flags`` bits: this access writes; the earlier one wrote; same value; the
element is the destination of an asynchronous copy still in flight (its issuer: ``other``)."""

_TYPES = r"""
#define TC_EMU_WARP 32
#define TC_EMU_MAX_THREADS 1024
#if !(defined(__x86_64__) && defined(__ELF__)) && !defined(TC_EMU_UCONTEXT)
#define TC_EMU_UCONTEXT 1
#endif
#ifdef TC_EMU_UCONTEXT
#include <ucontext.h>
#else
#include <sys/mman.h>
#include <unistd.h>
#endif

enum { TC_EMU_RUNNABLE, TC_EMU_AT_BARRIER, TC_EMU_AT_COLLECTIVE, TC_EMU_DONE };
enum { TC_EMU_CONFLICT = 1, TC_EMU_UNINIT, TC_EMU_OOB, TC_EMU_BARRIER, TC_EMU_COLLECTIVE,
       TC_EMU_LAUNCH };
enum { TC_EMU_F_WRITE = 1, TC_EMU_F_OTHER_WRITE = 2, TC_EMU_F_SAME = 4, TC_EMU_F_ASYNC = 8 };
/* shadow gen of an element a cp.async of this block will write (issued, not yet waited for) */
#define TC_EMU_PENDING 0x80000000u

typedef struct {
  int64_t count;       /* faults since the runtime last cleared the record */
  const char* kernel;  /* the first fault: its kernel, */
  const char* detail;  /* a reason (barrier and collective faults), */
  int32_t kind, site, other_site, flags;  /* access or barrier site, the other's site, */
  int32_t thread, other;                  /* linear thread indices (-1: none), */
  int32_t block[3], dim[3];               /* blockIdx and blockDim, */
  int32_t other_block[3], pad;            /* the other thread's blockIdx, */
  int64_t phase, index, extent;           /* barrier phase, element index, buffer extent */
} tc_emu_record;

TC_EXPORT tc_emu_record tc_emu_error;

typedef struct {
  uint32_t w_epoch, r_epoch, gen;  /* phase of the last write / reads; block that wrote it */
  int16_t writer, r1, r2, pad;     /* last writer; first two distinct readers (-1: none) */
} tc_emu_shadow;

typedef struct tc_emu_async {
  unsigned char* dst;
  const unsigned char* src;
  int64_t bytes, index;  /* bytes; element index of dst in its buffer */
  tc_emu_shadow* shadow;
  int32_t itemsize, site, group, pad;
} tc_emu_async;

struct tc_emu_block;
typedef struct tc_emu_thread {
  void* sp;
  struct tc_emu_block* blk;
  int32_t tid[3];
  int32_t linear, state, site, groups;
  tc_emu_async* async;
  int32_t n_async, cap_async;
#ifdef TC_EMU_UCONTEXT
  ucontext_t uc;
#endif
} tc_emu_thread;

typedef void (*tc_emu_body)(tc_emu_thread*, const void*);

typedef struct {
  const char* name;
  tc_emu_body body;
  int64_t static_smem, stack_bytes;
  int32_t fibers, racecheck;
} tc_emu_kernel;

typedef struct tc_emu_warp_call {
  uint32_t present, arrived, mask;  /* lanes that exist / executed the call / the mask */
  int32_t warp, nops;
  const int32_t* sizes;             /* bytes of each operand */
  const int64_t* imm;               /* immediates of the statement */
  void* const* ops[TC_EMU_WARP];    /* ops[lane][k]: the lane's k-th operand (NULL: absent) */
  struct tc_emu_block* blk;
} tc_emu_warp_call;
typedef void (*tc_emu_collective_fn)(tc_emu_warp_call*);

typedef struct {
  int32_t count, site, nops;
  uint32_t arrived, mask;
  tc_emu_collective_fn fn;
  const int64_t* imm;
  const int32_t* sizes;
  void* const* ops[TC_EMU_WARP];
} tc_emu_warp;

typedef struct tc_emu_block {
  const tc_emu_kernel* k;
  const void* params;
  int32_t bid[3], dim[3];
  int32_t nthreads;
  uint32_t blin;    /* linear block index + 1 */
  int64_t grid[3];
  unsigned char* smem;
  tc_emu_shadow* shadow;
  uint32_t epoch, gen;
  int64_t phase;
  tc_emu_thread* threads;
  void* sched_sp;
#ifdef TC_EMU_UCONTEXT
  ucontext_t sched_uc;
#endif
  tc_emu_warp warps[TC_EMU_MAX_THREADS / TC_EMU_WARP];
} tc_emu_block;
"""

_REPORT = r"""
/* Record a fault (the first one keeps its details); thread -1: the launch itself. 1: it was
   the first. */
__attribute__((cold, noinline)) static int tc_emu_report(
    tc_emu_block* b, int32_t thread, int32_t kind, int32_t site, int64_t index, int64_t extent,
    int32_t other, int32_t other_site, int32_t flags, const char* detail) {
  if (__atomic_fetch_add(&tc_emu_error.count, 1, __ATOMIC_RELAXED) != 0) return 0;
  tc_emu_record* r = &tc_emu_error;
  r->kernel = b->k->name;
  r->detail = detail;
  r->kind = kind;
  r->site = site;
  r->other_site = other_site;
  r->flags = flags;
  r->thread = thread;
  r->other = other;
  for (int d = 0; d < 3; ++d) {
    r->block[d] = b->bid[d];
    r->other_block[d] = b->bid[d];
    r->dim[d] = b->dim[d];
  }
  r->phase = b->phase;
  r->index = index;
  r->extent = extent;
  return 1;
}

static inline int tc_emu_in(tc_emu_thread* t, int32_t site, int64_t i, int64_t n) {
  if (__builtin_expect(i >= 0 && i < n, 1)) return 1;
  tc_emu_report(t->blk, t->linear, TC_EMU_OOB, site, i, n, -1, -1, 0, 0);
  return 0;
}

static inline void tc_emu_shared_read(tc_emu_thread* t, tc_emu_shadow* e, int32_t site,
                                      int64_t i) {
  tc_emu_block* b = t->blk;
  int16_t me = (int16_t)t->linear;
  if (__builtin_expect(e->gen != b->gen, 0)) {
    int pending = e->gen == (b->gen | TC_EMU_PENDING);
    tc_emu_report(b, me, TC_EMU_UNINIT, site, i, 0, pending ? e->writer : -1, -1,
                  pending ? TC_EMU_F_ASYNC : 0, 0);
  } else if (__builtin_expect(e->w_epoch == b->epoch && e->writer != me, 0))
    tc_emu_report(b, me, TC_EMU_CONFLICT, site, i, 0, e->writer, -1, TC_EMU_F_OTHER_WRITE, 0);
  if (e->r_epoch != b->epoch) {
    e->r_epoch = b->epoch;
    e->r1 = me;
    e->r2 = -1;
  } else if (e->r1 != me && e->r2 < 0) {
    e->r2 = me;
  }
}

static inline void tc_emu_shared_write(tc_emu_thread* t, tc_emu_shadow* e, int32_t site,
                                       int64_t i, int same) {
  tc_emu_block* b = t->blk;
  int16_t me = (int16_t)t->linear;
  if (__builtin_expect(e->gen == (b->gen | TC_EMU_PENDING), 0)) {
    int32_t flags = TC_EMU_F_WRITE | TC_EMU_F_OTHER_WRITE | TC_EMU_F_ASYNC;
    tc_emu_report(b, me, TC_EMU_CONFLICT, site, i, 0, e->writer, -1, flags, 0);
  } else if (__builtin_expect(e->w_epoch == b->epoch && e->writer != me, 0)) {
    int32_t flags = TC_EMU_F_WRITE | TC_EMU_F_OTHER_WRITE | (same ? TC_EMU_F_SAME : 0);
    tc_emu_report(b, me, TC_EMU_CONFLICT, site, i, 0, e->writer, -1, flags, 0);
  } else if (__builtin_expect(e->r_epoch == b->epoch, 0)) {
    int16_t other = e->r1 != me ? e->r1 : e->r2;
    if (other >= 0) tc_emu_report(b, me, TC_EMU_CONFLICT, site, i, 0, other, -1, TC_EMU_F_WRITE, 0);
  }
  e->w_epoch = b->epoch;
  e->writer = me;
  e->gen = b->gen;
}

static inline void tc_emu_local_read(tc_emu_thread* t, const uint8_t* init, int32_t site,
                                     int64_t i) {
  if (__builtin_expect(!init[i], 0))
    tc_emu_report(t->blk, t->linear, TC_EMU_UNINIT, site, i, 0, -1, -1, 0, 0);
}
"""

_SYNC = r"""
static void tc_emu_barrier(tc_emu_thread* t, int32_t site) {
  t->site = site;
  t->state = TC_EMU_AT_BARRIER;
  tc_emu_yield(t);
}

static uint32_t tc_emu_present(const tc_emu_block* b, int32_t warp) {
  int32_t lanes = b->nthreads - warp * TC_EMU_WARP;
  return lanes >= TC_EMU_WARP ? 0xffffffffu : (1u << lanes) - 1u;
}

/* Fault at a collective of lane `lane` of `c`'s warp (`other`: the lane it concerns). */
static void tc_emu_warp_fail(tc_emu_warp_call* c, int32_t lane, int32_t other, const char* why) {
  int32_t base = c->warp * TC_EMU_WARP;
  tc_emu_report(c->blk, base + lane, TC_EMU_COLLECTIVE, -1, 0, 0,
                other >= 0 ? base + other : -1, -1, 0, why);
}

/* A lane that cannot join its warp's collective: it never resumes (the block stops). */
static void tc_emu_park(tc_emu_thread* t, int32_t site) {
  t->site = site;
  t->state = TC_EMU_AT_COLLECTIVE;
  tc_emu_yield(t);
}

static void tc_emu_collective(tc_emu_thread* t, int32_t site, tc_emu_collective_fn fn,
                              uint32_t mask, const int64_t* imm, const int32_t* sizes,
                              int32_t nops, void* const* ops) {
  tc_emu_block* b = t->blk;
  int32_t w = t->linear / TC_EMU_WARP, lane = t->linear % TC_EMU_WARP;
  tc_emu_warp* wp = &b->warps[w];
  if (wp->count != 0 && wp->site != site) {  /* diverged: never mix two statements' operands */
    tc_emu_report(b, t->linear, TC_EMU_COLLECTIVE, site, 0, 0,
                  w * TC_EMU_WARP + __builtin_ctz(wp->arrived), wp->site, 0,
                  "lanes of one warp execute different warp collectives");
    tc_emu_park(t, site);
    return;
  }
  if (!((mask >> lane) & 1u)) {
    tc_emu_report(b, t->linear, TC_EMU_COLLECTIVE, site, 0, 0, -1, -1, 0,
                  "a lane outside the collective's mask executes it");
    tc_emu_park(t, site);
    return;
  }
  if (wp->count == 0) {
    wp->site = site;
    wp->fn = fn;
    wp->mask = mask;
    wp->imm = imm;
    wp->sizes = sizes;
    wp->nops = nops;
    wp->arrived = 0;
  }
  wp->ops[lane] = ops;
  wp->arrived |= 1u << lane;
  wp->count += 1;
  uint32_t need = mask & tc_emu_present(b, w);
  if ((wp->arrived & need) == need) {
    tc_emu_warp_call c;
    c.present = tc_emu_present(b, w);
    c.arrived = wp->arrived;
    c.mask = mask;
    c.warp = w;
    c.nops = nops;
    c.sizes = sizes;
    c.imm = imm;
    c.blk = b;
    for (int32_t l = 0; l < TC_EMU_WARP; ++l) c.ops[l] = ((c.arrived >> l) & 1u) ? wp->ops[l] : 0;
    wp->count = 0;
    wp->arrived = 0;
    fn(&c);
    for (int32_t l = 0; l < TC_EMU_WARP; ++l)
      if (((c.arrived >> l) & 1u) && l != lane)
        b->threads[w * TC_EMU_WARP + l].state = TC_EMU_RUNNABLE;
    return;
  }
  t->site = site;
  t->state = TC_EMU_AT_COLLECTIVE;
  tc_emu_yield(t);
}
"""

_SCHEDULER = r"""
/* After a pass over the threads: 1 to run another, 0 when all finished, -1 when stuck. */
static int tc_emu_next_phase(tc_emu_block* b) {
  int32_t n = b->nthreads, done = 0, barrier = 0, runnable = 0;
  for (int32_t i = 0; i < n; ++i) {
    int32_t s = b->threads[i].state;
    done += s == TC_EMU_DONE;
    barrier += s == TC_EMU_AT_BARRIER;
    runnable += s == TC_EMU_RUNNABLE;
  }
  if (done == n) return 0;
  if (runnable) return 1;
  tc_emu_thread* first = 0;
  for (int32_t i = 0; i < n && !first; ++i)
    if (b->threads[i].state != TC_EMU_DONE) first = &b->threads[i];
  for (int32_t i = 0; i < n; ++i) {
    tc_emu_thread* o = &b->threads[i];
    if (o->state == first->state && o->site == first->site) continue;
    const char* why = o->state == TC_EMU_DONE
        ? "a thread exited while others wait"
        : first->state == TC_EMU_AT_BARRIER && o->state == TC_EMU_AT_BARRIER
        ? "threads wait at different barriers"
        : "threads wait at different barriers or collectives";
    int32_t other_site = o->state == TC_EMU_DONE ? -1 : o->site;
    tc_emu_report(b, first->linear, first->state == TC_EMU_AT_BARRIER ? TC_EMU_BARRIER
                  : TC_EMU_COLLECTIVE, first->site, 0, 0, o->linear, other_site, 0, why);
    return -1;
  }
  if (barrier == n) {
    b->epoch += 1;
    b->phase += 1;
    for (int32_t i = 0; i < n; ++i) b->threads[i].state = TC_EMU_RUNNABLE;
    return 1;
  }
  tc_emu_report(b, first->linear, TC_EMU_COLLECTIVE, first->site, 0, 0, -1, -1, 0,
                "lanes the collective's mask names never execute it");
  return -1;
}

static void tc_emu_run_block(tc_emu_block* b, unsigned char* stacks) {
  const tc_emu_kernel* k = b->k;
  int32_t n = b->nthreads;
  for (int32_t i = 0; i < n; ++i) {
    tc_emu_thread* t = &b->threads[i];
    t->state = TC_EMU_RUNNABLE;
    t->groups = 0;
    t->n_async = 0;
  }
  memset(b->warps, 0, sizeof b->warps);
  if (!k->fibers) {
    for (int32_t i = 0; i < n; ++i) k->body(&b->threads[i], b->params);
    return;
  }
  for (int32_t i = 0; i < n; ++i)
    tc_emu_fiber_init(&b->threads[i], stacks + (int64_t)i * k->stack_bytes,
                      (size_t)k->stack_bytes);
  for (;;) {
    for (int32_t i = 0; i < n; ++i)
      if (b->threads[i].state == TC_EMU_RUNNABLE) tc_emu_resume(b, &b->threads[i]);
    if (tc_emu_next_phase(b) <= 0) return;
  }
}

static void* tc_emu_alloc(size_t bytes) {
  size_t size = (bytes + 63u) / 64u * 64u;
  void* p = aligned_alloc(64, size ? size : 64u);
  if (p) memset(p, 0xff, size ? size : 64u);
  return p;
}

static void tc_emu_launch(const tc_emu_kernel* k, const void* params, const int64_t grid[3],
                          const int64_t dim[3], int64_t dyn_smem) {
  tc_emu_block* b = (tc_emu_block*)calloc(1, sizeof(tc_emu_block));
  int64_t n = dim[0] * dim[1] * dim[2];
  if (!b || tc_emu_error.count || grid[0] <= 0 || grid[1] <= 0 || grid[2] <= 0 || n <= 0) {
    free(b);
    return;
  }
  b->k = k;
  for (int d = 0; d < 3; ++d) {
    b->dim[d] = (int32_t)dim[d];
    b->grid[d] = grid[d];
  }
  if (n > TC_EMU_MAX_THREADS) {
    tc_emu_report(b, -1, TC_EMU_LAUNCH, -1, n, TC_EMU_MAX_THREADS, -1, -1, 0,
                  "a block of more than 1024 threads");
    free(b);
    return;
  }
  size_t smem = (size_t)(k->static_smem + (dyn_smem > 0 ? dyn_smem : 0));
  b->params = params;
  b->nthreads = (int32_t)n;
  b->smem = (unsigned char*)tc_emu_alloc(smem);
  b->shadow = k->racecheck ? (tc_emu_shadow*)calloc(smem ? smem : 1, sizeof(tc_emu_shadow)) : 0;
  b->threads = (tc_emu_thread*)calloc((size_t)n, sizeof(tc_emu_thread));
  unsigned char* stacks = k->fibers ? tc_emu_stacks(n, k->stack_bytes) : 0;
  if (!b->smem || (k->racecheck && !b->shadow) || !b->threads || (k->fibers && !stacks)) {
    tc_emu_report(b, -1, TC_EMU_LAUNCH, -1, 0, 0, -1, -1, 0, "out of memory");
  }
  for (int32_t i = 0; b->threads && i < n; ++i) {
    tc_emu_thread* t = &b->threads[i];
    t->blk = b;
    t->linear = i;
    t->tid[0] = i % b->dim[0];
    t->tid[1] = (i / b->dim[0]) % b->dim[1];
    t->tid[2] = i / (b->dim[0] * b->dim[1]);
  }
  for (int64_t z = 0; z < grid[2]; ++z)
    for (int64_t y = 0; y < grid[1]; ++y)
      for (int64_t x = 0; x < grid[0] && !tc_emu_error.count; ++x) {
        b->bid[0] = (int32_t)x;
        b->bid[1] = (int32_t)y;
        b->bid[2] = (int32_t)z;
        b->blin = (uint32_t)(x + grid[0] * (y + grid[1] * z) + 1);
        b->gen += 1;
        b->epoch += 1;
        b->phase = 0;
        memset(b->smem, 0xff, smem);
        tc_emu_run_block(b, stacks);
        b->epoch += 1;
      }
  for (int32_t i = 0; b->threads && i < n; ++i) free(b->threads[i].async);
  tc_emu_free_stacks(stacks, n, k->stack_bytes);
  free(b->threads);
  free(b->shadow);
  free(b->smem);
  free(b);
}
"""

RUNTIME = "/* tilecraft GPU emulator runtime */" + _TYPES + _REPORT + GLOBAL_SHADOW + FIBERS
RUNTIME += _SYNC + ASYNC
RUNTIME += _SCHEDULER
"""All of the runtime, added once to an emulator unit (after the standard includes)."""

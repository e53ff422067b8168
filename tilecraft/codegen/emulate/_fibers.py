"""C text of the emulator runtime: fibers (x86-64 assembly or ucontext) and async copies.

Part of :data:`tilecraft.codegen.emulate.runtime.RUNTIME`; it uses that module's types.
"""

from __future__ import annotations

FIBERS = r"""
static _Thread_local tc_emu_thread* tc_emu_starting;  /* the fiber being entered */

static void tc_emu_fiber_main(void);
#ifndef TC_EMU_UCONTEXT
__asm__(
    ".text\n"
    ".globl tc_emu_switch\n"
    ".hidden tc_emu_switch\n"
    ".type tc_emu_switch, @function\n"
    ".p2align 4\n"
    "tc_emu_switch:\n" /* rdi: where to save this stack pointer; rsi: the stack to run */
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size tc_emu_switch, .-tc_emu_switch\n");
__attribute__((visibility("hidden"))) void tc_emu_switch(void** save, void* to);

static void tc_emu_fiber_init(tc_emu_thread* t, unsigned char* lo, size_t size) {
  uint64_t* p = (uint64_t*)(((uintptr_t)(lo + size)) & ~(uintptr_t)15);
  *--p = 0;                                      /* entry sees a call-aligned stack */
  *--p = (uint64_t)(uintptr_t)&tc_emu_fiber_main;  /* where the first switch returns to */
  for (int r = 0; r < 6; ++r) *--p = 0;           /* callee-saved registers */
  t->sp = p;
}
static inline void tc_emu_resume(tc_emu_block* b, tc_emu_thread* t) {
  tc_emu_starting = t;
  tc_emu_switch(&b->sched_sp, t->sp);
}
static inline void tc_emu_yield(tc_emu_thread* t) { tc_emu_switch(&t->sp, t->blk->sched_sp); }

static unsigned char* tc_emu_stacks(int64_t n, int64_t bytes) {
  size_t total = (size_t)n * (size_t)bytes;
  void* p = mmap(0, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return 0;
  long page = sysconf(_SC_PAGESIZE);
  for (int64_t i = 0; i < n; ++i)  /* a guard page under each stack: overflow faults */
    mprotect((unsigned char*)p + i * bytes, (size_t)page, PROT_NONE);
  return (unsigned char*)p;
}
static void tc_emu_free_stacks(unsigned char* p, int64_t n, int64_t bytes) {
  if (p) munmap(p, (size_t)n * (size_t)bytes);
}
#else
static void tc_emu_fiber_init(tc_emu_thread* t, unsigned char* lo, size_t size) {
  getcontext(&t->uc);
  t->uc.uc_stack.ss_sp = lo;
  t->uc.uc_stack.ss_size = size;
  t->uc.uc_link = 0;
  makecontext(&t->uc, tc_emu_fiber_main, 0);
}
static inline void tc_emu_resume(tc_emu_block* b, tc_emu_thread* t) {
  tc_emu_starting = t;
  swapcontext(&b->sched_uc, &t->uc);
}
static inline void tc_emu_yield(tc_emu_thread* t) { swapcontext(&t->uc, &t->blk->sched_uc); }
static unsigned char* tc_emu_stacks(int64_t n, int64_t bytes) {
  return (unsigned char*)malloc((size_t)n * (size_t)bytes);
}
static void tc_emu_free_stacks(unsigned char* p, int64_t n, int64_t bytes) {
  (void)n;
  (void)bytes;
  free(p);
}
#endif

static void tc_emu_fiber_main(void) {
  tc_emu_thread* t = tc_emu_starting;
  t->blk->k->body(t, t->blk->params);
  t->state = TC_EMU_DONE;
  tc_emu_yield(t);
  abort(); /* a finished fiber is never resumed */
}
"""

ASYNC = r"""
/* Asynchronous copies (cp.async): queued per thread, done at the wait that covers them. Under
   race checking (shadow != 0) the destination is in flight from the copy to the wait: the copy
   checks it as a store, then marks it pending, so any access before the wait is reported. */
static void tc_emu_async_copy(tc_emu_thread* t, void* dst, const void* src, int64_t bytes,
                              tc_emu_shadow* shadow, int32_t itemsize, int32_t site,
                              int64_t index) {
  if (t->n_async == t->cap_async) {
    int32_t cap = t->cap_async ? 2 * t->cap_async : 16;
    tc_emu_async* grown = (tc_emu_async*)realloc(t->async, (size_t)cap * sizeof(tc_emu_async));
    if (!grown) {
      tc_emu_report(t->blk, t->linear, TC_EMU_LAUNCH, site, 0, 0, -1, -1, 0, "out of memory");
      return;
    }
    t->async = grown;
    t->cap_async = cap;
  }
  tc_emu_async* a = &t->async[t->n_async++];
  a->dst = (unsigned char*)dst;
  a->src = (const unsigned char*)src;
  a->bytes = bytes;
  a->index = index;
  a->shadow = shadow;
  a->itemsize = itemsize;
  a->site = site;
  a->group = -1;
  if (shadow)
    for (int64_t off = 0; off < bytes; off += itemsize) {
      tc_emu_shared_write(t, shadow + off, site, index + off / itemsize, 0);
      shadow[off].gen = t->blk->gen | TC_EMU_PENDING;
    }
}
static void tc_emu_async_commit(tc_emu_thread* t) {
  t->groups += 1;
  for (int32_t i = 0; i < t->n_async; ++i)
    if (t->async[i].group < 0) t->async[i].group = t->groups;
}
static void tc_emu_async_wait(tc_emu_thread* t, int32_t in_flight) {
  int32_t limit = t->groups - in_flight, kept = 0;
  for (int32_t i = 0; i < t->n_async; ++i) {
    tc_emu_async a = t->async[i];
    if (a.group < 0 || a.group > limit) {
      t->async[kept++] = a;
      continue;
    }
    if (a.src)
      memcpy(a.dst, a.src, (size_t)a.bytes);
    else /* the zero-fill form */
      memset(a.dst, 0, (size_t)a.bytes);
    if (a.shadow)
      for (int64_t off = 0; off < a.bytes; off += a.itemsize) {
        if (a.shadow[off].gen == (t->blk->gen | TC_EMU_PENDING)) a.shadow[off].gen = t->blk->gen;
        tc_emu_shared_write(t, a.shadow + off, a.site, a.index + off / a.itemsize, 0);
      }
  }
  t->n_async = kept;
}
"""

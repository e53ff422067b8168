"""Race checking of global memory between the threads of one launch (C, part of the runtime).

Each launch of a race-checked kernel gets one shadow entry per element of every global buffer
it receives (allocated by the host code around the launch, so a launch starts clean): the
block (linear index + 1; 0: none), barrier epoch and thread of the last store, and the same of
the last two distinct threads that loaded it. Two accesses of different threads are ordered
only when the threads are in one block and a barrier lies between them (``__syncthreads``
orders the block's global accesses too); threads of different blocks are never ordered within
a launch. A store conflicts with an unordered store or load of another thread, a load with an
unordered store of another thread; loads of one element by any number of threads are fine.
"""

from __future__ import annotations

GLOBAL_SHADOW = r"""
typedef struct {
  uint32_t w_blk, w_epoch, r1_blk, r1_epoch, r2_blk, r2_epoch;  /* block + 1 (0: none), epoch */
  int16_t writer, r1, r2, pad;                                   /* their threads */
} tc_emu_gshadow;

static inline int tc_emu_g_other(const tc_emu_thread* t, uint32_t blk, uint32_t epoch,
                                 int16_t thread) {
  const tc_emu_block* b = t->blk;
  if (blk == 0 || (blk == b->blin && thread == (int16_t)t->linear)) return 0;
  return blk != b->blin || epoch == b->epoch;  /* not this thread, and unordered */
}

__attribute__((cold, noinline)) static void tc_emu_g_fault(
    tc_emu_thread* t, int32_t site, int64_t i, uint32_t blk, int16_t other, int32_t flags) {
  tc_emu_block* b = t->blk;
  if (!tc_emu_report(b, t->linear, TC_EMU_CONFLICT, site, i, 0, other, -1, flags, 0)) return;
  int64_t lin = (int64_t)blk - 1;
  tc_emu_error.other_block[0] = (int32_t)(lin % b->grid[0]);
  tc_emu_error.other_block[1] = (int32_t)((lin / b->grid[0]) % b->grid[1]);
  tc_emu_error.other_block[2] = (int32_t)(lin / (b->grid[0] * b->grid[1]));
}

static inline void tc_emu_global_read(tc_emu_thread* t, tc_emu_gshadow* e, int32_t site,
                                      int64_t i) {
  tc_emu_block* b = t->blk;
  int16_t me = (int16_t)t->linear;
  if (__builtin_expect(tc_emu_g_other(t, e->w_blk, e->w_epoch, e->writer), 0))
    tc_emu_g_fault(t, site, i, e->w_blk, e->writer, TC_EMU_F_OTHER_WRITE);
  if (e->r1_blk == b->blin && e->r1 == me) {
    e->r1_epoch = b->epoch;
    return;
  }
  e->r2_blk = e->r1_blk;
  e->r2_epoch = e->r1_epoch;
  e->r2 = e->r1;
  e->r1_blk = b->blin;
  e->r1_epoch = b->epoch;
  e->r1 = me;
}

static inline void tc_emu_global_write(tc_emu_thread* t, tc_emu_gshadow* e, int32_t site,
                                       int64_t i, int same) {
  tc_emu_block* b = t->blk;
  if (__builtin_expect(tc_emu_g_other(t, e->w_blk, e->w_epoch, e->writer), 0)) {
    int32_t flags = TC_EMU_F_WRITE | TC_EMU_F_OTHER_WRITE | (same ? TC_EMU_F_SAME : 0);
    tc_emu_g_fault(t, site, i, e->w_blk, e->writer, flags);
  } else if (__builtin_expect(tc_emu_g_other(t, e->r1_blk, e->r1_epoch, e->r1), 0)) {
    tc_emu_g_fault(t, site, i, e->r1_blk, e->r1, TC_EMU_F_WRITE);
  } else if (__builtin_expect(tc_emu_g_other(t, e->r2_blk, e->r2_epoch, e->r2), 0)) {
    tc_emu_g_fault(t, site, i, e->r2_blk, e->r2, TC_EMU_F_WRITE);
  }
  e->w_blk = b->blin;
  e->w_epoch = b->epoch;
  e->writer = (int16_t)t->linear;
}
"""
"""The global shadow type and its checks (after the runtime's types and fault report)."""

"""The XOR-swizzled shared layout of the tensor-core Matmul's operand tiles (``mma`` only).

An alternative to padding rows (``storage_align``): with ``TensorCoreTile.swizzle`` the A and
B tiles are requested swizzled (``Schedule.storage_swizzle``): lowering stores 16-byte chunk
``c`` of row ``r`` at chunk ``c ^ ((r // per) % m)`` (:mod:`tilecraft.lower.swizzle_layout`:
``per`` rows share a 128-byte bank line, ``m`` is the pattern's period), so the 8 rows of each
``ldmatrix`` 8 x 8 matrix and each phase of 8 threads' 16-byte ``cp.async`` stores hit 8
distinct 16-byte bank groups, and a tile takes exactly its elements: 128 x 32 fp16 tiles take
8 KiB per operand and stage, not 10 KiB with 8 elements of padding per row. The layout is
applied when buffers are flattened, after the fragment loads are lowered: the schedule,
tensorize and the per-lane ``ldmatrix`` row addresses all work on the logical tile, and the
flat offsets of both the stores and the reads follow the same layout, for A, a ``(k, n)`` B
(read with ``.trans``) and an ``(n, k)`` B alike, whatever the dtype and pipeline depth.

The default on every ``mma`` preset (sm_80/86/89/90, :meth:`MatmulConfig.for_target`): the
same conflict freedom as padding in 20% less shared memory at ``block_k = 32`` (a third less
at 16), which is what bounds the pipeline depth ``fit_stages`` keeps: four 128 x 128 x 32
stages take 64 KiB, not 80 KiB. Padding stays available (``swizzle=False``); WMMA (sm_70/75)
always pads.
"""

from __future__ import annotations

from ...schedule import BlockRV, Schedule


def swizzle_shared(sch: Schedule, block: BlockRV) -> None:
    """Store the shared tile ``block`` writes XOR-swizzled (module docstring)."""
    sch.storage_swizzle(block, 0)

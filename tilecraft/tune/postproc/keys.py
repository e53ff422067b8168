"""Block annotations a design space leaves for :class:`RewriteParallelVectorizeUnroll`.

A space samples how much of a block to parallelize, vectorize and unroll (with
``sample_categorical``) and records the choice as a block annotation; the postprocessor
turns it into loops once the loop nest is final. On the root block an annotation applies to
every leaf block under it. The mutators find these samples by the annotation they feed.
"""

PARALLEL = "tc.tune.parallel"
"""Fuse the outer spatial loops up to this many iterations and run them in parallel."""
VECTORIZE = "tc.tune.vectorize"
"""Above 1: vectorize the innermost loop when it is spatial and contiguous in the output
(stride 1); inner loops are never fused into one vector (that would gather across rows)."""
UNROLL = "tc.tune.unroll"
"""Annotate the outermost loop with ``pragma_auto_unroll_max_step`` of this value."""
UNROLL_EXPLICIT = "tc.tune.unroll_explicit"
"""With :data:`UNROLL`: also set ``pragma_unroll_explicit`` (1) on that loop."""
TILING = "tc.tune.tiling"
"""The tiling structure a multi-level tiling rule gave a block (``"SSRSRS"``): tells
:class:`RewriteTilingCache` where each tile level of the block's loops ends."""
WRITE_CACHE = "tc.tune.write_cache"
"""Spatial tile level (1-based; 0: none) under which the tiled block accumulates into a local
buffer written back per tile (a ``cache_write`` copy, or the intermediate itself with its
consumers moved under that level). Reduction levels outside that level are first moved just
inside it, so the whole reduction runs into the local tile: with the level before the last
(:data:`REGISTER_TILE` for ``"SSRSRS"``) the local buffer is the innermost spatial tile, a
register tile whose rows are unrolled."""
REGISTER_TILE = 3
"""The :data:`WRITE_CACHE` level of ``"SSRSRS"`` whose local buffer is the register tile."""
PACK = "tc.tune.pack"
"""Where the tiled block's streamed operand (the read indexed by its innermost spatial
iterator) is copied into a contiguous panel: 0 not packed, 1 under the second spatial tile
level, 2 under the first reduction tile level (under the first spatial level when the write
cache moved the reduction inside the register tile's loops)."""
COOPERATIVE_FETCH = "tc.tune.cooperative_fetch"
"""On a GPU shared-memory read cache: the widest vector (elements) its cooperative fetch may
load; :class:`RewriteCooperativeFetch` spreads the copy over the block's threads with the
widest vector up to this value that the tile and the source rows allow."""

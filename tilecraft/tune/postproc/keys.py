"""Block annotations a design space leaves for :class:`RewriteParallelVectorizeUnroll`.

A space samples how much of a block to parallelize, vectorize and unroll (with
``sample_categorical``) and records the choice as a block annotation; the postprocessor
turns it into loops once the loop nest is final. On the root block an annotation applies to
every leaf block under it. The mutators find these samples by the annotation they feed.
"""

PARALLEL = "tc.tune.parallel"
"""Fuse the outer spatial loops up to this many iterations and run them in parallel."""
VECTORIZE = "tc.tune.vectorize"
"""Fuse the inner spatial loops up to this many iterations and vectorize them."""
UNROLL = "tc.tune.unroll"
"""Annotate the outermost loop with ``pragma_auto_unroll_max_step`` of this value."""
UNROLL_EXPLICIT = "tc.tune.unroll_explicit"
"""With :data:`UNROLL`: also set ``pragma_unroll_explicit`` (1) on that loop."""

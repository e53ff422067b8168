"""Schedule primitives, one family per module.

Every primitive is a traced, handle-level function registered with ``@primitive`` (its
arguments checked from its annotations) that resolves handles through the state, checks its
requirements, builds the new IR and commits it:

``loop`` (split, fuse, reorder, add_unit_loop), ``annotate`` (parallel, vectorize, unroll,
bind, annotate, unannotate), ``sampling`` (sample_perfect_tile, sample_categorical,
sample_compute_location), ``query`` (get_block, get_loops, get_child_blocks, get_producers,
get_consumers and the enter_postproc marker), ``compute_location`` (compute_at,
reverse_compute_at, compute_inline, reverse_compute_inline), ``cache`` (cache_read,
cache_write), ``layout`` (set_scope, storage_align, storage_swizzle, transform_layout,
reindex), ``reduction`` (rfactor, decompose_reduction), ``guard`` and the block-shape,
tensorize and padding families.
``index_map`` holds :class:`IndexMap`.
"""

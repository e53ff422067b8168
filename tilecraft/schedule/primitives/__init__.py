"""Schedule primitives, one family per module.

``loop`` (split, fuse, reorder, add_unit_loop), ``annotate`` (parallel, vectorize, unroll,
bind, annotate, unannotate), ``sampling`` (sample_perfect_tile, sample_categorical,
sample_compute_location), and the pure block/buffer primitives ``compute_location``,
``cache`` and ``reduction``, traced through ``bridge``.
"""

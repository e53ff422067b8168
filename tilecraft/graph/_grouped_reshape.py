"""Reshape as independent splits and merges of runs of axes (legalization of ``reshape``).

``topi.reshape`` reads ``x`` through the row-major flat index of the output: every input index
is the flat index divided by a product of extents. With a symbolic extent (a sequence length
``seq``) those divisors are symbolic, and once such a reshape is inlined into its consumers
(transposes, rotary, ...) the kernel divides by ``seq * 2048`` for every element: a call and
a branch per division, no vectorization (measured: the TinyLlama prefill's fused
reshape-rotary-transpose-reshape kernel took 25 ms for 128 x 2048 elements).

Most reshapes of a model split or merge neighbouring axes: ``(1, seq, 2048) -> (1, seq, 32,
64)``. :func:`grouped_reshape` pairs runs of input and output axes with equal products
(``seq`` with ``seq``, ``2048`` with ``32 x 64``) and computes each group's input indices from
that group's output indices alone: only constant divisors, and none at all for an axis that
maps to itself. A reshape that does not decompose so (a symbolic extent merged with others)
is left to ``topi.reshape``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import te
from ..arith import Analyzer
from ..ir import Expr, IntImm, const, structural_equal

Group = tuple[list[int], list[int]]


def _const(e: Expr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def _same_extent(a: Expr, b: Expr) -> bool:
    """The same symbolic extent, up to how it is written (``n + -1`` and ``n - 1``)."""
    if structural_equal(a, b):
        return True
    diff = Analyzer().simplify(a - b)
    return isinstance(diff, IntImm) and diff.value == 0


def _extent(e: Expr) -> int:
    """The constant extent of an axis inside a group of several (checked when grouping)."""
    value = _const(e)
    assert value is not None
    return value


def _match_products(
    src: Sequence[Expr], dst: Sequence[Expr], i: int, j: int
) -> tuple[int, int] | None:
    """The ends of the shortest runs from ``i`` and ``j`` with equal constant products."""
    pi, pj = _const(src[i]), _const(dst[j])
    ei, ej = i + 1, j + 1
    while pi != pj:
        assert pi is not None
        assert pj is not None
        dims, end = (src, ei) if pi < pj else (dst, ej)
        ext = _const(dims[end]) if end < len(dims) else None
        if ext is None or ext == 0:
            return None
        if pi < pj:
            pi, ei = pi * ext, ei + 1
        else:
            pj, ej = pj * ext, ej + 1
    return ei, ej


def reshape_groups(src: Sequence[Expr], dst: Sequence[Expr]) -> list[Group] | None:
    """Pair runs of ``src`` axes with runs of ``dst`` axes of equal extent products.

    Returns ``[(src axes, dst axes), ...]`` covering both shapes in order (a unit axis may
    form a group with nothing on the other side), or None when the shapes do not decompose:
    a symbolic extent must stand alone (the same expression on both sides).
    """
    groups: list[Group] = []
    i = j = 0
    while i < len(src) and j < len(dst):
        a, b = _const(src[i]), _const(dst[j])
        if a == 1 or b == 1:  # a unit axis is a group of its own
            groups.append(([i], []) if a == 1 else ([], [j]))
            i, j = (i + 1, j) if a == 1 else (i, j + 1)
        elif a is None or b is None:
            if a is not None or b is not None or not _same_extent(src[i], dst[j]):
                return None
            groups.append(([i], [j]))
            i, j = i + 1, j + 1
        elif a == 0 or b == 0:
            return None
        else:
            end = _match_products(src, dst, i, j)
            if end is None:
                return None
            groups.append((list(range(i, end[0])), list(range(j, end[1]))))
            i, j = end
    rest: list[Group] = [([k], []) for k in range(i, len(src))]
    rest += [([], [k]) for k in range(j, len(dst))]
    if any(_const(src[g[0]] if g else dst[h[0]]) != 1 for g, h in rest):
        return None
    return groups + rest


def grouped_reshape(
    x: te.Tensor, shape: Sequence[Expr], name: str = "T_reshape"
) -> te.Tensor | None:
    """``x`` reshaped to ``shape`` group by group (module docstring); None if it does not
    decompose into groups."""
    groups = reshape_groups(x.shape, shape)
    if groups is None:
        return None

    def body(*idx: Expr) -> Expr:
        zero = const(0, idx[0].dtype if idx else "int32")
        src: list[Expr] = [zero] * x.ndim
        for g_src, g_dst in groups:
            if not g_src or not g_dst:  # a unit axis: index 0, or nothing to read
                continue
            if len(g_src) == 1 and len(g_dst) == 1:
                src[g_src[0]] = idx[g_dst[0]]
                continue
            flat = zero
            for k in g_dst:
                flat = flat * _extent(shape[k]) + idx[k]
            for k in reversed(g_src[1:]):
                src[k] = flat % _extent(x.shape[k])
                flat = flat // _extent(x.shape[k])
            src[g_src[0]] = flat
        return x[tuple(src)]

    return te.compute(tuple(shape), body, name=name)  # type: ignore[no-any-return]

"""Drop the dimensions of per-thread and per-block buffers that only the owner indexes.

Before: blocks lowered to loops, buffers not yet flattened. A GPU schedule with serial meaning
keeps one slice of a ``local`` buffer per thread (``acc[ty, tx, i]``) and one slice of a
``shared`` buffer per thread block (``tile[bx, i, j]``), indexed by the thread's own indices.
After:  a dimension of an allocated ``local`` buffer whose index is, in every access, the same
function of the ``blockIdx``/``threadIdx`` indices alone (loop variables bound to the same
index count as one; constants included) is removed; so is such a dimension of a ``shared``
(or ``shared.dyn``) buffer when the function uses ``blockIdx`` indices only. On a GPU each
thread (block) has private storage and fixed indices, so it only ever touches one position of
the dimension.

Alignment requests of the ``tc.storage_align`` table follow their buffer: an entry on a removed
dimension is dropped, the others are renumbered.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    ForKind,
    IntImm,
    Mutator,
    Node,
    PrimFunc,
    Var,
    collect_vars,
    post_order_visit,
    structural_equal,
    substitute,
)
from ..ir.transform import FunctionPass
from .collect_storage_align import (
    AlignEntry,
    drop_axes,
    storage_align_table,
    with_storage_align_table,
)


def _canonical(
    index: Expr,
    canon: dict[int, Var],
    allowed: tuple[str, ...],
    tags: dict[int, str],
    units: dict[int, Expr],
) -> Expr | None:
    """``index`` over one canonical variable per hardware index, or None if it uses others."""
    vmap: dict[Var, Expr] = {}
    for v in collect_vars(index):
        if id(v) in units:
            vmap[v] = units[id(v)]
            continue
        tag = tags.get(id(v))
        if tag is None or not tag.startswith(allowed):
            return None
        key = (tag, str(v.dtype))
        var = _CANON.setdefault(key, Var(tag.replace(".", "_"), v.dtype))
        vmap[v] = canon.setdefault(id(v), var)
    return _ANALYZER.simplify(substitute(index, vmap))


_CANON: dict[tuple[str, str], Var] = {}
_ANALYZER = Analyzer()


def _droppable(func: PrimFunc) -> dict[int, tuple[int, ...]]:
    tags: dict[int, str] = {}
    units: dict[int, Expr] = {}  # variables of single-iteration loops: their only value
    allocated: dict[int, Buffer] = {}
    uses: dict[int, list[tuple[Expr, ...]]] = {}

    def fn(n: Node) -> None:
        if isinstance(n, For) and isinstance(n.extent, IntImm) and n.extent.value == 1:
            units[id(n.loop_var)] = n.min
        if isinstance(n, For) and n.kind is ForKind.THREAD_BINDING and n.thread:
            if isinstance(n.min, IntImm) and n.min.value == 0:
                tags[id(n.loop_var)] = n.thread
        elif isinstance(n, Allocate) and n.buffer.scope in ("local", "shared", "shared.dyn"):
            allocated[id(n.buffer)] = n.buffer
        elif isinstance(n, (BufferLoad, BufferStore)):
            uses.setdefault(id(n.buffer), []).append(n.indices)

    post_order_visit(func.body, fn)
    out: dict[int, tuple[int, ...]] = {}
    canon: dict[int, Var] = {}
    for key, buf in allocated.items():
        accesses = uses.get(key, [])
        if not accesses:
            continue
        allowed = ("blockIdx", "threadIdx") if buf.scope == "local" else ("blockIdx",)
        dims = []
        for d in range(buf.ndim):
            forms = [_canonical(ix[d], canon, allowed, tags, units) for ix in accesses]
            first = forms[0]
            if first is not None and all(
                f is not None and structural_equal(first, f) for f in forms[1:]
            ):
                dims.append(d)
        if dims:
            out[key] = tuple(dims)
    return out


class _Compactor(Mutator):
    def __init__(self, drop: dict[int, tuple[int, ...]]) -> None:
        super().__init__()
        self.drop = drop

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        done = self.buffer_map.get(id(buf))
        if done is not None:
            return done
        dims = self.drop.get(id(buf))
        new = buf
        if dims:
            new = buf.update(shape=tuple(s for d, s in enumerate(buf.shape) if d not in dims))
        self.buffer_map[id(buf)] = new
        return new

    def _idx(self, buf: Buffer, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        dims = self.drop.get(id(buf), ())
        return tuple(self.visit(i) for d, i in enumerate(indices) if d not in dims)

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:  # noqa: N802
        return BufferLoad(self.visit(load.buffer), self._idx(load.buffer, load.indices))

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:  # noqa: N802
        return BufferStore(
            self.visit(store.buffer),
            self.visit(store.value),
            self._idx(store.buffer, store.indices),
        )


class CompactThreadDims(FunctionPass):
    """Remove buffer dimensions indexed only by the owning thread's (block's) index."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with per-thread/per-block dimensions dropped."""
        drop = _droppable(func)
        if not drop:
            return func
        table = storage_align_table(func)
        if table:
            func = with_storage_align_table(func, _renumber(func, table, drop))
        return func.update(body=_Compactor(drop).visit(func.body))


def _renumber(
    func: PrimFunc, table: dict[str, tuple[AlignEntry, ...]], drop: dict[int, tuple[int, ...]]
) -> dict[str, tuple[AlignEntry, ...]]:
    """The alignment table after the dimensions in ``drop`` are removed."""
    out = dict(table)

    def fn(n: Node) -> None:
        if isinstance(n, Allocate) and n.buffer.name in table and id(n.buffer) in drop:
            out[n.buffer.name] = drop_axes(table[n.buffer.name], drop[id(n.buffer)])

    post_order_visit(func.body, fn)
    return out

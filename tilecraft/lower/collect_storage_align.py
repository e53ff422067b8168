"""Move ``storage_align`` requests from blocks to a function-level table keyed by buffer.

Before: block-level IR. A block may carry the annotation ``buffer_dim_align`` (written by
:meth:`tilecraft.Schedule.storage_align`): a tuple of ``(write_index, axis, factor, offset)``
entries, each asking that the buffer of the block's write region ``write_index`` be laid out
with ``stride(axis) % factor == offset``.
After:  no block carries the annotation. The function attribute ``tc.storage_align`` maps the
name of each aligned buffer to its sorted ``(axis, factor, offset)`` entries; an aligned buffer
whose name another buffer of the function also has is renamed (``B`` -> ``B_1``) so that the
table names it alone. The buffer passes that run before flattening keep the table in step
(:class:`~tilecraft.lower.CompactThreadDims` renumbers or drops entries of the dimensions it
removes) and :class:`~tilecraft.lower.FlattenBuffer` consumes it: it lays aligned buffers out
with padded strides and removes the attribute.

Swizzle requests (block annotation ``buffer_swizzle``, written by
:meth:`tilecraft.Schedule.storage_swizzle`: a tuple of write indices) are gathered the same
way into the function attribute ``tc.storage_swizzle``, the sorted names of the swizzled
buffers; :class:`~tilecraft.lower.FlattenBuffer` lays their last two axes out XOR-swizzled
(:mod:`tilecraft.lower.swizzle_layout`). The request names the last two axes, so passes that
add or remove leading dimensions (a pipeline's stage axis) leave it as it is.

Blocks disappear in :class:`~tilecraft.lower.ConvertBlocksToLoops`, so this pass runs first.
Only buffers allocated inside the function can be aligned (a parameter's layout belongs to the
caller); meaning is unchanged, only the layout of the allocation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import LowerError
from ..ir import Attrs, Block, Buffer, Mutator, Node, PrimFunc, post_order_visit
from ..ir.transform import FunctionPass

BLOCK_ALIGN_ATTR = "buffer_dim_align"
"""Block annotation written by the ``storage_align`` schedule primitive."""

STORAGE_ALIGN_ATTR = "tc.storage_align"
"""Function attribute: buffer name -> sorted ``(axis, factor, offset)`` entries."""

BLOCK_SWIZZLE_ATTR = "buffer_swizzle"
"""Block annotation written by the ``storage_swizzle`` schedule primitive."""

STORAGE_SWIZZLE_ATTR = "tc.storage_swizzle"
"""Function attribute: the sorted names of the buffers laid out XOR-swizzled."""

AlignEntry = tuple[int, int, int]
"""``(axis, factor, offset)``: pad so that ``stride(axis) % factor == offset``."""


def storage_align_table(func: PrimFunc) -> dict[str, tuple[AlignEntry, ...]]:
    """The alignment table of ``func`` (empty when no buffer is aligned).

    Parameters
    ----------
    func
        A function after :class:`CollectStorageAlign`.

    Returns
    -------
    dict
        Buffer name -> sorted ``(axis, factor, offset)`` entries.
    """
    raw = func.attrs.get(STORAGE_ALIGN_ATTR)
    if raw is None:
        return {}
    if not isinstance(raw, Attrs):
        raise LowerError(f"{STORAGE_ALIGN_ATTR}: expected a mapping, got {raw!r}")
    out: dict[str, tuple[AlignEntry, ...]] = {}
    for name, entries in raw.items():
        parsed = _int_tuples(entries, 3)
        if parsed is None:
            raise LowerError(
                f"{STORAGE_ALIGN_ATTR}[{name!r}]: expected (axis, factor, offset) tuples, "
                f"got {entries!r}"
            )
        out[name] = tuple((a, f, o) for a, f, o in parsed)
    return out


def storage_swizzle_names(func: PrimFunc) -> frozenset[str]:
    """The names of ``func``'s swizzled buffers (after :class:`CollectStorageAlign`)."""
    raw = func.attrs.get(STORAGE_SWIZZLE_ATTR)
    if raw is None:
        return frozenset()
    names = [n for n in raw if isinstance(n, str)] if isinstance(raw, tuple) else []
    if not isinstance(raw, tuple) or len(names) != len(raw):
        raise LowerError(f"{STORAGE_SWIZZLE_ATTR}: expected a tuple of names, got {raw!r}")
    return frozenset(names)


def with_storage_align_table(func: PrimFunc, table: Mapping[str, Iterable[AlignEntry]]) -> PrimFunc:
    """``func`` with its alignment table replaced by ``table`` (removed when empty)."""
    clean = {name: tuple(sorted(e)) for name, e in table.items()}
    clean = {name: e for name, e in clean.items() if e}
    if not clean:
        return func.update(attrs=func.attrs.without(STORAGE_ALIGN_ATTR))
    return func.with_attr(STORAGE_ALIGN_ATTR, clean)


def drop_axes(entries: Iterable[AlignEntry], removed: Iterable[int]) -> tuple[AlignEntry, ...]:
    """Renumber ``entries`` after dimensions ``removed`` are deleted from the buffer.

    An entry on a removed dimension is dropped (its stride no longer exists); the others move
    down by the number of removed dimensions before them.
    """
    gone = sorted(set(removed))
    out = []
    for axis, factor, offset in entries:
        if axis in gone:
            continue
        out.append((axis - sum(1 for d in gone if d < axis), factor, offset))
    return tuple(sorted(out))


def _int_tuples(raw: object, n: int) -> list[tuple[int, ...]] | None:
    """``raw`` as a list of ``n``-tuples of ints, or None when it has another form."""
    if not isinstance(raw, tuple):
        return None
    out = []
    for e in raw:
        if not isinstance(e, tuple) or len(e) != n:
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in e):
            return None
        out.append(tuple(int(v) for v in e))
    return out


class _Requests:
    """Validate and gather the ``buffer_dim_align`` annotations of every block."""

    def __init__(self, func: PrimFunc) -> None:
        self.allocated: set[int] = set()
        self.by_name: dict[str, set[int]] = {}
        self.aligns: dict[int, dict[int, tuple[int, int]]] = {}
        self.buffers: dict[int, Buffer] = {}
        self.blocks: list[Block] = []
        self.swizzled: dict[int, Buffer] = {}
        self.swizzle_blocks: list[Block] = []
        self.params = {id(p) for p in func.buffer_params}
        for p in func.buffer_params:
            self.by_name.setdefault(p.name, set()).add(id(p))
        post_order_visit(func.body, self._visit)
        for blk in self.blocks:
            self._block(blk)
        for blk in self.swizzle_blocks:
            self._swizzle(blk)

    def _visit(self, n: Node) -> None:
        if isinstance(n, Buffer):
            self.by_name.setdefault(n.name, set()).add(id(n))
        elif isinstance(n, Block):
            self.allocated.update(id(b) for b in n.alloc_buffers)
            if BLOCK_ALIGN_ATTR in n.annotations:
                self.blocks.append(n)
            if BLOCK_SWIZZLE_ATTR in n.annotations:
                self.swizzle_blocks.append(n)

    def _swizzle(self, blk: Block) -> None:
        raw = blk.annotations[BLOCK_SWIZZLE_ATTR]
        where = f"CollectStorageAlign: block {blk.name!r}, annotation {BLOCK_SWIZZLE_ATTR!r}"
        indices = [i for i in raw if type(i) is int] if isinstance(raw, tuple) else []
        if not isinstance(raw, tuple) or len(indices) != len(raw):
            raise LowerError(f"{where}: expected a tuple of write indices, got {raw!r}")
        for index in indices:
            if not 0 <= index < len(blk.writes):
                raise LowerError(f"{where}: write index {index} is out of range")
            buf = blk.writes[index].buffer
            if id(buf) not in self.allocated or buf.ndim < 2:
                raise LowerError(
                    f"{where}: buffer {buf.name!r} must be allocated in the function and have "
                    "two dimensions or more"
                )
            self.swizzled[id(buf)] = buf

    def _block(self, blk: Block) -> None:
        raw = blk.annotations[BLOCK_ALIGN_ATTR]
        where = f"CollectStorageAlign: block {blk.name!r}, annotation {BLOCK_ALIGN_ATTR!r}"
        parsed = _int_tuples(raw, 4)
        if parsed is None:
            raise LowerError(
                f"{where}: expected (write_index, axis, factor, offset) tuples, got {raw!r}"
            )
        for index, axis, factor, offset in parsed:
            if not 0 <= index < len(blk.writes):
                raise LowerError(
                    f"{where}: write index {index} is out of range; the block writes "
                    f"{len(blk.writes)} buffer(s)"
                )
            buf = blk.writes[index].buffer
            if id(buf) not in self.allocated:
                what = "a function parameter" if id(buf) in self.params else "not allocated"
                raise LowerError(
                    f"{where}: buffer {buf.name!r} is {what}; only buffers allocated by a "
                    "block of the function (alloc_buffers) can be aligned"
                )
            if not 0 <= axis < buf.ndim or factor <= 0 or not 0 <= offset < factor:
                raise LowerError(
                    f"{where}: entry {(index, axis, factor, offset)} needs 0 <= axis < "
                    f"{buf.ndim}, factor > 0 and 0 <= offset < factor"
                )
            axes = self.aligns.setdefault(id(buf), {})
            self.buffers[id(buf)] = buf
            if axes.get(axis, (factor, offset)) != (factor, offset):
                raise LowerError(
                    f"{where}: buffer {buf.name!r} axis {axis} is aligned twice with different "
                    f"factor/offset: {axes[axis]} and {(factor, offset)}"
                )
            axes[axis] = (factor, offset)


class _Stripper(Mutator):
    """Remove the block annotation; rename the buffers in ``buffer_map``."""

    def visit_Block(self, block: Block) -> Block:  # noqa: N802
        new: Block = self.generic_visit(block)
        for key in (BLOCK_ALIGN_ATTR, BLOCK_SWIZZLE_ATTR):
            if key in new.annotations:
                new = new.update(annotations=new.annotations.without(key))
        return new


def _fresh(name: str, taken: Mapping[str, object]) -> str:
    k = 1
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"


class CollectStorageAlign(FunctionPass):
    """Turn blocks' ``buffer_dim_align`` annotations into the ``tc.storage_align`` table."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Collect the alignment requests of ``func``'s blocks into its attributes.

        Raises
        ------
        LowerError
            When an annotation is malformed, names a parameter, or aligns one axis twice with
            different factors or offsets.
        """
        req = _Requests(func)
        if not req.blocks and not req.swizzle_blocks:
            return func
        table = {k: list(v) for k, v in storage_align_table(func).items()}
        mutator = _Stripper()
        names = set(storage_swizzle_names(func))
        for key, axes in req.aligns.items():
            buf = req.buffers[key]
            name = buf.name
            if len(req.by_name[name]) > 1:
                name = _fresh(name, {**req.by_name, **table})
                req.by_name[name] = {key}
                mutator.buffer_map[key] = buf.update(name=name)
            merged = {axis: (f, o) for axis, f, o in table.get(name, ())}
            for axis, fo in axes.items():
                if merged.get(axis, fo) != fo:
                    raise LowerError(
                        f"CollectStorageAlign: buffer {name!r} axis {axis} is aligned twice "
                        f"with different factor/offset: {merged[axis]} and {fo}"
                    )
                merged[axis] = fo
            table[name] = [(axis, f, o) for axis, (f, o) in merged.items()]
        for key, buf in req.swizzled.items():
            renamed = mutator.buffer_map.get(key)
            name = renamed.name if renamed is not None else buf.name
            if renamed is None and len(req.by_name[name]) > 1:
                name = _fresh(name, {**req.by_name, **table})
                req.by_name[name] = {key}
                mutator.buffer_map[key] = buf.update(name=name)
            names.add(name)
        func = func.update(body=mutator.visit(func.body))
        if names:
            func = func.with_attr(STORAGE_SWIZZLE_ATTR, tuple(sorted(names)))
        return with_storage_align_table(func, table)

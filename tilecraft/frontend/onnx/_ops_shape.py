"""Converters of data-movement and shape operators (Reshape, Slice, Gather, Shape, ...).

Each works on graph tensors and, when its inputs are known at import, on numpy arrays
(shape subgraphs fold at import; symbolic extents travel through them as expressions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...graph import GraphError, TensorVar
from ...graph._shape_text import extent_text
from ...ir import as_expr
from ._context import Context, Dim, Node, Value, dims_of
from ._fold import obj_array, simplify, symbolic

Converter = Callable[[Context, Node], list[Value]]


def _dims_equal(a: Dim, b: Dim) -> bool:
    return isinstance(simplify(a - b), int) and simplify(a - b) == 0


def reshape_to(ctx: Context, x: TensorVar, dims: Sequence[Dim]) -> TensorVar:
    """``x`` reshaped to ``dims`` (ints and extents over ``x``'s symbolic dimensions); no
    binding when the shape is unchanged."""
    cur = dims_of(x)
    if len(cur) == len(dims) and all(_dims_equal(a, b) for a, b in zip(cur, dims, strict=True)):
        return x
    try:
        spec = tuple(extent_text(as_expr(simplify(d))) for d in dims)
    except GraphError as e:
        raise ctx.error(f"cannot reshape {x.type.describe()} to {list(dims)}: {e}") from e
    return ctx.emit("reshape", [x], {"shape": spec})


def axes_input(ctx: Context, node: Node, index: int, ndim: int) -> list[int] | None:
    """Axes from input ``index`` (newer opsets) or the ``axes`` attribute, non-negative."""
    if len(node.inputs) > index and node.inputs[index]:
        axes: list[int] | None = ctx.ints(node.inputs[index], "axes")
    else:
        axes = node.attr_ints("axes")
    if axes is None:
        return None
    for a in axes:
        if not -ndim <= a < ndim:
            raise ctx.error(f"axis {a} is out of range for rank {ndim}")
    return [a % ndim for a in axes]


def _reshape(ctx: Context, node: Node) -> list[Value]:
    data = ctx.value(node.inputs[0])
    cur = dims_of(data) if isinstance(data, TensorVar) else list(data.shape)
    target = ctx.dims(node.inputs[1], "the target shape")
    allow_zero = node.attr_int("allowzero", 0)
    out: list[Dim] = [
        cur[i] if (isinstance(d, int) and d == 0 and not allow_zero) else d
        for i, d in enumerate(target)
    ]
    if sum(1 for d in out if isinstance(d, int) and d == -1) > 1:
        raise ctx.error(f"more than one -1 in the target shape {target}")
    if -1 in [d for d in out if isinstance(d, int)]:
        rest = _remaining_extent(cur, [d for d in out if not (isinstance(d, int) and d == -1)])
        out = [rest if isinstance(d, int) and d == -1 else d for d in out]
    if isinstance(data, np.ndarray):
        return [data.reshape([int(d) for d in out])]  # type: ignore[arg-type]
    return [reshape_to(ctx, data, out)]


def _remaining_extent(cur: Sequence[Dim], known: Sequence[Dim]) -> Dim:
    """The extent of a reshape's -1: the element count of ``cur`` over the product of the
    ``known`` target extents, the extents the two share cancelled first (``(b * 32 * 2 * 2)
    // (b * 32)`` is 4, which the simplifier cannot see through the symbolic ``b``)."""
    factors = list(cur)
    other: list[Dim] = []
    for d in known:
        same = next((i for i, f in enumerate(factors) if _dims_equal(f, d)), None)
        if same is None:
            other.append(d)
        else:
            factors.pop(same)
    total, rest = simplify(_prod(factors)), simplify(_prod(other))
    return simplify(total // rest) if not isinstance(rest, int) or rest else 0


def _prod(dims: Sequence[Dim]) -> Dim:
    p: Dim = 1
    for d in dims:
        p = simplify(p * d)
    return p


def _flatten(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    dims = dims_of(x)
    axis = node.attr_int("axis", 1)
    axis = axis + len(dims) if axis < 0 else axis
    return [reshape_to(ctx, x, [_prod(dims[:axis]), _prod(dims[axis:])])]


def _squeeze(ctx: Context, node: Node) -> list[Value]:
    data = ctx.value(node.inputs[0])
    dims = dims_of(data) if isinstance(data, TensorVar) else list(data.shape)
    axes = axes_input(ctx, node, 1, len(dims))
    if axes is None:
        axes = [i for i, d in enumerate(dims) if isinstance(d, int) and d == 1]
    for a in axes:
        if not (isinstance(dims[a], int) and dims[a] == 1):
            raise ctx.error(f"cannot squeeze axis {a} of extent {dims[a]}")
    out = [d for i, d in enumerate(dims) if i not in axes]
    if isinstance(data, np.ndarray):
        return [data.reshape([int(d) for d in out])]  # type: ignore[arg-type]
    return [reshape_to(ctx, data, out)]


def _unsqueeze(ctx: Context, node: Node) -> list[Value]:
    data = ctx.value(node.inputs[0])
    dims = dims_of(data) if isinstance(data, TensorVar) else list(data.shape)
    if len(node.inputs) > 1 and node.inputs[1]:
        raw: list[int] | None = ctx.ints(node.inputs[1], "axes")
    else:
        raw = node.attr_ints("axes")
    if raw is None:
        raise ctx.error("Unsqueeze needs axes")
    n = len(dims) + len(raw)
    out: list[Dim] = list(dims)
    for a in sorted(a % n for a in raw):
        out.insert(a, 1)
    if isinstance(data, np.ndarray):
        return [data.reshape([int(d) for d in out])]  # type: ignore[arg-type]
    return [reshape_to(ctx, data, out)]


def _transpose(ctx: Context, node: Node) -> list[Value]:
    data = ctx.value(node.inputs[0])
    perm = node.attr_ints("perm")
    if isinstance(data, np.ndarray):
        return [np.transpose(data, perm)]
    attrs = {"axes": tuple(perm)} if perm is not None else {}
    if perm is not None and perm == list(range(len(perm))):
        return [data]
    return [ctx.emit("permute_dims", [data], attrs)]


def _concat(ctx: Context, node: Node) -> list[Value]:
    names = [n for n in node.inputs if n]
    axis = node.attr_int("axis", 0)
    if all(ctx.is_static(n) for n in names):
        arrays = [ctx.static(n, "input") for n in names]
        if any(symbolic(a) for a in arrays):
            return [obj_array(np.concatenate([a.astype(object) for a in arrays], axis=axis))]
        return [np.concatenate(arrays, axis=axis)]
    tensors = [ctx.tensor(n) for n in names]
    tensors = [t for t in tensors if not any(isinstance(d, int) and d == 0 for d in dims_of(t))]
    if len(tensors) == 1:
        return [tensors[0]]
    return [ctx.emit("concat", tensors, {"axis": axis})]


def _gather(ctx: Context, node: Node) -> list[Value]:
    data, idx_name = ctx.value(node.inputs[0]), node.inputs[1]
    axis = node.attr_int("axis", 0)
    if isinstance(data, np.ndarray) and ctx.is_static(idx_name):
        idx = ctx.static(idx_name, "indices")
        out = np.take(data, idx, axis=axis)
        return [obj_array(out) if symbolic(data) else out]
    x = ctx.tensor(node.inputs[0])
    dims = dims_of(x)
    axis = axis % len(dims)
    if ctx.is_static(idx_name) and ctx.static(idx_name, "indices").ndim == 0:
        one = np.asarray(ctx.static(idx_name, "indices")).reshape(1)
        taken = ctx.emit("take", [x, ctx.const(one)], {"axis": axis})
        return [reshape_to(ctx, taken, dims[:axis] + dims[axis + 1 :])]
    return [ctx.emit("take", [x, ctx.tensor(idx_name)], {"axis": axis})]


def _shape(ctx: Context, node: Node) -> list[Value]:
    v = ctx.value(node.inputs[0])
    dims = dims_of(v) if isinstance(v, TensorVar) else list(v.shape)
    n = len(dims)
    start, end = node.attr_int("start", 0), node.attr_int("end", n)
    start, end = (max(0, min(n, s + n if s < 0 else s)) for s in (start, end))
    return [obj_array(dims[start:end], (max(0, end - start),))]


#: a slice end at or beyond this value means "to the end of the axis" (exports use INT64_MAX)
END_OF_AXIS = 2**31 - 1


def _static_range(n: int, b: int, e: int, s: int) -> tuple[int, int]:
    """numpy's (first index, count) of ``range(n)[b:e:s]``."""
    r = range(n)[slice(b, e, s)]
    return (r.start if len(r) else 0), len(r)


def _symbolic_range(ctx: Context, n: Dim, b: Dim, e: Dim, s: int) -> tuple[Dim, Dim]:
    """(first index, count) of ``range(n)[b:e:s]``, ``s > 0``, where an extent or a bound is
    symbolic: in-range bounds assumed (a symbolic extent is not known to clamp them)."""
    start = simplify(n + b) if isinstance(b, int) and b < 0 else b
    if isinstance(e, int):
        stop = n if e >= END_OF_AXIS else simplify(n + e) if e < 0 else e
    else:
        over = simplify(e - n)
        stop = n if isinstance(over, int) and over >= 0 else e
    count = simplify(stop - start) if s == 1 else simplify((stop - start + (s - 1)) // s)
    if isinstance(count, int) and count < 0:
        raise ctx.error(f"slice [{b}:{e}:{s}] of extent {n} is empty")
    return start, count


def slice_axis(ctx: Context, x: TensorVar, axis: int, b: Dim, e: Dim, s: int) -> TensorVar:
    """``x`` sliced ``b:e:s`` (numpy semantics) along ``axis``, as main's single-axis
    ``strided_slice`` (a negative step flips the axis first)."""
    dims = dims_of(x)
    n = dims[axis]
    if s == 0:
        raise ctx.error("a slice step of 0")
    start: Dim
    count: Dim
    if isinstance(n, int) and isinstance(b, int) and isinstance(e, int):
        start, count = _static_range(n, b, e, s)
        if s < 0:
            x, start, s = ctx.emit("flip", [x], {"axis": (axis,)}), n - 1 - start, -s
    elif s < 0:
        full = isinstance(b, int) and (b == -1 or b >= END_OF_AXIS)
        if s != -1 or not full or not (isinstance(e, int) and e <= -END_OF_AXIS):
            raise ctx.error("a negative step over a symbolic extent must reverse the whole axis")
        return ctx.emit("flip", [x], {"axis": (axis,)})
    else:
        start, count = _symbolic_range(ctx, n, b, e, s)
    if s == 1 and _dims_equal(count, n):
        return x
    shape = [*dims[:axis], count, *dims[axis + 1 :]]
    begin = extent_text(as_expr(start))
    attrs = {"axis": axis, "begin": begin, "step": s}
    return ctx.emit_shaped("strided_slice", [x], attrs, shape, uses=[start])


def _slice(ctx: Context, node: Node) -> list[Value]:
    data = ctx.value(node.inputs[0])
    dims = dims_of(data) if isinstance(data, TensorVar) else list(data.shape)
    nd = len(dims)
    starts = [simplify(v) for v in ctx.dims(node.inputs[1], "starts")]
    ends = [simplify(v) for v in ctx.dims(node.inputs[2], "ends")]
    axes = axes_input(ctx, node, 3, nd) or list(range(len(starts)))
    steps = ctx.ints(node.inputs[4], "steps") if len(node.inputs) > 4 and node.inputs[4] else None
    steps = steps or [1] * len(starts)
    if not len(axes) == len(starts) == len(ends) == len(steps):
        raise ctx.error("starts, ends, axes and steps differ in length")
    if isinstance(data, np.ndarray) and all(isinstance(v, int) for v in (*starts, *ends)):
        index = [slice(None)] * nd
        for a, b, e, s in zip(axes, starts, ends, steps, strict=True):
            index[a] = slice(b, e, s)
        return [data[tuple(index)]]
    x = ctx.tensor(node.inputs[0])
    for a, b, e, s in zip(axes, starts, ends, steps, strict=True):
        x = slice_axis(ctx, x, a, b, e, s)
    return [x]


def _split(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    dims = dims_of(x)
    axis = node.attr_int("axis", 0) % len(dims)
    n = len(node.outputs)
    if len(node.inputs) > 1 and node.inputs[1]:
        sizes = ctx.ints(node.inputs[1], "split")
    elif node.attr_ints("split") is not None:
        sizes = node.attr_ints("split") or []
    else:
        ext = dims[axis]
        if not isinstance(ext, int):
            raise ctx.error(f"cannot split the symbolic extent {ext} into {n} parts")
        part = -(-ext // n)
        sizes = [min(part, ext - i * part) for i in range(n)]
    outs: list[Value] = []
    begin = 0
    for size in sizes:
        outs.append(slice_axis(ctx, x, axis, begin, begin + size, 1))
        begin += size
    return outs


def broadcast_to(ctx: Context, x: TensorVar, target: Sequence[Dim]) -> TensorVar:
    """``x`` broadcast to ``target`` (numpy rules; a target extent of 1 keeps x's)."""
    cur = dims_of(x)
    n = max(len(cur), len(target))
    a: list[Dim] = [*([1] * (n - len(cur))), *cur]
    b: list[Dim] = [*([1] * (n - len(target))), *(simplify(d) for d in target)]
    out = [da if isinstance(db, int) and db == 1 else db for da, db in zip(a, b, strict=True)]
    if len(out) == len(cur) and all(_dims_equal(p, q) for p, q in zip(out, cur, strict=True)):
        return x
    return ctx.emit_shaped("broadcast_to", [x], {}, out)


def _expand(ctx: Context, node: Node) -> list[Value]:
    data = ctx.value(node.inputs[0])
    target = ctx.dims(node.inputs[1], "the target shape")
    if isinstance(data, np.ndarray) and all(isinstance(d, int) for d in target):
        shape = np.broadcast_shapes(data.shape, tuple(int(d) for d in target))  # type: ignore[arg-type]
        return [np.broadcast_to(data, shape).copy()]
    return [broadcast_to(ctx, ctx.tensor(node.inputs[0]), target)]


def _tile(ctx: Context, node: Node) -> list[Value]:
    """``Tile``: each axis ``a`` repeated ``repeats[a]`` times, as a new outer axis
    broadcast to the repeat count then merged into ``a``."""
    data = ctx.value(node.inputs[0])
    reps = ctx.ints(node.inputs[1], "repeats")
    if isinstance(data, np.ndarray):
        return [np.tile(data, reps)]
    dims = dims_of(data)
    if len(reps) != len(dims) or any(r < 0 for r in reps):
        raise ctx.error(f"Tile needs one repeat count >= 0 per axis, got {reps}")
    x = data
    for a, r in enumerate(reps):
        if r == 1:
            continue
        cur = dims_of(x)
        x = reshape_to(ctx, x, [*cur[:a], 1, *cur[a:]])
        x = broadcast_to(ctx, x, [*cur[:a], r, *cur[a:]])
        x = reshape_to(ctx, x, [*cur[:a], simplify(r * cur[a]), *cur[a + 1 :]])
    return [x]


def _constant_of_shape(ctx: Context, node: Node) -> list[Value]:
    shape = ctx.dims(node.inputs[0], "the shape")
    value = node.attrs.get("value")
    fill = value.reshape(-1) if isinstance(value, np.ndarray) else np.zeros(1, np.float32)
    if all(isinstance(d, int) for d in shape):
        return [np.full([d for d in shape if isinstance(d, int)], fill[0], dtype=fill.dtype)]
    return [broadcast_to(ctx, ctx.const(fill[:1].reshape(())), shape)]


def _range(ctx: Context, node: Node) -> list[Value]:
    start, limit, delta = (ctx.static(n, "Range bound") for n in node.inputs[:3])
    if not any(symbolic(a) for a in (start, limit, delta)):
        return [np.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)]
    if symbolic(start) or symbolic(delta):
        raise ctx.error("Range with a symbolic start or step is unsupported")
    lo, step = start.item(), delta.item()
    if not isinstance(lo, int) or not isinstance(step, int) or step <= 0:
        raise ctx.error("Range to a symbolic limit needs an integer start and a positive step")
    hi = simplify(limit.reshape(-1)[0])
    count = simplify(hi - lo) if step == 1 else simplify((hi - lo + (step - 1)) // step)
    attrs = {"start": lo, "step": step, "dtype": start.dtype.name}
    return [ctx.emit_shaped("arange", [], attrs, [count])]


def _pad(ctx: Context, node: Node) -> list[Value]:
    mode = node.attrs.get("mode", "constant")
    if mode != "constant":
        raise ctx.error(f"mode={mode!r} is unsupported (constant padding only)")
    x = ctx.tensor(node.inputs[0])
    nd = x.type.ndim
    pads = ctx.ints(node.inputs[1], "pads")
    axes = axes_input(ctx, node, 3, nd) or list(range(nd))
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} do not match {len(axes)} axes")
    before, after = [0] * nd, [0] * nd
    for i, a in enumerate(axes):
        before[a], after[a] = pads[i], pads[len(axes) + i]
    value = 0.0
    if len(node.inputs) > 2 and node.inputs[2]:
        value = float(ctx.static(node.inputs[2], "constant_value").reshape(-1)[0])
    for a in range(nd):  # negative pads crop
        if before[a] < 0 or after[a] < 0:
            end = after[a] if after[a] < 0 else END_OF_AXIS
            x = slice_axis(ctx, x, a, max(0, -before[a]), end, 1)
    if not any(p > 0 for p in (*before, *after)):
        return [x]
    attrs = {
        "pad_before": tuple(max(0, p) for p in before),
        "pad_after": tuple(max(0, p) for p in after),
        "value": value,
    }
    return [ctx.emit("pad", [x], attrs)]


def _constant(ctx: Context, node: Node) -> list[Value]:
    for key, dtype in (("value_float", np.float32), ("value_int", np.int64)):
        if key in node.attrs:
            return [np.asarray(node.attrs[key], dtype=dtype)]
    for key, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
        if key in node.attrs:
            return [np.asarray(list(node.attrs[key]), dtype=dtype)]
    value = node.attrs.get("value")
    if not isinstance(value, np.ndarray):
        raise ctx.error("only dense tensor, float(s) and int(s) values are supported")
    return [value]


def _identity(ctx: Context, node: Node) -> list[Value]:
    return [ctx.value(node.inputs[0])]


def _where_static_or_not(ctx: Context, node: Node) -> list[Value]:
    c, a, b = (ctx.tensor(n) for n in node.inputs)
    return [ctx.emit("where", [c, a, b])]


def _cast(ctx: Context, node: Node) -> list[Value]:
    from onnx import helper

    to = np.dtype(helper.tensor_dtype_to_np_dtype(node.attr_int("to", 1)))
    v = ctx.value(node.inputs[0])
    if isinstance(v, np.ndarray):
        if symbolic(v) and to.kind in "iu":
            return [v]
        return [v.astype(to)]
    if str(v.type.dtype) == to.name:
        return [v]
    return [ctx.emit("astype", [v], {"dtype": to.name})]


CONVERTERS: dict[str, Converter] = {
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Transpose": _transpose,
    "Concat": _concat,
    "Gather": _gather,
    "Shape": _shape,
    "Slice": _slice,
    "Split": _split,
    "Expand": _expand,
    "Tile": _tile,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
    "Constant": _constant,
    "Pad": _pad,
    "Identity": _identity,
    "Dropout": _identity,
    "Where": _where_static_or_not,
    "Cast": _cast,
}

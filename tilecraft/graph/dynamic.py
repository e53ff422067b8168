"""``nonzero`` in a graph function: a count kernel, a ``bind_symbol``, a fill kernel.

``emit_nonzero(bb, x, "u0", upper, prims)`` binds, in the graph function being built:

    count = R.call_tir(cls.nonzero_count, (x,), out_sinfo=R.Tensor((1,), "int64"))
    u0_c = R.bind_symbol(count, "u0", lower=0, upper=<numel of x or -1>)
    idx = R.call_tir(cls.nonzero_fill, (x, u0_c), out_sinfo=R.Tensor(("u0", ndim), "int64"))

``idx[k]`` is the index (one column per axis) of the ``k``-th element of ``x`` that is not
zero, in row-major order (``numpy.argwhere``, ``torch.nonzero``); NaN counts as non-zero.
Both kernels are serial scans over ``x`` written by hand (marked scheduled ``hand``, so the
rules leave them alone): the count is a reduction any schedule could split, but the fill
places each element after every earlier one, a prefix sum the kernels here do in one pass
on one core. The fill writes a row only while its counter is below ``u0`` (the extent read
from the count), so it never writes outside its output whatever the count held. They are CPU
kernels: a CUDA target refuses them when lowering (their loops are bound to no thread).
"""

from __future__ import annotations

from collections.abc import MutableMapping

from ..ir import BY_HAND, Expr, PrimFunc, Var, as_expr, mark_scheduled
from ..ir import dtype as to_dtype
from ..script import parse
from .builder import GraphBuilder
from .ir import TensorType, TensorVar
from .op import GraphError


def emit_nonzero(
    bb: GraphBuilder,
    x: TensorVar,
    symbol: str | Var,
    upper: int | Expr,
    prims: MutableMapping[str, PrimFunc],
    *,
    lower: int | Expr = 0,
    rows: Expr | None = None,
) -> tuple[TensorVar, TensorVar]:
    """Bind ``nonzero(x)``, an int64 tensor of shape ``(symbol, x.ndim)`` (module docstring).

    ``lower`` and ``upper`` bound the count (``upper`` -1: none but int32's); the two kernels
    are added to ``prims`` (name -> PrimFunc, shared by the calls of one module). ``rows``
    names the result's rows by an extent bound earlier instead (give it as both bounds, so
    the count is checked to equal it). Returns the indices and the carrier of ``symbol``
    (the tensor later bindings take to name it in their types).
    """
    ndim, dt = x.type.ndim, str(x.type.dtype)
    if ndim == 0:
        raise GraphError("nonzero: reshape a 0-d tensor to (1,) first")
    count_name = _add(prims, f"nonzero_count_{dt}_{ndim}d", count_kernel(ndim, dt))
    fill_name = _add(prims, f"nonzero_fill_{dt}_{ndim}d", fill_kernel(ndim, dt))
    count = bb.emit_call_tir(
        count_name, [x], TensorType((as_expr(1, "int32"),), to_dtype("int64")), name="nonzero_count"
    )
    carrier = bb.emit_bind_symbol(count, symbol, lower, upper)
    first = carrier.type.shape[0] if rows is None else rows
    out = TensorType((first, as_expr(ndim, "int32")), to_dtype("int64"))
    return bb.emit_call_tir(fill_name, [x, carrier], out, "nonzero"), carrier


def _add(prims: MutableMapping[str, PrimFunc], name: str, func: PrimFunc) -> str:
    if name not in prims:
        prims[name] = mark_scheduled(func.update(name=name), BY_HAND)
    return name


def _header(name: str, ndim: int, dt: str, out: str) -> list[str]:
    dims = ", ".join(f"n{d}" for d in range(ndim)) + ("," if ndim == 1 else "")
    lines = [
        "@T.prim_func",
        f'def {name}(X: T.Buffer(({dims}), "{dt}"), {out}):',
        *(f"    n{d} = T.int32()" for d in range(ndim)),
    ]
    return lines


def _scan(ndim: int, body: list[str]) -> list[str]:
    """Nested serial loops over every element of X, with ``body`` under a non-zero test."""
    lines = ['    with T.block("root"):', '        cnt = T.alloc_buffer((1,), "int64")']
    lines.append("        cnt[0] = T.int64(0)")
    ind = "        "
    for d in range(ndim):
        lines.append(f"{ind}for i{d} in range(n{d}):")
        ind += "    "
    index = ", ".join(f"i{d}" for d in range(ndim))
    lines.append(f'{ind}if T.Cast("float64", X[{index}]) != T.float64(0.0):')
    lines += [ind + "    " + ln for ln in body]
    lines.append(f"{ind}    cnt[0] = cnt[0] + T.int64(1)")
    return lines


def count_kernel(ndim: int, dt: str) -> PrimFunc:
    """``Count[0]`` = the number of non-zero elements of an ``ndim``-d ``dt`` tensor."""
    head = _header("nonzero_count", ndim, dt, 'Count: T.Buffer((1,), "int64")')
    lines = [*head, *_scan(ndim, [])]
    lines.append("        Count[0] = cnt[0]")
    return _parse(lines)


def fill_kernel(ndim: int, dt: str) -> PrimFunc:
    """``Out[k, :]`` = the index of the ``k``-th non-zero element (at most ``u`` rows)."""
    out = 'C: T.Buffer((u, 0), "int64"), Out: T.Buffer((u, ' + str(ndim) + '), "int64")'
    head = [*_header("nonzero_fill", ndim, dt, out), "    u = T.int32()"]
    writes = [f'    Out[cnt[0], {d}] = T.Cast("int64", i{d})' for d in range(ndim)]
    return _parse([*head, *_scan(ndim, ['if cnt[0] < T.Cast("int64", u):', *writes])])


def _parse(lines: list[str]) -> PrimFunc:
    func = parse("\n".join(lines))
    assert isinstance(func, PrimFunc)
    return func

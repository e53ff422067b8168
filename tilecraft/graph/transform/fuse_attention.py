"""FuseAttention: one ``attention`` operator call for a traced softmax-attention chain.

Before: the chain ``o = matmul(softmax(mask(scale * matmul(q, k^T)), axis=-1), v)`` on
``(batch, heads, seq, head_dim)`` tensors, as the nn frontend's
``scaled_dot_product_attention`` traces it and as torch's decomposition of SDPA imports:

- ``k^T``: ``matmul(.., transpose_b=True)`` or a ``permute_dims`` swapping the last two axes;
- the scale: constant scalars multiplying or dividing the scores, ``q`` or ``k^T`` (their
  product is the op's ``scale``; ``1 / sqrt(head_dim)`` split over ``q`` and ``k`` is torch's);
- the mask, optional: ``causal_mask`` aligned bottom-right (``offset`` None, or ``T - S``);
  ``where(M, x, c)`` with a constant boolean ``M`` equal to ``tril(ones(S, T), T - S)`` and a
  constant ``c`` that is ``-inf`` or at most half the dtype's lowest value; or ``x + A`` with
  a constant ``A`` that is 0 on that triangle and such a ``c`` elsewhere;
- softmax over the last axis, optionally followed by torch's guard for fully-masked rows
  ``where(not any(not (x == -inf), last axis), 0, softmax)``, a no-op here since every row
  keeps a key;
- rank-3 ``matmul``s reached through ``reshape``s that merge ``(batch, heads)`` (torch's).

After: ``o = attention(q, k, v, causal=.., scale=.., layout="BHSD")``, which legalizes to the
one PrimFunc the CPU ``Attention`` rule schedules. Only when every intermediate has no use
outside the chain, all are rank 4 with matching ``(batch, heads)``, and the dtypes agree;
anything else is left as it is. Grouped-query attention traced with 5-d grouped scores is
not fused. Nor, unless ``FuseAttention(any_length=True)``, are chains whose sequence lengths
are symbolic or not multiples of 16: the CPU ``Attention`` rule's kernel is fast on those
multiples and falls off a cliff elsewhere (12 heads of 64, causal, one thread, the
separate operators' time in parentheses: s = 128 0.79 ms (2.1), 136 24 ms (2.4), 197
49 ms (6.4), one query against 128 keys 0.11 ms (0.04), symbolic s = 128 9-18 ms (2)).
A symbolic batch or head count is fused (0.9 ms against 1.2 ms separate, s = 128).
Under a GPU target (``with target:``, as ``tc.compile`` runs the pipeline) nothing fuses:
the GPU rules schedule the fused PrimFunc as a general reduction, while the separate
products get the tensor-core Matmul rule. Operator calls only: run it after
``FoldConstants`` (torch's masks are built from ``arange`` and become constants there)
and before ``Legalize``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ...ir import Attrs, IntImm, IRModule
from ...ir.transform import ModulePass
from ...target import Target
from ..ir import Binding, Constant, Function, OpCall, TensorVar, graph_functions, rebuild
from ..op import dims_equal, product
from ..op_types import permutation, transpose_b


@dataclass
class _Graph:
    """Definitions and use counts of one graph function's values."""

    defs: dict[int, object]
    uses: Counter[int]

    @staticmethod
    def of(func: Function) -> _Graph:
        """Uses are counted from live bindings only (the importer leaves dead reshapes)."""
        uses: Counter[int] = Counter(id(r) for r in func.rets)
        for b in reversed(func.bindings):
            if uses[id(b.var)] or not isinstance(b.value, OpCall):
                uses.update(id(a) for a in getattr(b.value, "args", ()))
        return _Graph({id(b.var): b.value for b in func.bindings}, uses)

    def call(self, x: TensorVar, *ops: str) -> OpCall | None:
        v = self.defs.get(id(x))
        return v if isinstance(v, OpCall) and v.op in ops else None

    def const(self, x: TensorVar) -> np.ndarray | None:
        v = self.defs.get(id(x))
        return v.data if isinstance(v, Constant) else None

    def zeros(self, x: TensorVar) -> bool:
        """Whether ``x`` is a constant of zeros or ``full(.., value=0)``."""
        data = self.const(x)
        if data is not None:
            return not np.any(data)
        call = self.call(x, "full")
        return call is not None and call.attrs.get("value") == 0

    def scalar(self, x: TensorVar) -> float | None:
        data = self.const(x)
        return float(data.reshape(())) if data is not None and data.size == 1 else None


@dataclass
class _Match:
    """What the chain reads and computes, and the intermediate values it consumes."""

    g: _Graph
    inner: list[TensorVar] = field(default_factory=list)
    scale: float = 1.0
    causal: bool = False

    def take(self, x: TensorVar, *ops: str) -> OpCall | None:
        """The call defining ``x`` when it is one of ``ops``; ``x`` joins the chain."""
        call = self.g.call(x, *ops)
        if call is not None:
            self.inner.append(x)
        return call


def _last_axis(call: OpCall, ndim: int) -> bool:
    axis = call.attrs.get("axis", -1)
    if isinstance(axis, (tuple, list)):
        axis = axis[0] if len(axis) == 1 else None
    return isinstance(axis, int) and axis in (-1, ndim - 1)


def _lift(m: _Match, x: TensorVar) -> TensorVar:
    """``y`` when ``x = reshape(y)`` only merges ``y``'s two leading axes; else ``x``."""
    call = m.g.call(x, "reshape")
    if call is None or x.type.ndim != 3 or call.args[0].type.ndim != 4:
        return x
    y = call.args[0]
    if not all(dims_equal(a, c) for a, c in zip(y.type.shape[2:], x.type.shape[1:], strict=True)):
        return x
    merged = product(y.type.shape[:2])
    if merged is None or merged != product(x.type.shape[:1]):
        return x
    m.inner.append(x)
    return y


def _matmul4(m: _Match, x: TensorVar) -> OpCall | None:
    """The matmul computing ``x`` (rank 4), directly or as a reshape of a rank-3 matmul."""
    call = m.take(x, "matmul")
    if call is not None:
        return call if x.type.ndim == 4 else None
    r = m.g.call(x, "reshape")
    if r is None or x.type.ndim != 4 or r.args[0].type.ndim != 3:
        return None
    inner = r.args[0]
    if not all(
        dims_equal(a, c) for a, c in zip(x.type.shape[2:], inner.type.shape[1:], strict=True)
    ):
        return None
    m.inner.append(x)
    return m.take(inner, "matmul")


def _unscale(m: _Match, x: TensorVar) -> TensorVar:
    """``x`` without constant scalar multiplications or divisions (their factor recorded)."""
    while True:
        call = m.g.call(x, "multiply", "divide")
        if call is None:
            return x
        a, b = call.args
        c = m.g.scalar(b)
        if c is None and call.op == "multiply":
            a, c = b, m.g.scalar(a)
        if c is None or c == 0.0 or a.type.ndim != x.type.ndim:
            return x
        m.inner.append(x)
        m.scale *= c if call.op == "multiply" else 1.0 / c
        x = a


def _key(m: _Match, kt: TensorVar, fused_t: bool) -> TensorVar | None:
    """``k`` (B, H, T, D) from the scores' right operand ``kt``."""
    kt = _unscale(m, _lift(m, kt))
    if fused_t:
        return kt
    call = m.g.call(kt, "permute_dims")
    nd = kt.type.ndim
    if call is None or permutation(call.op, call.attrs, nd) != (*range(nd - 2), nd - 1, nd - 2):
        return None
    m.inner.append(kt)
    return _unscale(m, call.args[0])


def _scores(m: _Match, x: TensorVar) -> tuple[TensorVar, TensorVar] | None:
    """(q, k) of the scaled scores ``x``."""
    mm = _matmul4(m, _unscale(m, x))
    if mm is None:
        return None
    k = _key(m, mm.args[1], transpose_b(mm.op, mm.attrs))
    q = _unscale(m, _lift(m, mm.args[0]))
    return None if k is None else (q, k)


def _lowest(dtype: str) -> float:
    """The lowest finite value of ``dtype`` (bfloat16's is float32's; unknown to numpy: -inf)."""
    try:
        return float(np.finfo(np.dtype("float32" if dtype == "bfloat16" else dtype)).min)
    except TypeError:
        return -np.inf


def _very_low(c: float | None, dtype: str) -> bool:
    """Whether ``c`` masks a score out exactly: -inf, or at most half the lowest value."""
    return c is not None and (c == -np.inf or c <= 0.5 * _lowest(dtype))


def _is_tril(keep: np.ndarray, s: int, t: int) -> bool:
    """Whether ``keep`` (broadcast over leading axes) is ``tril(ones(S, T), T - S)``."""
    if keep.ndim < 2 or keep.shape[-2:] != (s, t) or t < s:
        return False
    want = np.tril(np.ones((s, t), dtype=bool), t - s)
    return bool(np.all(keep == want))


def _static_st(x: TensorVar) -> tuple[int, int] | None:
    shape = x.type.static_shape()
    return None if shape is None else (shape[-2], shape[-1])


def _causal_op(m: _Match, x: TensorVar, call: OpCall) -> TensorVar | None:
    s, t = x.type.shape[-2:]
    offset = call.attrs.get("offset")
    st = _static_st(x)
    if offset is None or (st is not None and offset == st[1] - st[0] and st[1] >= st[0]):
        ok = True
    else:
        ok = offset == 0 and dims_equal(s, t)
    m.causal = ok
    return call.args[0] if ok else None


def _const_mask(m: _Match, x: TensorVar, call: OpCall) -> TensorVar | None:
    """The unmasked scores of ``where(M, y, c)`` or ``y + A`` (constant triangular masks)."""
    st = _static_st(x)
    dt = str(x.type.dtype)
    if st is None:
        return None
    if call.op == "where":
        keep, y, c = m.g.const(call.args[0]), call.args[1], m.g.scalar(call.args[2])
        if keep is None or keep.dtype != np.bool_ or not _very_low(c, dt):
            return None
    else:
        a, y = call.args
        add = m.g.const(a)
        if add is None:
            add, y = m.g.const(y), a
        if add is None or add.size == 1:
            return None
        keep = add == 0
        if not all(_very_low(float(c), dt) for c in np.unique(add[~keep])):
            return None
    if y.type.ndim != x.type.ndim or not all(
        dims_equal(a, b) for a, b in zip(y.type.shape, x.type.shape, strict=True)
    ):
        return None
    m.causal = _is_tril(keep, *st)
    return y if m.causal else None


def _unmask(m: _Match, x: TensorVar) -> TensorVar | None:
    """The scores before a causal mask (``m.causal`` set), or ``x`` itself without one."""
    call = m.take(x, "causal_mask")
    if call is not None:
        return _causal_op(m, x, call)
    call = m.g.call(x, "where", "add")
    if call is None:
        return x
    m.inner.append(x)
    return _const_mask(m, x, call)


def _guard_of(m: _Match, cond: TensorVar) -> TensorVar | None:
    """``x`` when ``cond = not any(not (x == -inf), last axis, keepdims)`` (torch's guard)."""
    x: TensorVar | None = cond
    for op in ("logical_not", "any", "logical_not", "equal"):
        call = m.take(x, op) if x is not None else None
        if call is None:
            return None
        if op == "any" and not (
            _last_axis(call, call.args[0].type.ndim) and call.attrs.get("keepdims")
        ):
            return None
        if op == "equal" and m.g.scalar(call.args[1]) != -np.inf:
            return None
        x = call.args[0]
    return x


def _unsoftmax(m: _Match, p: TensorVar) -> TensorVar | None:
    """The scores ``x`` of ``p = softmax(x, -1)``, optionally under torch's guard."""
    guard = m.take(p, "where")
    if guard is not None:
        if not m.g.zeros(guard.args[1]):
            return None
        p = guard.args[2]
    sm = m.take(p, "softmax")
    if sm is None or not _last_axis(sm, p.type.ndim):
        return None
    x = sm.args[0]
    if guard is not None and _guard_of(m, guard.args[0]) is not x:
        return None
    return x


def _operands(m: _Match, root: TensorVar) -> tuple[TensorVar, TensorVar, TensorVar] | None:
    """(q, k, v) of the attention computing ``root``."""
    mm = _matmul4(m, root)
    if mm is None or transpose_b(mm.op, mm.attrs):
        return None
    v = _lift(m, mm.args[1])
    x = _unsoftmax(m, _lift(m, mm.args[0]))
    y = None if x is None else _unmask(m, x)
    qk = None if y is None else _scores(m, y)
    return None if qk is None else (qk[0], qk[1], v)


def _shapes_fit(q: TensorVar, k: TensorVar, v: TensorVar, out: TensorVar) -> bool:
    """(B, H, S, D), (B, H, T, D), (B, H, T, Dv) -> (B, H, S, Dv), one float dtype."""
    ts = (q.type, k.type, v.type, out.type)
    if any(t.ndim != 4 or t.dtype != out.type.dtype for t in ts):
        return False
    if not out.type.dtype.is_float:
        return False
    pairs = [(t.shape[i], out.type.shape[i]) for t in ts[:3] for i in (0, 1)]
    pairs += [(q.type.shape[2], out.type.shape[2]), (v.type.shape[3], out.type.shape[3])]
    pairs += [(q.type.shape[3], k.type.shape[3]), (k.type.shape[2], v.type.shape[2])]
    return all(dims_equal(a, b) for a, b in pairs)


def _match(
    g: _Graph, b: Binding, fused: set[int], any_length: bool
) -> tuple[Binding, list[TensorVar]] | None:
    """The binding replacing ``b`` and the values it consumes, or None (``fused``: roots)."""
    m = _Match(g)
    qkv = _operands(m, b.var)
    if qkv is None or not _shapes_fit(*qkv, b.var):
        return None
    q, k, _ = qkv
    lengths = (q.type.shape[2], k.type.shape[2])
    if not any_length and not all(isinstance(d, IntImm) and d.value % 16 == 0 for d in lengths):
        return None
    chain = {id(x): x for x in m.inner}
    if any(i in fused for i in chain if i != id(b.var)):
        return None
    inside = Counter(id(a) for x in chain.values() for a in g.defs[id(x)].args)  # type: ignore[attr-defined]
    if any(g.uses[i] != inside[i] for i in chain if i != id(b.var)):
        return None
    attrs = Attrs({"causal": m.causal, "scale": m.scale, "layout": "BHSD"})
    return Binding(b.var, OpCall("attention", qkv, attrs)), [
        x for i, x in chain.items() if i != id(b.var)
    ]


def fuse_function(func: Function, any_length: bool = False) -> Function:
    """``func`` with every matching attention chain replaced by one ``attention`` call."""
    g = _Graph.of(func)
    dead: set[int] = set()
    roots: set[int] = set()
    bindings: list[Binding] = []
    for b in func.bindings:
        if isinstance(b.value, OpCall) and b.value.op in ("matmul", "reshape"):
            got = None if id(b.var) in dead else _match(g, b, roots, any_length)
            if got is not None:
                b = got[0]
                roots.add(id(b.var))
                dead.update(id(x) for x in got[1])
        bindings.append(b)
    if not dead:
        return func
    kept: list[Binding] = []
    for b in bindings:  # a dead binding reading a removed value (dead itself) goes too
        if id(b.var) in dead or any(id(a) in dead for a in getattr(b.value, "args", ())):
            dead.add(id(b.var))
        else:
            kept.append(b)
    return rebuild(func, kept)


class FuseAttention(ModulePass):
    """Replace softmax-attention chains by one ``attention`` call (see the module).

    Parameters
    ----------
    any_length
        Also fuse chains whose sequence lengths are symbolic or not multiples of 16 (off
        by default: the rule's kernel is slow there, see the module).
    """

    def __init__(self, any_length: bool = False) -> None:
        self.any_length = any_length

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring; under a GPU target (``with target:``) ``mod`` itself."""
        target = Target.current()
        if target is not None and target.is_gpu:
            return mod
        funcs = dict(mod.functions)
        for name, func in graph_functions(mod):
            funcs[name] = fuse_function(func, self.any_length)
        return IRModule(funcs, mod.attrs)

"""Decide which vectorized loops of a GPU kernel become vector loads and stores.

Before: lowered GPU code (flat buffers); loops may be ``ForKind.VECTORIZED``.
After:  a vectorized loop ``for v in range(L)`` whose body is one store ``C[b + v] = f(...)``,
where every load is either ``X[b' + v]`` or independent of ``v``, ``L`` is a supported vector
width for the dtypes involved (2 or 4 lanes of 32-bit values, 2 of 16-bit floats) and every
base ``b``/``b'`` is provably a multiple of ``L`` (so each access is aligned to its vector size),
carries the annotation ``tc.vector_lanes = L`` and is emitted as one vector access per buffer.
Any other vectorized loop becomes an unrolled loop (same meaning, scalar accesses).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arith import Analyzer
from ..ir import (
    Add,
    BufferLoad,
    BufferStore,
    Cast,
    Expr,
    For,
    ForKind,
    IntImm,
    Mul,
    Mutator,
    Node,
    PrimFunc,
    Sub,
    Var,
    post_order_visit,
    substitute,
    uses_var,
)
from ..ir.transform import FunctionPass

VECTOR_ATTR = "tc.vector_lanes"
_LANES = {"float32": (2, 4), "int32": (2, 4), "float16": (2,), "bfloat16": (2,)}


@dataclass(frozen=True)
class VectorPlan:
    """How to emit one vectorized store: its lanes, store base and the vector loads."""

    lanes: int
    store: BufferStore
    store_base: Expr
    loads: tuple[tuple[BufferLoad, Expr], ...]


def divisible(e: Expr, n: int) -> bool:
    """True when integer expression ``e`` is provably a multiple of ``n``."""
    if isinstance(e, IntImm):
        return e.value % n == 0
    if isinstance(e, Mul):
        return divisible(e.a, n) or divisible(e.b, n)
    if isinstance(e, (Add, Sub)):
        return divisible(e.a, n) and divisible(e.b, n)
    if isinstance(e, Cast) and e.value.dtype.is_integer:
        return divisible(e.value, n)
    return False


def _contiguous_base(index: Expr, var: Var, ana: Analyzer) -> Expr | None:
    base = ana.simplify(substitute(index, {var: IntImm(var.dtype, 0)}))
    step = ana.simplify(substitute(index, {var: IntImm(var.dtype, 1)}) - base)
    if isinstance(step, IntImm) and step.value == 1:
        return base
    return None


def vector_plan(loop: For) -> VectorPlan | None:
    """The vector plan of ``loop``, or None when it cannot use vector accesses."""
    store = loop.body
    if not isinstance(store, BufferStore) or not isinstance(loop.extent, IntImm):
        return None
    if not _is_zero(loop.min):
        return None
    lanes = loop.extent.value
    var = loop.loop_var
    ana = Analyzer()
    base = _contiguous_base(store.indices[0], var, ana)
    if (
        base is None
        or not _fits(str(store.buffer.dtype), lanes, store.buffer.scope)
        or not divisible(base, lanes)
    ):
        return None
    loads: list[tuple[BufferLoad, Expr]] = []
    ok = True

    def fn(n: Node) -> None:
        nonlocal ok
        if isinstance(n, BufferLoad) and uses_var(n.indices[0], var):
            b = _contiguous_base(n.indices[0], var, ana)
            if (
                b is None
                or not _fits(str(n.buffer.dtype), lanes, n.buffer.scope)
                or not divisible(b, lanes)
            ):
                ok = False
            else:
                loads.append((n, b))
        elif isinstance(n, BufferLoad) and n.buffer is store.buffer:
            ok = False  # a broadcast read of the written buffer: keep scalar order

    post_order_visit(store.value, fn)
    if not ok or uses_var(base, var):
        return None
    return VectorPlan(lanes, store, base, tuple(loads))


def _fits(dt: str, lanes: int, scope: str = "global") -> bool:
    # register arrays have no alignment guarantee: only global/shared memory is vectorized
    return scope != "local" and lanes in _LANES.get(dt, ())


def _is_zero(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


class _Vectorizer(Mutator):
    def visit_For(self, loop: For) -> For:  # noqa: N802
        loop = self.generic_visit(loop)
        if loop.kind is not ForKind.VECTORIZED:
            return loop
        plan = vector_plan(loop)
        if plan is None:
            return loop.update(kind=ForKind.UNROLLED)
        return loop.update(annotations=loop.annotations.with_item(VECTOR_ATTR, plan.lanes))


class VectorizeGPULoops(FunctionPass):
    """Mark vectorized loops that can use aligned vector accesses; unroll the others."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with its vectorized loops decided."""
        return func.update(body=_Vectorizer().visit(func.body))

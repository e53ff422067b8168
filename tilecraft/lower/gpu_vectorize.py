"""Decide which vectorized loops of a GPU kernel become vector loads and stores.

Before: lowered GPU code (flat buffers); loops may be ``ForKind.VECTORIZED``.
After:  a vectorized loop ``for v in range(L)`` whose body is one store ``C[b + v] = f(...)``,
where every load is either ``X[b' + v]`` or independent of ``v``, carries the annotation
``tc.vector_lanes = L`` when every such access of global or shared memory moves 32, 64 or 128
bits (2 or 4 lanes of 32-bit values, 2 of 64-bit, 2, 4 or 8 of 16-bit, 4, 8 or 16 of 8-bit:
``half8`` and ``char16`` are 128-bit accesses), or is a 256-bit load of shared memory (two
128-bit loads: eight fp32 values staged in shared memory and stored as a ``half8``), its
base ``b``/``b'`` is provably a multiple of ``L`` (so the access is aligned to its vector
size), and at least one access is of global or shared memory. It is emitted as one vector
access per such buffer; accesses of ``local`` buffers (register tiles, with no alignment
guarantee) stay one scalar per lane, so a register
tile is stored back, or filled, with vector accesses of memory. Any other vectorized loop
becomes an unrolled loop (same meaning, scalar accesses).

A load under a ``Select`` (``if_then_else``: padding, masking) is read only by the lanes whose
condition holds. When every condition on its way is one value for all lanes (independent of
``v``) it stays one vector access, *predicated as a whole* by their conjunction (its plan
``guard``); when one changes between lanes it is *split*: one scalar load per lane, under that
lane's condition. So a padded fetch never reads past its operand's end.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arith import Analyzer
from ..ir import (
    Add,
    And,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    DataType,
    Expr,
    FloatImm,
    For,
    ForKind,
    IntImm,
    Mul,
    Mutator,
    Not,
    PrimFunc,
    Select,
    Sub,
    Var,
    substitute,
    uses_var,
)
from ..ir.transform import FunctionPass
from ..ir.visitor import iter_children

VECTOR_ATTR = "tc.vector_lanes"
_VECTOR_BITS = (32, 64, 128)
_WIDE_LOAD_BITS = 256  # a shared-memory load only: two 128-bit loads (eight fp32 staged lanes)
_SHARED = ("shared", "shared.dyn")


@dataclass(frozen=True)
class VectorPlan:
    """How to emit one vectorized store: its lanes, store base and the vector loads, each with
    its base and its guard (the lane-independent condition it is read under; None: always)."""

    lanes: int
    store: BufferStore
    store_base: Expr
    loads: tuple[tuple[BufferLoad, Expr, Expr | None], ...]


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
    if base is None or not _fits(store.buffer.dtype, lanes, store.buffer.scope, base, False):
        return None
    loads: list[tuple[BufferLoad, Expr, Expr | None]] = []
    ok = True

    def walk(e: Expr, guards: tuple[Expr, ...]) -> None:
        nonlocal ok
        if isinstance(e, Select):
            walk(e.condition, guards)
            walk(e.true_value, (*guards, e.condition))
            walk(e.false_value, (*guards, Not(e.condition)))
            return
        if isinstance(e, BufferLoad) and uses_var(e.indices[0], var):
            b = _contiguous_base(e.indices[0], var, ana)
            if b is None or not _fits(e.buffer.dtype, lanes, e.buffer.scope, b, True):
                ok = False
            elif _lane_uniform(guards, var):
                loads.append((e, b, _guard_of(guards)))
            # else: split, one scalar load per lane under its own condition
        elif isinstance(e, BufferLoad) and e.buffer is store.buffer:
            ok = False  # a broadcast read of the written buffer: keep scalar order
        for child in iter_children(e):
            if isinstance(child, Expr):
                walk(child, guards)

    walk(store.value, ())
    memory = store.buffer.scope != "local" or any(ld.buffer.scope != "local" for ld, *_ in loads)
    if not ok or not memory or uses_var(base, var):
        return None
    return VectorPlan(lanes, store, base, tuple(loads))


def copy_source(value: Expr, var: Var) -> tuple[BufferLoad, Expr | None] | None:
    """The load a copy loop over ``var`` moves and the guard it moves it under: ``G[...]``
    (no guard) or ``if_then_else(c, G[...], 0)`` with ``c`` one value for all lanes (a padded
    fetch: where ``c`` fails, zeros). None for anything else."""
    if isinstance(value, BufferLoad):
        return value, None
    if (
        isinstance(value, Select)
        and isinstance(value.true_value, BufferLoad)
        and isinstance(value.false_value, (IntImm, FloatImm))
        and value.false_value.value == 0
        and not uses_var(value.condition, var)
    ):
        return value.true_value, value.condition
    return None


def _lane_uniform(guards: tuple[Expr, ...], var: Var) -> bool:
    """True when the conditions a load is read under are one value for all lanes."""
    return not any(uses_var(g, var) for g in guards)


def _guard_of(guards: tuple[Expr, ...]) -> Expr | None:
    """The conjunction of ``guards`` (None: none)."""
    out: Expr | None = None
    for g in guards:
        out = g if out is None else And(out, g)
    return out


def is_vector_access(buf: Buffer) -> bool:
    """True when a planned access of ``buf`` is one vector access (else one scalar per lane)."""
    return buf.scope != "local"


def _fits(dt: DataType, lanes: int, scope: str, base: Expr, load: bool) -> bool:
    # register arrays have no alignment guarantee: their lanes stay scalars (any lanes fit)
    if scope == "local":
        return True
    bits = dt.bits * lanes
    return (
        dt.lanes == 1
        and not dt.is_bool
        and (bits in _VECTOR_BITS or (bits == _WIDE_LOAD_BITS and load and scope in _SHARED))
        and divisible(base, lanes)
    )


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

"""The arithmetic checks of :func:`tilecraft.ir.verify`: bounds, declared regions, bindings.

Reached from ``tilecraft.ir.verify`` through ``importlib`` at call time (``ir`` is a layer
below ``arith``). For every load and store, every index must lie in ``[0, extent)`` of its
buffer's dimension and, for an access made directly in a block, inside the one region the
block declares for that buffer (a buffer declared twice is not checked against regions); for
every block realize, every iterator binding must lie in the iterator's domain.

Each check first tries to prove the access in range with an :class:`Analyzer` that knows the
loop ranges, the block bindings, the pure let values and the guards around the access (if
conditions, block predicates, the "first reduction step" condition of an ``init``, the
condition of a ``select`` branch and the left side of ``and``/``or``). When that fails, an error
is raised only with a witness from :mod:`._witness`: an iteration that provably runs and is
out of range for every input that runs its loops. A check that cannot decide says nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from functools import partial

from ..errors import IRError
from ..ir import (
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    IterKind,
    LetStmt,
    Node,
    Not,
    Or,
    PrimFunc,
    Range,
    Select,
    Stmt,
    Var,
    structural_equal,
    substitute,
)
from ..ir.verify import access_text, region_text, verify_error
from ..ir.visitor import iter_children, node_fields
from ._witness import ANALYSIS_ERRORS, Loop, Witness, find_witness, proves, same_dtype
from .analyzer import Analyzer

_Task = Callable[[], object]
_Report = Callable[[str, Witness, Expr], IRError]


def check_bounds(func: PrimFunc) -> None:
    """Raise :class:`~tilecraft.errors.IRError` for a provably out-of-range access or binding."""
    _Bounds(func).run()


class _Bounds:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.ana = Analyzer()
        self.loops: list[Loop] = []
        self.subst: dict[Var, Expr] = {}
        self.guards: list[Expr] = []
        self.blocks: list[Block] = []
        self.todo: list[Stmt | _Task] = []
        self.cache: dict[int, tuple[Expr, Expr]] = {}
        # checks that passed, keyed by the ids of their expressions; cleared whenever the
        # assumptions change (the expressions are kept so that their ids stay unique)
        self.proved: dict[tuple[int, ...], tuple[Expr, Expr, Expr, tuple[Expr, ...]]] = {}
        seen: dict[int, Var] = {}
        for buf in func.buffer_params:
            for v in buf.shape_vars():
                seen.setdefault(id(v), v)
        self.sizes = list(seen.values())
        for v in self.sizes:
            self.ana.bind(
                v, Range(IntImm(v.dtype, 0), IntImm(v.dtype, 2 ** (v.dtype.bits - 1) - 1))
            )

    def fail(self, message: str) -> IRError:
        return verify_error(self.func, self.blocks[-1] if self.blocks else None, message)

    def loop_space(self, e: Expr) -> Expr:
        """``e`` with block iterators and pure let variables replaced by their values."""
        hit = self.cache.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out: Expr = e
        if self.subst:
            # on failure ``e`` keeps the variable, which then counts as unknown: still sound
            with contextlib.suppress(*ANALYSIS_ERRORS):
                out = substitute(e, self.subst)
        self.cache[id(e)] = (e, out)
        return out

    def bind_value(self, var: Var, value: Expr) -> None:
        """Replace ``var`` by ``value`` until the statements pushed after this are done."""
        previous = self.subst.get(var)
        self.subst[var] = value
        self.cache.clear()
        self.proved.clear()
        with contextlib.suppress(*ANALYSIS_ERRORS):
            self.ana.bind(var, value)
        self.todo.append(lambda: self._unbind(var, previous))

    def _unbind(self, var: Var, previous: Expr | None) -> None:
        if previous is None:
            self.subst.pop(var, None)
        else:
            self.subst[var] = previous
        self.cache.clear()
        self.proved.clear()

    def assume(self, cond: Expr) -> None:
        """Assume ``cond`` (in loop space) until the statements pushed after this are done."""
        if isinstance(cond, IntImm) and cond.value:
            return
        self.guards.append(cond)  # kept even when the analyzer cannot use it: witnesses need it
        self.proved.clear()
        scope = contextlib.ExitStack()
        with contextlib.suppress(*ANALYSIS_ERRORS):
            scope.enter_context(self.ana.constraint(cond))

        def leave() -> None:
            scope.close()
            self.guards.pop()
            self.proved.clear()

        self.todo.append(leave)

    # walk --------------------------------------------------------------------------------
    def run(self) -> None:
        self.todo.append(self.func.body)
        while self.todo:
            item = self.todo.pop()
            if isinstance(item, Stmt):
                self.visit(item)
            else:
                item()

    def visit(self, s: Stmt) -> None:
        if isinstance(s, BufferStore):
            self.exprs((*s.indices, s.value))
            self.access(s.buffer, s.indices, True, ())
        elif isinstance(s, For):
            self.exprs((s.min, s.extent))
            lo, ext = self.loop_space(s.min), self.loop_space(s.extent)
            self.loops.append(Loop(s.loop_var, lo, ext))
            self.todo.append(self.loops.pop)
            self.todo.append(s.body)
            self.proved.clear()
            with contextlib.suppress(*ANALYSIS_ERRORS):
                self.ana.bind(s.loop_var, Range(s.min, s.extent))
        elif isinstance(s, IfThenElse):
            self.exprs((s.condition,))
            cond = self.loop_space(s.condition)
            if s.else_case is not None:
                self.todo.append(partial(self.guarded, Not(cond), s.else_case))
            self.todo.append(partial(self.guarded, cond, s.then_case))
        elif isinstance(s, LetStmt):
            self.exprs((s.value,))
            if s.var.dtype.is_integer and not _has_load(s.value):
                self.bind_value(s.var, self.loop_space(s.value))
            self.todo.append(s.body)
        elif isinstance(s, BlockRealize):
            self.realize(s)
        else:
            self.generic(s)

    def generic(self, s: Stmt) -> None:
        """Statements without special meaning here: check their expressions, visit children."""
        children: list[Stmt] = []
        for name in node_fields(type(s)):
            value = getattr(s, name)
            for v in value if isinstance(value, tuple) else (value,):
                if isinstance(v, Stmt):
                    children.append(v)
                elif isinstance(v, Expr):
                    self.exprs((v,))
                elif isinstance(v, Buffer):
                    self.exprs(v.shape)
        self.todo.extend(reversed(children))

    def realize(self, s: BlockRealize) -> None:
        b = s.block
        self.exprs((s.predicate,))
        pred = self.loop_space(s.predicate)
        values = [self.loop_space(v) for v in s.iter_values]
        doms = [(self.loop_space(iv.dom.min), self.loop_space(iv.dom.min + iv.dom.extent))
                for iv in b.iter_vars]  # fmt: skip
        self.assume(pred)
        self.exprs(s.iter_values)  # in the enclosing block, only where the predicate holds
        self.blocks.append(b)
        self.todo.append(self.blocks.pop)
        for iv, value, (lo, hi) in zip(b.iter_vars, values, doms, strict=True):
            self.binding(iv.var, value, lo, hi)
        for iv, value in zip(b.iter_vars, values, strict=True):
            self.bind_value(iv.var, value)
        self.todo.append(b.body)
        if b.init is not None:
            first = [iv.var.eq(iv.dom.min) for iv in b.iter_vars if iv.kind is IterKind.REDUCE]
            if first:  # the init runs at the first reduction step only
                self.todo.append(partial(self.guarded, self.loop_space(_all(first)), b.init))
            else:
                self.todo.append(b.init)

    def guarded(self, cond: Expr, stmt: Stmt) -> None:
        """Visit ``stmt`` assuming ``cond``."""
        self.assume(cond)
        self.todo.append(stmt)

    # checks ------------------------------------------------------------------------------
    def binding(self, var: Var, value: Expr, lo: Expr, hi: Expr) -> None:
        def report(side: str, w: Witness, _: Expr) -> IRError:
            got = w.values()
            shown = _eval_or_text(value, got)
            end = _shown(hi)
            return self.fail(
                f"iterator {var.name!r} is bound to {value!r}, which reaches {shown} outside "
                f"its domain [{lo!r}, {end}) {w.describe()}"
            )

        self.check_range(value, lo, hi, (), report)

    def access(
        self, buf: Buffer, indices: Sequence[Expr], store: bool, eguards: tuple[Expr, ...]
    ) -> None:
        kind = "store" if store else "load"
        for d, (idx, ext) in enumerate(zip(indices, buf.shape, strict=True)):

            def report(side: str, w: Witness, e: Expr, d: int = d, ext: Expr = ext) -> IRError:
                shown = _eval_or_text(e, w.values())
                return self.fail(
                    f"{kind} {access_text(buf, indices)} is out of bounds: index {d} reaches "
                    f"{shown}, outside [0, {ext!r}) of buffer {buf.name!r} {w.describe()}"
                )

            self.check_range(self.loop_space(idx), IntImm(idx.dtype, 0), self.loop_space(ext),
                             eguards, report)  # fmt: skip
        region = self.region_of(buf, store)
        if region is not None:
            self.in_region(buf, indices, region, kind, eguards)

    def region_of(self, buf: Buffer, store: bool) -> BufferRegion | None:
        """The one region the innermost block declares for ``buf``, if exactly one."""
        if not self.blocks:
            return None
        b = self.blocks[-1]
        found = [r for r in (*b.writes, *(() if store else b.reads)) if r.buffer is buf]
        if not found or any(not structural_equal(found[0], r) for r in found[1:]):
            return None
        return found[0]

    def in_region(
        self,
        buf: Buffer,
        indices: Sequence[Expr],
        region: BufferRegion,
        kind: str,
        eguards: tuple[Expr, ...],
    ) -> None:
        for idx, rng, ext in zip(indices, region.region, buf.shape, strict=True):
            if _is_int(rng.extent, 1) and _same(idx, rng.min):
                continue  # the region is the accessed point itself
            if _is_int(rng.min, 0) and _same(rng.extent, ext):
                continue  # the whole dimension: the bounds check covers it

            def report(side: str, w: Witness, e: Expr) -> IRError:
                return self.fail(
                    f"{kind} {access_text(buf, indices)} lies outside the region "
                    f"{region_text(region)} the block declares for {buf.name!r} {w.describe()}"
                )

            lo = self.loop_space(rng.min)
            hi = self.loop_space(rng.min + rng.extent)
            self.check_range(self.loop_space(idx), lo, hi, eguards, report)

    def check_range(
        self, e: Expr, lo: Expr, hi: Expr, eguards: tuple[Expr, ...], report: _Report
    ) -> None:
        """Raise ``report(...)`` if ``e`` provably leaves ``[lo, hi)`` at some iteration."""
        key = (id(e), id(lo), id(hi), *map(id, eguards))
        done = self.proved.get(key)
        if done is not None and done[0] is e and done[1] is lo and done[2] is hi:
            return  # the same check passed under the same assumptions
        self.proved[key] = (e, lo, hi, eguards)
        e_lo, lo = same_dtype(e, lo)
        e_hi, hi = same_dtype(e, hi)
        below_ok, above_ok = self.in_range(e_lo, lo, e_hi, hi, eguards)
        guards = [*self.guards, *eguards]
        one = IntImm(e_lo.dtype, 1)
        for ok, d, side in ((above_ok, e_hi - hi, "above"), (below_ok, lo - e_lo - one, "below")):
            if ok:
                continue
            w = find_witness(self.ana, d, self.loops, guards, self.sizes)
            if w is not None:
                raise report(side, w, e)

    def in_range(
        self, e_lo: Expr, lo: Expr, e_hi: Expr, hi: Expr, eguards: tuple[Expr, ...]
    ) -> tuple[bool, bool]:
        """(provably ``e >= lo``, provably ``e < hi``) under the current assumptions."""
        if not eguards and isinstance(lo, IntImm) and isinstance(hi, IntImm):
            b = self.bound(e_lo)
            if b is not None and b[0] >= lo.value and b[1] < hi.value:
                return True, True
        with contextlib.ExitStack() as scope:
            for g in eguards:
                with contextlib.suppress(*ANALYSIS_ERRORS):
                    scope.enter_context(self.ana.constraint(g))
            return proves(self.ana, e_lo >= lo), proves(self.ana, e_hi < hi)

    def bound(self, e: Expr) -> tuple[float, float] | None:
        """Constant bounds of ``e``, or None when the analysis cannot handle it."""
        try:
            b = self.ana.const_int_bound(e)
        except ANALYSIS_ERRORS:
            return None
        return b.min_value, b.max_value

    # expressions -------------------------------------------------------------------------
    def exprs(self, roots: Sequence[Expr]) -> None:
        """Check every load inside ``roots``, under the conditions guarding its evaluation."""
        stack: list[tuple[Node, tuple[Expr, ...]]] = [(r, ()) for r in roots]
        while stack:
            n, g = stack.pop()
            if isinstance(n, (Var, IntImm, FloatImm)):
                continue
            if isinstance(n, BufferLoad):
                self.access(n.buffer, n.indices, False, g)
                stack.extend((i, g) for i in n.indices)
            elif isinstance(n, Select):
                c = self.loop_space(n.condition)
                stack.append((n.condition, g))
                stack.append((n.true_value, (*g, c)))
                stack.append((n.false_value, (*g, Not(c))))
            elif isinstance(n, (And, Or)):
                c = self.loop_space(n.a)
                stack.append((n.a, g))
                stack.append((n.b, (*g, c if isinstance(n, And) else Not(c))))
            else:
                stack.extend((c, g) for c in iter_children(n))


def _all(conds: list[Expr]) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = And(out, c)
    return out


def _is_int(e: Expr, value: int) -> bool:
    return isinstance(e, IntImm) and e.value == value


def _same(a: Expr, b: Expr) -> bool:
    """``a`` and ``b`` are the same expression (identical, or equal integer constants)."""
    return a is b or (isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value)


def _has_load(e: Expr) -> bool:
    stack: list[Node] = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, BufferLoad):
            return True
        stack.extend(iter_children(n))
    return False


def _eval_or_text(e: Expr, env: dict[Var, int]) -> str:
    from .evaluate import EvaluationError, evaluate

    try:
        return str(evaluate(e, env))
    except EvaluationError:
        return repr(e)


def _shown(e: Expr) -> str:
    """``e`` simplified for a message."""
    try:
        return repr(Analyzer().simplify(e))
    except ANALYSIS_ERRORS:
        return repr(e)

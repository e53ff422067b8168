"""Seeded fuzzing of ``tc.ir.verify`` against a brute-force interpreter (no false positives).

Random small programs (loop nests with constant or loop-dependent bounds, ``if``/``else``,
``let``, ``select``-guarded loads, blocks with random bindings, domains, predicates and
regions) are run by a reference interpreter that visits every iteration and records each
out-of-bounds access, access outside the innermost block's declared region and binding outside
its domain. ``verify`` may miss such a violation, but whenever it reports one, the interpreter
must have seen one of that kind; and it only ever raises ``IRError``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest

from tilecraft import ir
from tilecraft.arith import evaluate
from tilecraft.errors import IRError
from tilecraft.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    IterVar,
    LetStmt,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    const,
)

F32 = "float32"


class Gen:
    """Random programs over buffers A (8,), B (3, 4) and a scalar output O (6,)."""

    def __init__(self, seed: int, safe: bool = False, symbolic: bool = False) -> None:
        self.rng = random.Random(seed)
        self.safe = safe  # every access and binding guarded or clamped into range
        self.n = Var("n") if symbolic else None  # A has n elements; loops may run n times
        a_len = self.n if self.n is not None else const(8)
        self.bufs = [Buffer("A", (a_len,), F32), Buffer("B", (const(3), const(4)), F32)]
        self.out = Buffer("O", (const(6),), F32)
        self.count = 0

    def var(self, prefix: str) -> Var:
        self.count += 1
        return Var(f"{prefix}{self.count}")

    def index(self, scope: list[Var], depth: int = 2) -> Expr:
        r = self.rng
        if depth == 0 or not scope or r.random() < 0.3:
            if self.n is not None and r.random() < 0.1:
                return self.n - const(r.randrange(0, 2))
            return r.choice(scope) if scope and r.random() < 0.6 else const(r.randrange(-2, 9))
        a, b = self.index(scope, depth - 1), self.index(scope, depth - 1)
        pick = r.random()
        if pick < 0.35:
            return a + b
        if pick < 0.5:
            return a - b
        if pick < 0.6:
            return a * const(r.choice([2, 3, -1]))
        if pick < 0.7:
            return ir.FloorDiv(a, const(r.choice([2, 3])))
        if pick < 0.8:
            return ir.FloorMod(a, const(r.choice([2, 4])))
        if pick < 0.9:
            return ir.Min(a, b) if r.random() < 0.5 else ir.Max(a, b)
        return ir.Select(self.cond(scope), a, b)

    def cond(self, scope: list[Var]) -> Expr:
        r = self.rng
        a, b = self.index(scope, 1), self.index(scope, 1)
        c = r.choice([ir.LT, ir.LE, ir.GE, ir.EQ, ir.NE])(a, b)
        if r.random() < 0.2:
            return ir.And(c, ir.LT(self.index(scope, 1), const(r.randrange(0, 8))))
        return c

    def load(self, scope: list[Var]) -> Expr:
        buf = self.rng.choice(self.bufs)
        idx = [self.index(scope) for _ in buf.shape]
        if self.safe and self.rng.random() < 0.4:
            last = [e - const(1) for e in buf.shape]
            idx = [ir.Min(ir.Max(i, const(0)), e) for i, e in zip(idx, last, strict=True)]
            return BufferLoad(buf, tuple(idx))
        value: Expr = BufferLoad(buf, tuple(idx))
        if self.safe:
            return ir.Select(self.in_range(idx, buf.shape), value, const(0.0, F32))
        if self.rng.random() < 0.3:
            value = ir.Select(self.cond(scope), value, const(0.0, F32))
        return value

    def in_range(
        self, idx: list[Expr], ends: tuple[Expr, ...], starts: tuple[Expr, ...] = ()
    ) -> Expr:
        """A condition, phrased at random, that every ``idx[d]`` is in ``[starts[d], ends[d])``."""
        conds: list[Expr] = []
        for d, (i, end) in enumerate(zip(idx, ends, strict=True)):
            lo = starts[d] if starts else const(0)
            if self.rng.random() < 0.5:
                conds.append(ir.And(ir.GE(i, lo), ir.LT(i, end)))
            else:
                conds.append(ir.Not(ir.Or(ir.LT(i, lo), ir.LE(end, i))))
        out = conds[0]
        for c in conds[1:]:
            out = ir.And(out, c)
        return out

    def stmt(self, scope: list[Var], depth: int) -> Stmt:
        r = self.rng
        pick = r.random() if depth > 0 else 0.0
        if pick < 0.3:
            i = self.index(scope)
            store = BufferStore(self.out, self.load(scope), (i,))
            return IfThenElse(self.in_range([i], self.out.shape), store) if self.safe else store
        if pick < 0.5:
            v = self.var("i")
            lo = const(r.randrange(0, 3))
            ext: Expr = const(r.randrange(0, 5))
            if scope and r.random() < 0.3:
                ext = r.choice(scope) + const(1)
            elif self.n is not None and r.random() < 0.4:
                ext = self.n - const(r.randrange(0, 2))
            return For(v, lo, ext, ForKind.SERIAL, self.stmt([*scope, v], depth - 1))
        if pick < 0.65:
            cond = self.cond(scope)
            other = self.stmt(scope, depth - 1) if r.random() < 0.5 else None
            return IfThenElse(cond, self.stmt(scope, depth - 1), other)
        if pick < 0.75:
            x = self.var("x")
            return LetStmt(x, self.index(scope), self.stmt([*scope, x], depth - 1))
        if pick < 0.9:
            return self.block(scope, depth)
        return SeqStmt((self.stmt(scope, depth - 1), self.stmt(scope, depth - 1)))

    def block(self, scope: list[Var], depth: int) -> Stmt:
        r = self.rng
        ivs, values = [], []
        for _ in range(r.randrange(1, 3)):
            v = self.var("v")
            ivs.append(IterVar(v, Range(const(r.randrange(0, 2)), const(r.randrange(1, 6))),
                               IterKind.SPATIAL))  # fmt: skip
            values.append(self.index(scope))
        inner = [iv.var for iv in ivs]
        body = self.stmt(inner, depth - 1)
        reads, writes = [], [BufferRegion.full(self.out)]
        for buf in self.bufs:
            if self.safe or r.random() < 0.5:
                reads.append(BufferRegion.full(buf))
            else:
                reads.append(BufferRegion(buf, tuple(
                    Range(self.index(inner, 1), const(r.randrange(1, 4))) for _ in buf.shape
                )))  # fmt: skip
        if not self.safe and r.random() < 0.3:
            writes = [BufferRegion.point(self.out, [self.index(inner, 1)])]
        self.count += 1
        blk = Block(f"b{self.count}", tuple(ivs), tuple(reads), tuple(writes), body)
        pred = self.cond(scope) if r.random() < 0.3 else const(True, "bool")
        if self.safe:
            fits = self.in_range(values, tuple(iv.dom.min + iv.dom.extent for iv in ivs),
                                 tuple(iv.dom.min for iv in ivs))  # fmt: skip
            pred = ir.And(pred, fits) if r.random() < 0.5 else ir.And(fits, pred)
        return BlockRealize(tuple(values), pred, blk)

    def func(self) -> PrimFunc:
        return PrimFunc((*self.bufs, self.out), self.stmt([], 4))


class Interp:
    """Run every iteration; record the kinds of violation met."""

    def __init__(self) -> None:
        self.found: set[tuple[str, str]] = set()
        self.steps = 0

    def ev(self, e: Expr, env: dict[Var, int]) -> int:
        return int(evaluate(e, env))

    def expr(self, e: Expr, env: dict[Var, int], regions: dict[int, BufferRegion]) -> None:
        if isinstance(e, BufferLoad):
            self.access(e.buffer, e.indices, env, regions)
            for i in e.indices:
                self.expr(i, env, regions)
        elif isinstance(e, ir.Select):
            self.expr(e.condition, env, regions)
            branch = e.true_value if self.ev(e.condition, env) else e.false_value
            self.expr(branch, env, regions)
        elif isinstance(e, (ir.And, ir.Or)):
            self.expr(e.a, env, regions)
            if bool(self.ev(e.a, env)) == isinstance(e, ir.And):
                self.expr(e.b, env, regions)
        else:
            for c in ir.visitor.iter_children(e):
                if isinstance(c, Expr):
                    self.expr(c, env, regions)

    def access(
        self,
        buf: Buffer,
        idx: tuple[Expr, ...],
        env: dict[Var, int],
        regions: dict[int, BufferRegion],
    ) -> None:
        vals = [self.ev(i, env) for i in idx]
        ends = [self.ev(e, env) for e in buf.shape]
        if any(not 0 <= v < e for v, e in zip(vals, ends, strict=True)):
            self.found.add(("out of bounds", buf.name))
        region = regions.get(id(buf))
        if region is not None:
            for v, rng in zip(vals, region.region, strict=True):
                lo = self.ev(rng.min, env)
                if not lo <= v < lo + self.ev(rng.extent, env):
                    self.found.add(("outside the region", buf.name))

    def run(self, s: Stmt, env: dict[Var, int], regions: dict[int, BufferRegion]) -> None:
        self.steps += 1
        if self.steps > 20_000:
            raise RecursionError("program too long for the fuzz interpreter")
        if isinstance(s, BufferStore):
            for e in (*s.indices, s.value):
                self.expr(e, env, regions)
            self.access(s.buffer, s.indices, env, regions)
        elif isinstance(s, For):
            lo, ext = self.ev(s.min, env), self.ev(s.extent, env)
            for v in range(lo, lo + ext):
                self.run(s.body, {**env, s.loop_var: v}, regions)
        elif isinstance(s, IfThenElse):
            self.expr(s.condition, env, regions)
            if self.ev(s.condition, env):
                self.run(s.then_case, env, regions)
            elif s.else_case is not None:
                self.run(s.else_case, env, regions)
        elif isinstance(s, LetStmt):
            self.expr(s.value, env, regions)
            self.run(s.body, {**env, s.var: self.ev(s.value, env)}, regions)
        elif isinstance(s, SeqStmt):
            for c in s.stmts:
                self.run(c, env, regions)
        elif isinstance(s, BlockRealize):
            self.realize(s, env, regions)

    def realize(
        self, s: BlockRealize, env: dict[Var, int], regions: dict[int, BufferRegion]
    ) -> None:
        self.expr(s.predicate, env, regions)
        if not self.ev(s.predicate, env):
            return
        b = s.block
        inner = dict(env)
        for iv, value in zip(b.iter_vars, s.iter_values, strict=True):
            self.expr(value, env, regions)
            v = self.ev(value, env)
            lo = self.ev(iv.dom.min, env)
            if not lo <= v < lo + self.ev(iv.dom.extent, env):
                self.found.add(("outside its domain", iv.var.name))
            inner[iv.var] = v
        own: dict[int, BufferRegion] = {}
        for r in (*b.reads, *b.writes):
            own.setdefault(id(r.buffer), r)
        dup = {id(r.buffer) for r in b.reads} & {id(r.buffer) for r in b.writes}
        mine = {k: r for k, r in own.items() if k not in dup}
        self.run(b.body, inner, mine)


def _kind(message: str) -> tuple[str, str]:
    """(kind, buffer or iterator name) of a verify message."""
    name = re.search(r"(?:of buffer|declares for|iterator) '([^']+)'", message)
    for kind in ("out of bounds", "outside the region", "outside its domain"):
        if kind in message and name is not None:
            return kind, name.group(1)
    return "structure", ""


def _programs(seeds: range) -> Iterator[tuple[int, PrimFunc]]:
    for seed in seeds:
        yield seed, Gen(seed).func()


def _check(seeds: range, symbolic: bool = False) -> dict[str, int]:
    """Fuzz ``seeds``; symbolic programs are interpreted at the size a report gives (or 4)."""
    stats = {"programs": 0, "reported": 0, "violating": 0}
    for seed in seeds:
        gen = Gen(seed, symbolic=symbolic)
        func = gen.func()
        message = _report(func)
        env = {} if gen.n is None else {gen.n: _example(message)}
        interp = Interp()
        try:
            interp.run(func.body, env, {})
        except RecursionError:
            continue
        stats["programs"] += 1
        stats["violating"] += bool(interp.found)
        if message is None:
            continue
        stats["reported"] += 1
        kind = _kind(message)
        assert kind[0] != "structure", f"seed {seed}: {message}"
        assert kind in interp.found, (
            f"seed {seed}: verify reports {kind} but no iteration does it:\n{message}\n"
            f"{func.script()}"
        )
    return stats


def _example(message: str | None) -> int:
    """The size ``n`` a report gives as its example (``(with n = 3)``); 4 without a report."""
    if message is None:
        return 4
    found = re.search(r"\(with n = (\d+)\)", message)
    return int(found.group(1)) if found else 4


def _report(func: PrimFunc) -> str | None:
    """The message of verify's error, or None when it accepts ``func``."""
    try:
        ir.verify(func)
    except IRError as e:
        return str(e)
    return None


def test_verify_reports_only_real_violations() -> None:
    stats = _check(range(400))
    assert stats["programs"] > 350
    assert stats["reported"] > 40  # the generator does produce real violations verify proves
    assert stats["violating"] >= stats["reported"]


@pytest.mark.parametrize("symbolic", [False, True])
def test_verify_accepts_guarded_and_clamped_programs(symbolic: bool) -> None:
    for seed in range(200):
        gen = Gen(seed, safe=True, symbolic=symbolic)
        func = gen.func()
        for size in (1, 2, 5) if gen.n is not None else (0,):
            interp = Interp()
            interp.run(func.body, {} if gen.n is None else {gen.n: size}, {})
            assert not interp.found, f"seed {seed}: the generator made an unsafe program"
        ir.verify(func)


@pytest.mark.slow
@pytest.mark.parametrize("symbolic", [False, True])
def test_verify_accepts_guarded_and_clamped_programs_many(symbolic: bool) -> None:
    for seed in range(200, 5_200):
        ir.verify(Gen(seed, safe=True, symbolic=symbolic).func())


def test_verify_reports_only_real_violations_with_symbolic_sizes() -> None:
    stats = _check(range(300), symbolic=True)
    assert stats["reported"] > 30


@pytest.mark.slow
def test_verify_reports_only_real_violations_many() -> None:
    stats = _check(range(400, 20_400))
    assert stats["programs"] > 15_000
    stats = _check(range(300, 10_300), symbolic=True)
    assert stats["programs"] > 8_000

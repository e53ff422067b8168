"""A tiny reference interpreter of PrimFuncs, used by the schedule-primitive tests.

It executes blocks with TensorIR semantics (iterators bound from their values, the init
statement run when every reduce iterator is at its minimum) so that a scheduled function can
be compared numerically with the unscheduled one without a C compiler. Intermediate buffers
start filled with NaN so that reading an element nobody wrote shows up in the comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

import tilecraft as tc
from tilecraft import ir

_BIN: dict[type, Callable[[object, object], object]] = {
    ir.Add: lambda a, b: a + b,
    ir.Sub: lambda a, b: a - b,
    ir.Mul: lambda a, b: a * b,
    ir.Min: min,
    ir.Max: max,
    ir.FloorDiv: lambda a, b: a // b,
    ir.FloorMod: lambda a, b: a % b,
    ir.LT: lambda a, b: a < b,
    ir.LE: lambda a, b: a <= b,
    ir.GT: lambda a, b: a > b,
    ir.GE: lambda a, b: a >= b,
    ir.EQ: lambda a, b: a == b,
    ir.NE: lambda a, b: a != b,
}
_CALL = {
    "exp": math.exp,
    "sqrt": math.sqrt,
    "tanh": math.tanh,
    "log": math.log,
    "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "fabs": abs,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
}


class _Interp:
    def __init__(self, arrays: dict[int, np.ndarray]) -> None:
        self.mem = arrays
        self.env: dict[int, object] = {}

    def ev(self, e: ir.Expr) -> object:
        t = type(e)
        if t is ir.Var:
            return self.env[id(e)]
        if t in (ir.IntImm, ir.FloatImm):
            return (
                e.value
                if not e.dtype.is_float
                else np.float32(e.value)
                if e.dtype.bits == 32
                else e.value
            )
        if t is ir.BufferLoad:
            return self.mem[id(e.buffer)][tuple(int(self.ev(i)) for i in e.indices)]
        if t in _BIN:
            return _BIN[t](self.ev(e.a), self.ev(e.b))
        if t is ir.Div:
            a, b = self.ev(e.a), self.ev(e.b)
            return a / b if e.dtype.is_float else int(a / b)
        if t is ir.And:
            return bool(self.ev(e.a)) and bool(self.ev(e.b))
        if t is ir.Or:
            return bool(self.ev(e.a)) or bool(self.ev(e.b))
        if t is ir.Not:
            return not self.ev(e.a)
        if t is ir.Select:
            return self.ev(e.true_value) if self.ev(e.condition) else self.ev(e.false_value)
        if t is ir.Cast:
            v = self.ev(e.value)
            return np.dtype(str(e.dtype)).type(v) if e.dtype.is_float else int(v)
        if t is ir.Call:
            return np.float32(_CALL[e.op](*(float(self.ev(a)) for a in e.args)))
        raise NotImplementedError(t.__name__)

    def run(self, s: ir.Stmt) -> None:
        t = type(s)
        if t is ir.SeqStmt:
            for c in s.stmts:
                self.run(c)
        elif t is ir.For:
            lo = int(self.ev(s.min))
            for v in range(lo, lo + int(self.ev(s.extent))):
                self.env[id(s.loop_var)] = v
                self.run(s.body)
        elif t is ir.BufferStore:
            idx = tuple(int(self.ev(i)) for i in s.indices)
            self.mem[id(s.buffer)][idx] = self.ev(s.value)
        elif t is ir.BlockRealize:
            if not self.ev(s.predicate):
                return
            blk = s.block
            vals = [self.ev(v) for v in s.iter_values]
            for iv, v in zip(blk.iter_vars, vals, strict=False):
                self.env[id(iv.var)] = v
            for b in blk.alloc_buffers:
                shape = tuple(int(self.ev(x)) for x in b.shape)
                self.mem[id(b)] = np.full(shape, np.nan, dtype=str(b.dtype))
            if blk.init is not None and all(
                v == self.ev(iv.dom.min)
                for iv, v in zip(blk.iter_vars, vals, strict=False)
                if iv.kind is ir.IterKind.REDUCE
            ):
                self.run(blk.init)
            self.run(blk.body)
        elif t is ir.IfThenElse:
            if self.ev(s.condition):
                self.run(s.then_case)
            elif s.else_case is not None:
                self.run(s.else_case)
        else:
            raise NotImplementedError(t.__name__)


def run_func(func: ir.PrimFunc, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``func`` on copies of ``inputs`` (one per buffer parameter); return the arrays."""
    arrays = [a.copy() for a in inputs]
    mem = {id(p): a for p, a in zip(func.buffer_params, arrays, strict=False)}
    _Interp(mem).run(func.body)
    return arrays


def random_inputs(func: ir.PrimFunc, seed: int = 0) -> list[np.ndarray]:
    """Random float inputs for every buffer parameter of ``func``."""
    rng = np.random.default_rng(seed)
    out = []
    for p in func.buffer_params:
        shape = tuple(int(s.value) for s in p.shape)
        out.append(rng.uniform(-1.0, 1.0, size=shape).astype(str(p.dtype)))
    return out


def assert_same_result(before: ir.PrimFunc, after: ir.PrimFunc, seed: int = 0) -> None:
    """Both functions produce the same parameter arrays from the same random inputs."""
    inputs = random_inputs(before, seed)
    want = run_func(before, inputs)
    got = run_func(after, inputs)
    for w, g in zip(want, got, strict=False):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_interpreter_matmul_matches_numpy() -> None:
    n = 8
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.placeholder((n, n), "float32", name="B")
    k = tc.te.reduce_axis((0, n), name="k")
    C = tc.te.compute((n, n), lambda i, j: tc.te.sum(A[i, k] * B[k, j], axis=k), name="C")
    func = tc.te.create_prim_func([A, B, C])
    a, b, c = random_inputs(func)
    _, _, out = run_func(func, [a, b, c])
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


# workloads shared by the primitive tests ------------------------------------------------------
def matmul(n: int = 8, relu: bool = False) -> ir.PrimFunc:
    """C = A @ B (and D = max(C, 0) when ``relu``)."""
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.placeholder((n, n), "float32", name="B")
    k = tc.te.reduce_axis((0, n), name="k")
    C = tc.te.compute((n, n), lambda i, j: tc.te.sum(A[i, k] * B[k, j], axis=k), name="C")
    if not relu:
        return tc.te.create_prim_func([A, B, C])
    zero = ir.const(0.0, "float32")
    D = tc.te.compute((n, n), lambda i, j: ir.op.max(C[i, j], zero), name="D")
    return tc.te.create_prim_func([A, B, D])


def elementwise_chain(n: int = 8) -> ir.PrimFunc:
    """B = A + 1; C = transpose(B) * 2."""
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.compute((n, n), lambda i, j: A[i, j] + ir.const(1.0, "float32"), name="B")
    C = tc.te.compute((n, n), lambda i, j: B[j, i] * ir.const(2.0, "float32"), name="C")
    return tc.te.create_prim_func([A, C])


def row_sum_scale(n: int = 8) -> ir.PrimFunc:
    """S[i] = sum_k A[i, k]; Y[i, j] = A[i, j] / S[i]  (a softmax-like two-stage workload)."""
    A = tc.te.placeholder((n, n), "float32", name="A")
    k = tc.te.reduce_axis((0, n), name="k")
    S = tc.te.compute((n,), lambda i: tc.te.sum(ir.op.exp(A[i, k]), axis=k), name="S")
    Y = tc.te.compute((n, n), lambda i, j: ir.op.exp(A[i, j]) / S[i], name="Y")
    return tc.te.create_prim_func([A, Y])


def test_workloads_run() -> None:
    for func in (matmul(4, relu=True), elementwise_chain(4), row_sum_scale(4)):
        outs = run_func(func, random_inputs(func))
        assert not np.isnan(outs[-1]).any()

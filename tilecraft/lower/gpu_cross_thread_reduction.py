"""Lower reductions whose reduce loop is bound to ``threadIdx`` to cross-thread reductions.

Before: block-level IR. A reduction block ``out[i] = out[i] ⊕ f(k)`` (⊕ one of ``+ * max min``,
with an ``init``) sits in a perfect nest of reduce loops, at least one bound to ``threadIdx.*``;
its serial reduce loops may lie inside or outside the bound ones, in any order (``k = ko * 128
+ tx``, consecutive threads reading consecutive elements, is the coalesced layout).
After:  per thread, a register ``red_in`` accumulates the thread's share over the serial reduce
loops (in their order; the thread-bound loops of the nest are hoisted above them, which
changes nothing since every thread runs all of them); the threads bound to reduce iterators
then combine their partials —

* over ``threadIdx.x`` alone with a power-of-two extent up to 32: warp shuffles
  (``__shfl_down_sync`` halving, then a broadcast from the group's first lane);
* over ``threadIdx.x`` with an extent that is a multiple of 32: shuffles within each warp, the
  warps' results through a ``shared`` scratch buffer, shuffles again, and a broadcast through
  shared memory;
* otherwise (e.g. over ``threadIdx.y``): a tree reduction in a ``shared`` scratch buffer indexed
  by the linear thread index;

and the result ``out[i] = init ⊕ red`` is written by every thread when ``out`` is ``local``,
else by the first thread of each group. Barriers are left to
:class:`~.gpu_thread_sync.InsertThreadSync`. Functions without such blocks are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LowerError
from ..ir import (
    Add,
    Allocate,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    FloatImm,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IterKind,
    Max,
    Min,
    Mul,
    Mutator,
    PrimFunc,
    Stmt,
    Var,
    as_expr,
    cast,
    collect_vars,
    seq,
    structural_equal,
    substitute,
)
from ..ir.transform import FunctionPass
from ..target import Target
from .gpu_nodes import FULL_MASK, WarpShuffle

_COMBINERS = (Add, Mul, Max, Min)


@dataclass(frozen=True)
class _Reduction:
    out: Buffer
    indices: tuple[Expr, ...]
    op: type
    value: Expr  # the new contribution (iterators substituted)
    init: Expr


def _identity(op: type, dt: object) -> Expr:
    d = dt  # DataType
    if op is Add:
        return as_expr(0, d)  # type: ignore[arg-type]
    if op is Mul:
        return as_expr(1, d)  # type: ignore[arg-type]
    lo = op is Max
    if d.is_float:  # type: ignore[attr-defined]
        return FloatImm(d, float("-inf") if lo else float("inf"))  # type: ignore[arg-type]
    bits = d.bits  # type: ignore[attr-defined]
    if d.is_uint:  # type: ignore[attr-defined]
        return IntImm(d, 0 if lo else 2**bits - 1)  # type: ignore[arg-type]
    return IntImm(d, -(2 ** (bits - 1)) if lo else 2 ** (bits - 1) - 1)  # type: ignore[arg-type]


def _combine(op: type, a: Expr, b: Expr) -> Expr:
    return op(a, b)  # type: ignore[no-any-return]


def _is_identity(e: Expr, op: type) -> bool:
    ident = _identity(op, e.dtype)
    if not isinstance(e, (IntImm, FloatImm)) or type(e) is not type(ident):
        return False
    return bool(e.value == ident.value)


def _match(realize: BlockRealize) -> _Reduction | None:
    block = realize.block
    body, init = block.body, block.init
    if not isinstance(body, BufferStore) or not isinstance(init, BufferStore):
        return None
    if init.buffer is not body.buffer or not isinstance(body.value, _COMBINERS):
        return None
    v = body.value

    def is_self(e: Expr) -> bool:
        return (
            isinstance(e, BufferLoad)
            and e.buffer is body.buffer
            and all(structural_equal(a, b) for a, b in zip(e.indices, body.indices, strict=True))
        )

    if is_self(v.a):
        rhs = v.b
    elif is_self(v.b):
        rhs = v.a
    else:
        return None
    vmap = {iv.var: val for iv, val in zip(block.iter_vars, realize.iter_values, strict=True)}
    return _Reduction(
        body.buffer,
        tuple(substitute(i, vmap) for i in body.indices),
        type(v),
        substitute(rhs, vmap),
        substitute(init.value, vmap),
    )


def _is_one(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    if isinstance(e, IntImm) and e.dtype.is_bool and e.value == 1:
        return []
    return [e]


def _all(terms: list[Expr]) -> Expr | None:
    out: Expr | None = None
    for t in terms:
        out = t if out is None else out & t
    return out


def _is_thread(loop: For) -> bool:
    return loop.kind is ForKind.THREAD_BINDING and (loop.thread or "").startswith("threadIdx")


def _guard(cond: Expr | None, s: Stmt) -> Stmt:
    return s if cond is None else IfThenElse(cond, s)


class _Lowerer(Mutator):
    def __init__(self, target: Target, func_name: str) -> None:
        super().__init__()
        self.target = target
        self.func_name = func_name
        self.threads: list[For] = []  # enclosing threadIdx loops
        self.counter = 0

    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        chain = [loop]
        cur: Stmt = loop.body
        while isinstance(cur, For):
            chain.append(cur)
            cur = cur.body
        if isinstance(cur, BlockRealize) and self._reduce_threads(chain, cur):
            return self.rewrite(chain, cur)
        if loop.kind is ForKind.THREAD_BINDING and (loop.thread or "").startswith("threadIdx"):
            self.threads.append(loop)
            try:
                return self.generic_visit(loop)  # type: ignore[no-any-return]
            finally:
                self.threads.pop()
        return self.generic_visit(loop)  # type: ignore[no-any-return]

    @staticmethod
    def _reduce_var_ids(realize: BlockRealize) -> set[int]:
        ids: set[int] = set()
        for iv, val in zip(realize.block.iter_vars, realize.iter_values, strict=True):
            if iv.kind is IterKind.REDUCE:
                ids.update(id(v) for v in collect_vars(val))
        return ids

    def _reduce_threads(self, chain: list[For], realize: BlockRealize) -> bool:
        """True when ``chain`` (a perfect nest down to ``realize``) starts with the outermost
        loop driving a reduce iterator and holds a threadIdx loop driving one."""
        ids = self._reduce_var_ids(realize)
        if id(chain[0].loop_var) not in ids:
            return False
        bound = next((lp for lp in chain if _is_thread(lp) and id(lp.loop_var) in ids), None)
        if bound is None:
            return False
        if realize.block.init is None and not _is_one(bound.extent):
            # an update block (its init split off by decompose_reduction) would keep one
            # partial per thread ('local') or race on the element (shared, global)
            raise self.fail(
                realize.block,
                f"its reduce loop {bound.loop_var.name!r} is bound to {bound.thread} "
                "but the block has no init (decompose_reduction split it off); a reduction "
                "across threads needs its init in the block: do not decompose it",
            )
        return realize.block.init is not None

    def fail(self, block: Block, why: str) -> LowerError:
        return LowerError(
            f"LowerCrossThreadReduction {self.func_name}: block {block.name!r}: {why}"
        )

    def rewrite(self, chain: list[For], realize: BlockRealize) -> Stmt:
        block = realize.block
        red = _match(realize)
        if red is None:
            raise self.fail(
                block,
                "a reduction across threads needs a body `out[i] = out[i] ⊕ "
                "value` with ⊕ in + * max min and an init storing into out[i]",
            )
        reduce_ids = self._reduce_var_ids(realize)
        chain_ids = {id(lp.loop_var) for lp in chain}
        outside = sorted(
            v.name
            for v in {id(v): v for val in realize.iter_values for v in collect_vars(val)}.values()
            if id(v) in reduce_ids and id(v) not in chain_ids
        )
        if outside:
            # the rewrite writes init ⊕ (this nest's reduction): a reduce loop outside the
            # nest would overwrite the result of its previous iterations
            raise self.fail(
                block,
                f"loop(s) {outside} outside the reduce loop nest also drive its reduce "
                "iterators; move the loops that drive spatial iterators above every reduce "
                "loop",
            )
        spatial_ids = {
            id(v)
            for iv, val in zip(block.iter_vars, realize.iter_values, strict=True)
            if iv.kind is not IterKind.REDUCE
            for v in collect_vars(val)
        }
        thread_loops = [lp for lp in chain if lp.kind is ForKind.THREAD_BINDING]
        serial = [lp for lp in chain if lp.kind is not ForKind.THREAD_BINDING]
        for lp in serial:
            if id(lp.loop_var) in spatial_ids:
                raise self.fail(
                    block,
                    f"serial loop {lp.loop_var.name!r} under the thread-bound "
                    "reduce loop drives a spatial iterator; move it outside",
                )
        rt = [lp for lp in thread_loops if id(lp.loop_var) in reduce_ids]
        for lp in rt:
            if not isinstance(lp.extent, IntImm):
                raise self.fail(
                    block,
                    f"reduce loop {lp.loop_var.name!r} on {lp.thread} has a "
                    "symbolic extent; cross-thread reductions need constant extents",
                )
        dt = red.out.dtype
        k = self.counter
        self.counter += 1
        red_in = Buffer(f"red_in{k}", (as_expr(1),), dt, "local")
        red_out = Buffer(f"red_out{k}", (as_expr(1),), dt, "local")
        tmp = Buffer(f"red_tmp{k}", (as_expr(1),), dt, "local")
        serial_vars = {id(lp.loop_var) for lp in serial}
        rt_vars = {id(lp.loop_var) for lp in rt}
        pred = _conjuncts(realize.predicate)
        outer_pred = [
            c for c in pred if not any(id(v) in serial_vars | rt_vars for v in collect_vars(c))
        ]
        ident = _identity(red.op, dt)
        acc: Stmt = _guard(
            _all(pred),
            BufferStore(red_in, _combine(red.op, red_in[0], red.value), (as_expr(0),)),
        )
        for lp in reversed(serial):
            acc = lp.update(body=acc)
        context = [*self.threads, *thread_loops]
        allreduce, scratch = self.allreduce(block, red.op, red_in, red_out, tmp, rt, context)
        result = (
            red_out[0] if _is_identity(red.init, red.op) else _combine(red.op, red.init, red_out[0])
        )
        write: Stmt = BufferStore(red.out, result, red.indices)
        leader = [lp.loop_var.eq(lp.min) for lp in rt] if red.out.scope != "local" else []
        write = _guard(_all(outer_pred + leader), write)
        body: Stmt = seq(BufferStore(red_in, ident, (as_expr(0),)), acc, allreduce, write)
        for b in (tmp, red_out, red_in):
            body = Allocate(b, body)
        for lp in reversed(thread_loops):
            body = lp.update(body=body)
        for b in scratch:
            body = Allocate(b, body)
        return body

    # cross-thread combination ----------------------------------------------------------
    def allreduce(
        self,
        block: Block,
        op: type,
        red_in: Buffer,
        red_out: Buffer,
        tmp: Buffer,
        rt: list[For],
        context: list[For],
    ) -> tuple[Stmt, list[Buffer]]:
        zero = as_expr(0)
        start = BufferStore(red_out, red_in[0], (zero,))
        if len(rt) == 1 and rt[0].thread == "threadIdx.x":
            ext = rt[0].extent.value  # type: ignore[attr-defined]
            mask = self._mask(context)
            if ext <= 32 and ext & (ext - 1) == 0:
                steps = self.warp_steps(op, red_out, tmp, ext, mask)
                bcast = WarpShuffle(red_out, zero, red_out[0], "idx", zero, ext, mask)
                return seq(start, *steps, bcast), []
            warps = ext // 32
            if ext % 32 == 0 and warps <= 32 and warps & (warps - 1) == 0:
                return self.block_reduce(op, red_out, tmp, rt[0], context, start, mask)
        return self.shared_tree(block, op, red_in, red_out, rt, context, start)

    def _mask(self, context: list[For]) -> int:
        total = 1
        for lp in context:
            if not isinstance(lp.extent, IntImm):
                return FULL_MASK
            total *= lp.extent.value
        return FULL_MASK if total >= 32 else (1 << total) - 1

    @staticmethod
    def warp_steps(op: type, red_out: Buffer, tmp: Buffer, width: int, mask: int) -> list[Stmt]:
        zero = as_expr(0)
        out: list[Stmt] = []
        off = width // 2
        while off >= 1:
            out.append(WarpShuffle(tmp, zero, red_out[0], "down", as_expr(off), width, mask))
            out.append(BufferStore(red_out, _combine(op, red_out[0], tmp[0]), (zero,)))
            off //= 2
        return out

    def _group(self, context: list[For], exclude: For) -> tuple[Expr, int]:
        """Linear index of the other thread dimensions (the reduction group) and their count."""
        index: Expr = as_expr(0, exclude.loop_var.dtype)
        count = 1
        for tag in ("threadIdx.z", "threadIdx.y"):
            for lp in context:
                if lp.thread == tag and lp is not exclude:
                    if not isinstance(lp.extent, IntImm):
                        raise LowerError(
                            f"LowerCrossThreadReduction {self.func_name}: "
                            f"{tag} needs a constant extent"
                        )
                    index = index * lp.extent.value + cast(lp.loop_var - lp.min, index.dtype)
                    count *= lp.extent.value
                    break
        return index, count

    def block_reduce(
        self,
        op: type,
        red_out: Buffer,
        tmp: Buffer,
        x: For,
        context: list[For],
        start: Stmt,
        mask: int,
    ) -> tuple[Stmt, list[Buffer]]:
        zero = as_expr(0)
        warps = x.extent.value // 32  # type: ignore[attr-defined]
        group, groups = self._group(context, x)
        scratch = Buffer(
            f"red_buf{self.counter - 1}", (as_expr(groups * warps),), red_out.dtype, "shared"
        )
        xv = x.loop_var - x.min
        base = group * warps
        lane0 = (xv % 32).eq(0)
        stmts: list[Stmt] = [start, *self.warp_steps(op, red_out, tmp, 32, mask)]
        stmts.append(IfThenElse(lane0, BufferStore(scratch, red_out[0], (base + xv // 32,))))
        stmts.append(
            IfThenElse(
                xv < warps,
                BufferStore(red_out, scratch[base + xv], (zero,)),
                BufferStore(red_out, _identity(op, red_out.dtype), (zero,)),
            )
        )
        stmts.extend(self.warp_steps(op, red_out, tmp, warps, mask) if warps > 1 else [])
        stmts.append(IfThenElse(xv.eq(0), BufferStore(scratch, red_out[0], (base,))))
        stmts.append(BufferStore(red_out, scratch[base], (zero,)))
        return seq(*stmts), [scratch]

    def shared_tree(
        self,
        block: Block,
        op: type,
        red_in: Buffer,
        red_out: Buffer,
        rt: list[For],
        context: list[For],
        start: Stmt,
    ) -> tuple[Stmt, list[Buffer]]:
        zero = as_expr(0)
        strides: dict[str, int] = {}
        lin: Expr | None = None
        total = 1
        for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            lp = next((c for c in context if c.thread == tag), None)
            if lp is None:
                continue
            if not isinstance(lp.extent, IntImm):
                raise self.fail(
                    block, f"{tag} needs a constant extent for a shared-memory reduction"
                )
            strides[tag] = total
            term = (lp.loop_var - lp.min) * total
            lin = term if lin is None else cast(lin, term.dtype) + term
            total *= lp.extent.value
        scratch = Buffer(f"red_buf{self.counter - 1}", (as_expr(total),), red_out.dtype, "shared")
        assert lin is not None  # the reduce loops are among the context loops
        stmts: list[Stmt] = [BufferStore(scratch, red_in[0], (lin,))]
        first: Expr = lin
        for lp in rt:
            assert isinstance(lp.extent, IntImm)
            ext, stride = lp.extent.value, strides[lp.thread or ""]
            r = lp.loop_var - lp.min
            first = first - cast(r * stride, first.dtype)
            step = 1
            while step < ext:
                step *= 2
            step //= 2
            while step >= 1:
                cond = r < step
                if ext & (ext - 1):  # not a power of two: the partner may be missing
                    cond = cond & (r + step < ext)
                value = _combine(op, scratch[lin], scratch[lin + step * stride])
                stmts.append(IfThenElse(cond, BufferStore(scratch, value, (lin,))))
                step //= 2
        stmts.append(BufferStore(red_out, scratch[first], (zero,)))
        del start
        return seq(*stmts), [scratch]


def _unused(*_: Var) -> None:
    return None


class LowerCrossThreadReduction(FunctionPass):
    """Rewrite reductions across threads (see the module docstring).

    Parameters
    ----------
    target
        The CUDA target (its warp size is 32).
    """

    def __init__(self, target: Target) -> None:
        self.target = target

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with its cross-thread reductions lowered."""
        return func.update(body=_Lowerer(self.target, func.name).visit(func.body))

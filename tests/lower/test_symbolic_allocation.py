"""Allocations of symbolic-extent intermediates keep their symbolic size (issue 10, item 6e).

After ``add_unit_loop`` + ``fuse`` a binding ``fused % n`` reached the region analysis, whose
constant bound for a floormod by a symbolic divisor came from the int32 limits: a 5-element
computation then allocated 2**31 - 1 elements (8 GiB) per call, and 2-D intermediates made the
flattened size overflow int32 (``IRError`` from ``tc.build``).
"""

from __future__ import annotations

import tilecraft as tc
from tilecraft.ir import Allocate, PrimFunc, post_order_visit, structural_equal
from tilecraft.lower import PassContext, lower
from tilecraft.testing import check_numeric

te = tc.te
INT32_MAX = 2**31 - 1


def _allocations(func: PrimFunc) -> dict[str, tuple[tc.ir.Expr, ...]]:
    out: dict[str, tuple[tc.ir.Expr, ...]] = {}

    def fn(n: object) -> None:
        if isinstance(n, Allocate):
            out[n.buffer.name] = tuple(n.buffer.shape)

    post_order_visit(func.body, fn)
    return out


def _chain(shape: tuple[object, ...]) -> PrimFunc:
    a = te.placeholder(shape, "float32", name="A")
    b = te.compute(a.shape, lambda *i: a[i] + 1.0, name="B")
    c = te.compute(a.shape, lambda *i: b[i] * 2.0, name="C")
    return te.create_prim_func([a, c])


def _lower(func: PrimFunc) -> PrimFunc:
    """Lower for the CPU keeping every intermediate's allocation (no storage sharing)."""
    with PassContext(config={"lower.share_output_storage": False}):
        return lower(func, "cpu")


def _no_huge_constant(func: PrimFunc) -> None:
    for name, shape in _allocations(_lower(func)).items():
        for extent in shape:
            value = getattr(extent, "value", 0)
            assert value < 2**20, f"{name} allocates {shape}"


def test_unit_loop_then_fuse_allocates_n_elements() -> None:
    before = _chain(("n",))
    sch = tc.Schedule(before)
    for name in ("B", "C"):
        blk = sch.get_block(name)
        sch.add_unit_loop(sch.get_loops(blk)[0])
        sch.fuse(*sch.get_loops(blk))
    lowered = _lower(sch.func)
    (shape,) = _allocations(lowered).values()
    n = before.params[0].shape[0]
    assert len(shape) == 1
    assert structural_equal(shape[0], n)
    for size in (1, 5, 12):
        check_numeric(sch.func, before, shape_vars={"n": size})


def test_floormod_by_symbolic_extent_keeps_the_buffer_size() -> None:
    # the binding a unit loop fused above i gives, written out (fuse now simplifies it away)
    before = _chain(("n",))
    func = tc.script.parse(
        """
@T.prim_func
def main(A: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
    n = T.int32()
    with T.block("root"):
        B = T.alloc_buffer((n,), "float32")
        for f in range(n):
            with T.block("B"):
                vi = T.axis.spatial(n, f % n)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] + T.float32(1.0)
        for i in range(n):
            with T.block("C"):
                vi = T.axis.spatial(n, i // n + i)
                T.reads(B[vi])
                T.writes(C[vi])
                C[vi] = B[vi] * T.float32(2.0)
"""
    )
    assert isinstance(func, PrimFunc)
    (shape,) = _allocations(_lower(func)).values()
    assert str(shape[0]) == "n"
    for size in (1, 5):
        check_numeric(func, before, shape_vars={"n": size})


def test_two_d_intermediate_after_unit_loops_and_fuse_builds() -> None:
    # a reproducer found by a random search: tc.build raised IRError (8589934588 > int32)
    before = _chain(("n", 4))
    sch = tc.Schedule(before)
    sch.add_unit_loop(sch.get_block("B"))
    sch.add_unit_loop(sch.get_loops(sch.get_block("B"))[0])
    sch.fuse(*sch.get_loops(sch.get_block("C"))[0:2])
    sch.fuse(*sch.get_loops(sch.get_block("B"))[0:2])
    _no_huge_constant(sch.func)
    for size in (1, 3, 6):
        check_numeric(sch.func, before, shape_vars={"n": size})


def test_square_symbolic_intermediate_after_unit_loops_and_fuse() -> None:
    before = _chain(("n", "n"))
    sch = tc.Schedule(before)
    c = sch.get_block("C")
    sch.add_unit_loop(sch.get_loops(c)[1])
    sch.add_unit_loop(sch.get_loops(c)[1])
    sch.fuse(*sch.get_loops(c)[1:3])
    sch.fuse(*sch.get_loops(c)[1:3])
    _no_huge_constant(sch.func)
    for size in (1, 4):
        check_numeric(sch.func, before, shape_vars={"n": size})


def test_region_of_division_by_symbolic_extent() -> None:
    # what compaction asks the region analysis: no int32-limit constant for symbolic terms
    n, m, f = tc.ir.Var("n"), tc.ir.Var("m"), tc.ir.Var("f")
    zero = tc.ir.IntImm(n.dtype, 0)
    dom = {f: tc.ir.Range(zero, n)}
    rem = tc.arith.eval_set(f % n, dom)
    assert (str(rem.min_value), str(rem.max_value)) == ("0", "n - 1")
    quo = tc.arith.eval_set(f // n, dom)
    assert (str(quo.min_value), str(quo.max_value)) == ("0", "0")
    wrap = tc.arith.eval_set(f % m, dom)  # the sign of m is unknown: unbounded, no constant
    assert wrap.min_value is None
    assert wrap.max_value is None
    product = tc.arith.eval_set(f * m, dom)  # non-affine in symbolic terms: unbounded
    assert product.max_value is None

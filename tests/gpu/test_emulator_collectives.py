"""Warp shuffles, the warp-collective registry and emulated asynchronous copies.

Cross-thread reductions from the Schedule API lower to warp shuffles (one warp), shuffles
through shared memory (several warps) or a shared-memory tree (threadIdx.y); the emulator runs
the shuffles as warp collectives. The registry tests plug in collectives and a cp.async-like
copy of their own, as the tensor-core intrinsics will.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from emulator_schedules import GPU, make_row_sum

import tilecraft as tc
from tilecraft.codegen.emulate.intrinsics import (
    Access,
    AsyncIntrinsic,
    AsyncRole,
    CollectiveCall,
    LaneRegion,
    LaneResult,
    LaneValue,
    WarpCollective,
    register_intrinsic,
    unregister_intrinsic,
)
from tilecraft.errors import EmulationError, RaceCheckError, RaceKind
from tilecraft.ir import (
    BufferLoad,
    Evaluate,
    Expr,
    IntImm,
    Mutator,
    PrimFunc,
    Stmt,
    register_node,
)
from tilecraft.lower.gpu_nodes import WarpShuffle
from tilecraft.lower.gpu_pipeline import lower_gpu_function
from tilecraft.testing import check_numeric

MODES = [True, "racecheck"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("threads", "tag", "rows", "path"),
    [(32, "threadIdx.x", 1, "shuffles"), (8, "threadIdx.x", 1, "shuffles in a partial warp"),
     (16, "threadIdx.x", 4, "half-warp shuffles, 4 rows per block"),
     (128, "threadIdx.x", 1, "shuffles + shared memory"),
     (64, "threadIdx.y", 1, "shared-memory tree")],
)  # fmt: skip
def test_cross_thread_reductions(
    threads: int, tag: str, rows: int, path: str, mode: object
) -> None:
    _, sch, ref = make_row_sum(16, 256, threads, tag, rows)
    low = lower_gpu_function(sch.func, GPU)
    shuffles: list[tc.ir.Node] = []
    tc.ir.post_order_visit(low.body, lambda n: _keep(n, WarpShuffle, shuffles))
    assert bool(shuffles) == ("shuffles" in path)
    check_numeric(sch.func, ref, emulate_gpu=mode, target=GPU, rtol=1e-5)


def _keep(n: tc.ir.Node, cls: type, out: list[tc.ir.Node]) -> None:
    if isinstance(n, cls):
        out.append(n)


def _shuffle_kernel(mask: int, active: str, threads: int = 32) -> PrimFunc:
    """Lane t receives lane t + 1's value (``__shfl_down_sync``), under ``if active``."""
    text = f"""
@T.prim_func
def shfl(A: T.Buffer(({threads},), "float32"), B: T.Buffer(({threads},), "float32")):
    T.func_attr({{"tc.lowered": True}})
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding({threads}, thread="threadIdx.x"):
            R = T.allocate((1,), "float32", scope="local")
            R[0] = A[tx]
            if {active}:
                T.evaluate(7)
            B[tx] = R[0]
"""
    func = tc.script.parse(text)
    r = _buffers(func)["R"]

    class Put(Mutator):
        def visit_Evaluate(self, s: Evaluate) -> Stmt:
            return WarpShuffle(r, IntImm(r.shape[0].dtype, 0), BufferLoad(r, (0,)), "down",
                               IntImm(r.shape[0].dtype, 1), 32, mask)  # fmt: skip

    return func.update(body=Put().visit(func.body))


def test_shuffle_down_exchanges_lane_values() -> None:
    func = _shuffle_kernel(0xFFFFFFFF, "tx >= 0")
    a, b = np.arange(32, dtype="float32"), np.zeros(32, "float32")
    tc.build(func, target=GPU, emulate="racecheck")["shfl"](a, b)
    np.testing.assert_array_equal(b, np.append(np.arange(1, 32), 31).astype("float32"))


NEVER_ARRIVES = (
    r"shfl: threads of block .* cannot proceed: a thread exited while others wait \(thread "
    r"\(0, 0, 0\) waits at warp collective 'shfl' while thread \(16, 0, 0\) has exited\)"
)


def test_shuffle_with_a_lane_that_never_arrives_is_reported() -> None:
    func = _shuffle_kernel(0xFFFFFFFF, "tx < 16")
    for mode in MODES:
        with pytest.raises(EmulationError, match=NEVER_ARRIVES):
            tc.build(func, target=GPU, emulate=mode)["shfl"](
                np.zeros(32, "float32"), np.zeros(32, "float32")
            )


def test_shuffle_reading_a_lane_outside_the_group_is_reported() -> None:
    """Mask 0xffff: lanes 0-15 execute it; lane 15 reads lane 16, which does not."""
    func = _shuffle_kernel(0x0000FFFF, "tx < 16")
    with pytest.raises(EmulationError, match=r"a shuffle reads a lane that did not execute it "
                       r"\(thread \(15, 0, 0\) and thread \(16, 0, 0\)\)"):  # fmt: skip
        tc.build(func, target=GPU, emulate=True)["shfl"](
            np.zeros(32, "float32"), np.zeros(32, "float32")
        )


def _diverged_shuffles() -> PrimFunc:
    """Lanes 0-15 execute one full-warp shuffle, lanes 16-31 another (offsets 1 and 2)."""
    text = """
@T.prim_func
def shfl(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    T.func_attr({"tc.lowered": True})
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            R = T.allocate((1,), "float32", scope="local")
            R[0] = A[tx]
            if tx < 16:
                T.evaluate(1)
            else:
                T.evaluate(2)
            B[tx] = R[0]
"""
    func = tc.script.parse(text)
    r = _buffers(func)["R"]
    i32 = r.shape[0].dtype

    class Put(Mutator):
        def visit_Evaluate(self, s: Evaluate) -> Stmt:
            offset = s.value.value  # type: ignore[attr-defined]
            return WarpShuffle(r, IntImm(i32, 0), BufferLoad(r, (0,)), "down",
                               IntImm(i32, offset), 32, 0xFFFFFFFF)  # fmt: skip

    return func.update(body=Put().visit(func.body))


@pytest.mark.parametrize("mode", MODES)
def test_lanes_at_different_shuffle_statements_are_reported(mode: object) -> None:
    """Two statements of one intrinsic are two collectives: their lanes never pair up (they
    did, silently, when all shuffles of a kernel shared one site)."""
    with pytest.raises(EmulationError, match=r"cannot proceed: lanes of one warp execute "
                       r"different warp collectives \(thread \(16, 0, 0\) waits at warp "
                       r"collective 'shfl' \(warp operation #1 of the kernel\) while thread "
                       r"\(0, 0, 0\) waits at warp collective 'shfl' \(warp operation #0 of the "
                       r"kernel\)\) in warp 0"):  # fmt: skip
        tc.build(_diverged_shuffles(), target=GPU, emulate=mode)["shfl"](
            np.zeros(32, "float32"), np.zeros(32, "float32")
        )


@pytest.mark.parametrize("mode", MODES)
def test_a_lane_outside_the_mask_is_reported(mode: object) -> None:
    """Mask 0xffff0000 executed by all 32 lanes: lanes 0-15 are not part of it."""
    func = _shuffle_kernel(0xFFFF0000, "tx >= 0")
    with pytest.raises(EmulationError, match=r"cannot proceed: a lane outside the "
                       r"collective's mask executes it \(thread \(0, 0, 0\) waits at warp "
                       r"collective 'shfl'\) in warp 0"):  # fmt: skip
        tc.build(func, target=GPU, emulate=mode)["shfl"](
            np.zeros(32, "float32"), np.zeros(32, "float32")
        )


# -- the registry: a collective and an asynchronous copy defined here ------------------------
@dataclass(frozen=True, slots=True, eq=False, repr=False)
class WarpSum(Stmt):
    """``out = sum over the warp's lanes of value`` (a test-only warp collective)."""

    out: Expr  # BufferLoad naming where the lane's result goes
    value: Expr

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RotateFragment(Stmt):
    """Each lane's 2-element fragment ``dst`` receives lane (l + 1) % 32's ``src``."""

    dst: Expr  # BufferLoad of the fragment's first element
    src: Expr

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CopyAsync(Stmt):
    """Copy ``count`` elements from ``src`` to ``dst`` asynchronously (cp.async-like)."""

    dst: Expr
    src: Expr
    count: int

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CommitGroup(Stmt):
    """Close the group of copies issued since the last commit."""

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class WaitGroup(Stmt):
    """Wait until at most ``pending`` committed groups are in flight."""

    pending: int

    __hash__ = object.__hash__


for _cls in (WarpSum, RotateFragment, CopyAsync, CommitGroup, WaitGroup):
    register_node(_cls, tag=f"test.emulator.{_cls.__name__}")

_WARP_SUM_C = """static void test_warp_sum(tc_emu_warp_call* c) {
  float s = 0.0f;
  for (int l = 0; l < 32; ++l) if ((c->arrived >> l) & 1u) s += *(const float*)c->ops[l][1];
  for (int l = 0; l < 32; ++l) if ((c->arrived >> l) & 1u) *(float*)c->ops[l][0] = s;
}
"""
_ROTATE_C = """static void test_rotate(tc_emu_warp_call* c) {
  for (int l = 0; l < 32; ++l) {
    if (!((c->arrived >> l) & 1u)) continue;
    memcpy(c->ops[l][0], c->ops[(l + 1) % 32][1], (size_t)c->sizes[1]);
  }
}
"""


def _region(e: Expr, count: int, access: Access) -> LaneRegion:
    assert isinstance(e, BufferLoad)
    return LaneRegion(e.buffer, e.indices[0], count, access)


def _result(e: Expr) -> LaneResult:
    assert isinstance(e, BufferLoad)
    return LaneResult(e.buffer, e.indices[0])


def _copy_regions(s: Stmt) -> tuple[LaneRegion, LaneRegion]:
    assert isinstance(s, CopyAsync)
    return _region(s.dst, s.count, Access.WRITE), _region(s.src, s.count, Access.READ)


INTRINSICS = [
    WarpCollective(
        "test_warp_sum",
        lambda s: isinstance(s, WarpSum),
        lambda s: CollectiveCall((_result(s.out), LaneValue(s.value))),  # type: ignore[attr-defined]
        "test_warp_sum",
        _WARP_SUM_C,
    ),
    WarpCollective(
        "test_rotate",
        lambda s: isinstance(s, RotateFragment),
        lambda s: CollectiveCall(
            (_region(s.dst, 2, Access.WRITE), _region(s.src, 2, Access.READ))  # type: ignore[attr-defined]
        ),
        "test_rotate",
        _ROTATE_C,
    ),
    AsyncIntrinsic(
        "test_cp_async",
        AsyncRole.COPY,
        lambda s: isinstance(s, CopyAsync),
        copy=_copy_regions,
    ),
    AsyncIntrinsic("test_commit", AsyncRole.COMMIT, lambda s: isinstance(s, CommitGroup)),
    AsyncIntrinsic(
        "test_wait",
        AsyncRole.WAIT,
        lambda s: isinstance(s, WaitGroup),
        in_flight=lambda s: s.pending,  # type: ignore[attr-defined]
    ),
]


@pytest.fixture
def intrinsics():  # type: ignore[no-untyped-def]
    for entry in INTRINSICS:
        register_intrinsic(entry)
    yield
    for entry in INTRINSICS:
        unregister_intrinsic(entry.name)


class _Markers(Mutator):
    """Replace ``T.evaluate(k)`` markers by the statements ``make(k)`` returns."""

    def __init__(self, make) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.make = make

    def visit_Evaluate(self, s: Evaluate) -> Stmt:
        assert isinstance(s.value, IntImm)
        return self.make(s.value.value)  # type: ignore[no-any-return]


def _buffers(func: PrimFunc) -> dict[str, tc.ir.Buffer]:
    found: dict[str, tc.ir.Buffer] = {}

    def fn(n: tc.ir.Node) -> None:
        if isinstance(n, (tc.ir.BufferStore, BufferLoad, tc.ir.Allocate)):
            found[n.buffer.name] = n.buffer

    tc.ir.post_order_visit(func.body, fn)
    for p in func.buffer_params:
        found[p.name] = p
    return found


def test_a_registered_collective_runs_over_the_lanes(intrinsics) -> None:  # type: ignore[no-untyped-def]
    text = """
@T.prim_func
def wsum(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"tc.lowered": True})
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            R = T.allocate((1,), "float32", scope="local")
            T.evaluate(1)
            B[tx] = R[0] + A[tx] * T.float32(0)
"""
    func = tc.script.parse(text)
    bufs = _buffers(func)
    tx = next(v for v in tc.ir.collect_vars(func.body) if v.name == "tx")
    body = _Markers(lambda _: WarpSum(BufferLoad(bufs["R"], (0,)), BufferLoad(bufs["A"], (tx,))))
    func = func.update(body=body.visit(func.body))
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    lib = tc.build(func, target=GPU, emulate="racecheck")
    assert "static void test_warp_sum(tc_emu_warp_call* c)" in lib.source
    lib["wsum"](a, b)
    np.testing.assert_array_equal(b, np.repeat([a[:32].sum(), a[32:].sum()], 32))


def test_registered_region_operands_are_checked(intrinsics) -> None:  # type: ignore[no-untyped-def]
    """Fragments passed by address: lane l gets lane l + 1's; reading a fragment nothing wrote
    is an uninitialized read, reported before the collective runs."""
    text = """
@T.prim_func
def rot(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"tc.lowered": True})
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            F = T.allocate((2,), "float32", scope="local")
            G = T.allocate((2,), "float32", scope="local")
            F[0] = A[tx * 2]
            F[1] = A[tx * 2 + 1]
            T.evaluate(1)
            B[tx * 2] = G[0]
            B[tx * 2 + 1] = G[1]
"""
    func = tc.script.parse(text)
    bufs = _buffers(func)
    frag = RotateFragment(BufferLoad(bufs["G"], (0,)), BufferLoad(bufs["F"], (0,)))
    good = func.update(body=_Markers(lambda _: frag).visit(func.body))
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    tc.build(good, target=GPU, emulate="racecheck")["rot"](a, b)
    np.testing.assert_array_equal(b, np.roll(a, -2))
    wrong = RotateFragment(BufferLoad(bufs["F"], (0,)), BufferLoad(bufs["G"], (0,)))
    bad = func.update(body=_Markers(lambda _: wrong).visit(func.body))
    with pytest.raises(RaceCheckError, match=r"loads local G\[0\]"):
        tc.build(bad, target=GPU, emulate="racecheck")["rot"](a, b)


_ASYNC_TEXT = """
@T.prim_func
def staged(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    T.func_attr({"tc.lowered": True})
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        S = T.allocate((256,), "float32", scope="shared")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            T.evaluate(1)
            T.evaluate(2)
            T.evaluate(3)
            T.evaluate(4)
            for r in range(4):
                B[tx * 4 + r] = S[(tx * 4 + r + 4) % 256] + A[0] * T.float32(0)
"""


def _async_program(order: tuple[str, ...]) -> PrimFunc:
    """Steps 1-4 of ``_ASYNC_TEXT``: ``copy``, ``commit``, ``wait``, ``barrier`` or ``none``."""
    from tilecraft.lower.gpu_nodes import ThreadSync

    func = tc.script.parse(_ASYNC_TEXT)
    bufs = _buffers(func)
    tx = next(v for v in tc.ir.collect_vars(func.body) if v.name == "tx")
    four = IntImm(tx.dtype, 4)
    stmts = {
        "copy": CopyAsync(
            BufferLoad(bufs["S"], (tx * four,)), BufferLoad(bufs["A"], (tx * four,)), 4
        ),
        "commit": CommitGroup(),
        "wait": WaitGroup(0),
        "barrier": ThreadSync(),
        "none": Evaluate(IntImm(tx.dtype, 0)),
    }
    return func.update(body=_Markers(lambda k: stmts[order[k - 1]]).visit(func.body))


def test_async_copy_completes_at_its_wait(intrinsics) -> None:  # type: ignore[no-untyped-def]
    func = _async_program(("copy", "commit", "wait", "barrier"))
    a, b = np.arange(256, dtype="float32"), np.zeros(256, "float32")
    tc.build(func, target=GPU, emulate="racecheck")["staged"](a, b)
    np.testing.assert_array_equal(b, np.roll(a, -4))


def test_reading_before_the_wait_is_reported(intrinsics) -> None:  # type: ignore[no-untyped-def]
    """Without the wait the copy never lands: the read sees unwritten shared memory."""
    func = _async_program(("copy", "commit", "barrier", "none"))
    a, b = np.arange(256, dtype="float32"), np.zeros(256, "float32")
    with pytest.raises(RaceCheckError) as info:
        tc.build(func, target=GPU, emulate="racecheck")["staged"](a, b)
    assert info.value.kind is RaceKind.UNINITIALIZED
    tc.build(func, target=GPU, emulate=True)["staged"](a, b)
    assert np.isnan(b).all()


def test_wait_after_the_barrier_races_with_the_readers(intrinsics) -> None:  # type: ignore[no-untyped-def]
    """The copy lands at each thread's wait, after the barrier: in the readers' phase."""
    func = _async_program(("copy", "commit", "barrier", "wait"))
    a, b = np.arange(256, dtype="float32"), np.zeros(256, "float32")
    with pytest.raises(RaceCheckError, match=r"barrier phase 1"):
        tc.build(func, target=GPU, emulate="racecheck")["staged"](a, b)

"""The default GPU design space for ``cuda -arch=sm_90`` without a GPU: sampled candidates of a
GEMM (square and ragged), a GEMV and a softmax pass the postprocessors, equal the unscheduled
function under ``emulate="racecheck"`` and compile with ptxas without spills; the search rules'
pieces (tiling, cooperative fetch, cross-thread reduction, auto-bind) one by one; the runner
without a GPU."""

from __future__ import annotations

import random
import warnings

import pytest
from gpu_space_sample import SM90, WORKLOADS, Sampled, check_equal, gemv, matmul, sample, softmax

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.ir import Block, For, ForKind, PrimFunc, post_order_visit
from tilecraft.lower.gpu_verify import STATIC_SHARED_LIMIT
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.schedule import Schedule
from tilecraft.testing import check_numeric
from tilecraft.tune.mutator import MutateThreadBinding, MutateTileSize
from tilecraft.tune.postproc import (
    RewriteCooperativeFetch,
    RewriteReductionBlock,
    UnrollLocalTiles,
    VerifyGPUCode,
    apply_postprocs,
    default_postprocs,
)
from tilecraft.tune.postproc.keys import COOPERATIVE_FETCH
from tilecraft.tune.postproc.unroll_local_tiles import tile_loops
from tilecraft.tune.space import (
    AutoBind,
    CrossThreadReduction,
    MultiLevelTilingGPU,
    PostOrderApply,
    default_space,
    gpu_search_rules,
    resampled,
)


def _threads(sch: Schedule) -> dict[str, list[int]]:
    """Extent of every thread-bound loop, by thread tag."""
    out: dict[str, list[int]] = {}

    def visit(node: object) -> None:
        if isinstance(node, For) and node.kind is ForKind.THREAD_BINDING:
            out.setdefault(str(node.thread), []).append(int(node.extent.value))  # type: ignore[attr-defined]

    post_order_visit(sch.func.body, visit)
    return out


def _kernel_threads(sch: Schedule) -> list[list[int]]:
    """For each kernel (a ``blockIdx`` loop not inside another), its ``threadIdx.x`` extents."""
    kernels: list[list[int]] = []

    def walk(node: object, kernel: list[int] | None) -> None:
        if isinstance(node, For) and node.kind is ForKind.THREAD_BINDING:
            tag = str(node.thread)
            if tag.startswith("blockIdx") and kernel is None:
                kernel = []
                kernels.append(kernel)
            elif tag == "threadIdx.x" and kernel is not None:
                kernel.append(int(node.extent.value))  # type: ignore[attr-defined]
        for child in _stmt_children(node):
            walk(child, kernel)

    walk(sch.func.body, None)
    return kernels


def _stmt_children(node: object) -> list[object]:
    found: list[object] = []
    for name in ("body", "block", "stmts", "then_case", "else_case"):
        value = getattr(node, name, None)
        if isinstance(value, tuple):
            found.extend(value)
        elif value is not None and not isinstance(value, str | int):
            found.append(value)
    return found


_SAMPLED: dict[tuple[str, int, int], tuple[PrimFunc, Sampled]] = {}


def _sampled(name: str, seeds: range) -> tuple[PrimFunc, Sampled]:
    """The workload and its sampled candidates, drawn once per test session (the racecheck and
    the ptxas tests share them)."""
    key = (name, seeds.start, seeds.stop)
    if key not in _SAMPLED:
        func = WORKLOADS[name]()
        _SAMPLED[key] = (func, sample(func, seeds))
    return _SAMPLED[key]


def _check_workload(name: str, seeds: range, record_property: object) -> Sampled:
    func, found = _sampled(name, seeds)
    for key in [k for k in found.counts if k.endswith("racecheck_equal")]:  # a rerun counts anew
        del found.counts[key]
    check_equal(func, found)  # raises on the first candidate that differs or races
    assert callable(record_property)
    record_property("candidates", dict(found.counts))
    for part in ("search", "rules"):
        assert found.counts[f"{part}:racecheck_equal"] >= 1, found.counts
    generated = sum(v for k, v in found.counts.items() if k.endswith(":generated"))
    dropped = sum(v for k, v in found.counts.items() if ":dropped:" in k)
    assert generated == dropped + len(found.kept)
    return found


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gpu_space_candidates_equal_the_unscheduled_function(
    name: str, record_property: object
) -> None:
    _check_workload(name, range(1), record_property)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gpu_space_many_candidates_equal_the_unscheduled_function(
    name: str, record_property: object
) -> None:
    found = _check_workload(name, range(1, 7), record_property)
    kept = sum(1 for part, _ in found.kept if part == "search")
    assert kept >= 0.7 * found.counts["search:generated"], found.counts


def _check_ptxas(name: str, seeds: range, most: int) -> None:
    """Up to ``most`` search candidates a seed compile for sm_90 within its limits."""
    _, found = _sampled(name, seeds)
    limits = SM90.gpu
    assert limits is not None
    searched = [sch for part, sch in found.kept if part == "search"]
    assert searched
    for sch in searched[: most * len(seeds)]:
        src = build_cuda_source(sch.mod, SM90)
        info = ptxas_info(src.text, "sm_90")
        for prog in src.programs.values():
            for kernel in prog.kernels:
                stats = info[kernel.name]
                assert not stats.spills, (kernel.name, stats)
                assert stats.stack_bytes == 0, (kernel.name, stats)
                assert 0 < stats.registers <= limits.max_registers_per_thread
                assert (
                    stats.registers * (kernel.threads_per_block or 1) <= limits.registers_per_block
                )
                assert stats.shared_bytes <= STATIC_SHARED_LIMIT


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gpu_space_candidates_compile_without_spills(name: str) -> None:
    _check_ptxas(name, range(1), 1)


@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gpu_space_many_candidates_compile_without_spills(name: str) -> None:
    _check_ptxas(name, range(1, 4), 100)


def test_gemm_tiling_binds_levels_and_fetches_cooperatively() -> None:
    func = matmul(64, 64, 64)
    sch = Schedule(func, seed=3)
    (out,) = MultiLevelTilingGPU().apply(sch, sch.get_block("matmul"), SM90)
    anns = {}

    def visit(node: object) -> None:
        if isinstance(node, Block) and COOPERATIVE_FETCH in node.annotations:
            anns[node.name] = node.annotations[COOPERATIVE_FETCH]

    post_order_visit(out.func.body, visit)
    assert sorted(anns) == ["A_shared", "B_shared"]
    assert all(v in (1, 2, 4) for v in anns.values())
    threads = _threads(out)
    assert sorted(threads) == ["blockIdx.x", "threadIdx.x", "vthread.x"]
    assert "matmul_local" in out.func.script()  # the local write cache
    out.enter_postproc()
    assert RewriteCooperativeFetch().apply(out)
    # every copy is now spread over the block's threads, with the kernel's thread count
    after = _threads(out)["threadIdx.x"]
    assert len(after) == 3
    assert len(set(after)) == 1
    assert COOPERATIVE_FETCH not in out.func.script()
    check_numeric(out.func, func, emulate_gpu="racecheck", target=SM90)


def test_cooperative_fetch_takes_the_widest_vector_the_tile_allows() -> None:
    func = matmul(64, 64, 64)
    rule = MultiLevelTilingGPU(vector_lens=(4,))
    for seed in range(6):
        sch = Schedule(func, seed=seed)
        (out,) = rule.apply(sch, sch.get_block("matmul"), SM90)
        out.enter_postproc()
        assert RewriteCooperativeFetch().apply(out)
        text = out.func.script()
        assert "T.vectorized(4)" in text or "T.vectorized(2)" in text or "vectorized" not in text


def test_cross_thread_reduction_keeps_one_thread_count_per_kernel() -> None:
    """Regression: the softmax's max reused a literal thread count, so a redrawn trace gave
    the max 64 threads in a kernel launched with 256 (the code generator refused it)."""
    func = softmax(4, 100)
    space = PostOrderApply(gpu_search_rules())
    crossed = 0
    for seed in range(4):
        for i, sketch in enumerate(space.generate(func, SM90, seed)):
            sch = resampled(func, sketch.trace, 100 * seed + i)
            assert apply_postprocs(sch, default_postprocs(SM90)) is None
            for tx in _kernel_threads(sch):
                if len(tx) >= 3:  # max, sum and normalisation in one kernel
                    crossed += 1
                assert len(set(tx)) <= 1, tx
    assert crossed >= 1


def test_cross_thread_reduction_applies_to_rows_not_to_a_gemm() -> None:
    rule = CrossThreadReduction()
    sch = Schedule(matmul(64, 64, 64))
    assert not rule.applies(sch, sch.get_block("matmul"))
    sch = Schedule(gemv())
    assert rule.applies(sch, sch.get_block("y"))
    out = rule.apply(sch, sch.get_block("y"), SM90)
    assert len(out) == 2  # unchanged and reduced across threads
    assert "threadIdx.x" in _threads(out[1])


def test_reduction_across_threads_keeps_its_init() -> None:
    """Regression: decomposing a reduction bound to threadIdx made the lowering refuse it."""
    func = gemv()
    sch = Schedule(func, seed=0)
    _, crossed = CrossThreadReduction().apply(sch, sch.get_block("y"), SM90)
    crossed.enter_postproc()
    assert RewriteReductionBlock().apply(crossed)
    assert "y_init" not in crossed.func.script()
    check_numeric(crossed.func, func, emulate_gpu="racecheck", target=SM90)


def test_auto_bind_samples_threads_and_the_mutator_changes_them() -> None:
    func = softmax(4, 100)
    sch = Schedule(func, seed=0)
    AutoBind().apply(sch, sch.get_block("root"), SM90)
    assert all(len(v) == 4 for v in _threads(sch).values())  # four kernels, all bound
    rng = random.Random(0)
    mutated = MutateThreadBinding().apply(func, sch.trace, rng)
    assert mutated is not None
    replay = Schedule(func)
    mutated.apply_to_schedule(replay)
    assert _threads(replay)["threadIdx.x"] != _threads(sch)["threadIdx.x"]
    check_numeric(replay.func, func, emulate_gpu="racecheck", target=SM90)


def test_default_gpu_space_holds_the_rules_sketches_and_tuning_starts_with_the_rules() -> None:
    from tilecraft.tune._defaults import rules_candidate

    func = matmul(64, 64, 64)
    search, rules = default_space(SM90).spaces  # type: ignore[attr-defined]
    sketches = rules.generate(func, SM90, 0)
    assert sketches
    assert any(s.trace.sampling_indices() for s in sketches)  # tunable=True: knobs sampled
    assert search.generate(func, SM90, 0)
    first = rules_candidate(func, SM90, "matmul")
    outcome = tc.rules.try_rules(func, tc.rules.gpu.default_rules(), SM90)
    assert first is not None
    assert outcome.schedule is not None
    assert tc.ir.structural_equal(first.func, outcome.schedule.func)


class _NoDevice:
    """Stands for a machine without a GPU (the test runs the same on one with a GPU)."""

    def __call__(self, device: int = 0) -> str:
        return "no CUDA driver library (libcuda) on this machine"


def test_cuda_runner_without_a_gpu_says_so_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tilecraft.tune.runner.local.why_no_device", _NoDevice())
    func = softmax()
    # no artifact: without a device the runner must not even open one
    inputs = [ms.RunnerInput(None, ms.args_info(func), func)] * 3  # type: ignore[arg-type]
    with ms.CUDARunner() as runner, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = runner.run(inputs)
        second = runner.run(inputs)
    assert len(seen) == 1
    assert "no GPU to measure on" in str(seen[0].message)
    for res in [*first, *second]:
        assert res.run_secs is None
        assert res.error is not None
        assert res.error.startswith("not measured: no CUDA device")
    assert runner.pool.started_total == 0  # no worker process was started


def _softmax_rows(sum_threads: int) -> Schedule:
    """Softmax rows on blocks of 64 threads, the row sum reduced by ``sum_threads`` of them."""
    sch = Schedule(softmax(4, 100))
    i, j = sch.get_loops(sch.get_block("T_softmax_norm"))
    _, tx = sch.split(j, [None, 64])
    sch.bind(i, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.compute_inline(sch.get_block("T_softmax_exp"))
    for name, threads in (("T_softmax_expsum", sum_threads), ("T_softmax_maxelem", 64)):
        block = sch.get_block(name)
        sch.set_scope(block, 0, "shared")
        sch.compute_at(block, i)
        _, t = sch.split(sch.get_loops(block)[-1], [None, threads])
        sch.bind(t, "threadIdx.x")
    return sch


def test_verify_gpu_code_drops_what_the_code_generator_refuses() -> None:
    """Regression: a candidate the lowering accepts but CUDA codegen refuses (a 32-thread loop
    with a barrier in a 64-thread kernel) reached the builder and failed there."""
    assert VerifyGPUCode(SM90).apply(_softmax_rows(64))
    assert not VerifyGPUCode(SM90).apply(_softmax_rows(32))


def _tensor_core_variants() -> tuple[PrimFunc, list[Schedule], int]:
    """An fp16 GEMM (fp32 accumulation) and the default space's rule sketches for sm_90 that
    pass the postprocessors, with the number dropped."""
    a = tc.te.placeholder((128, 64), "float16", name="A")
    w = tc.te.placeholder((128, 64), "float16", name="W")
    c = tc.topi.matmul(a, w, transpose_b=True, out_dtype="float32")
    func = tc.te.create_prim_func([a, w, c])
    _, rules = default_space(SM90).spaces  # type: ignore[attr-defined]
    kept, dropped = [], 0
    for sch in rules.generate(func, SM90, 0):
        if apply_postprocs(sch, default_postprocs(SM90)) is None:
            kept.append(sch)
        else:
            dropped += 1
    return func, kept, dropped


@pytest.mark.parametrize("most", [pytest.param(1), pytest.param(100, marks=pytest.mark.slow)])
def test_tensor_core_variants_on_sm90_equal(most: int, record_property: object) -> None:
    func, kept, dropped = _tensor_core_variants()
    assert callable(record_property)
    record_property("tensor_core_variants", {"kept": len(kept), "dropped": dropped})
    assert len(kept) >= 4  # the rule's tile and its block-tile / warp neighbours
    assert len({tc.ir.structural_hash(s.func) for s in kept}) == len(kept)
    for sch in kept:
        assert "mma_sync_m" in sch.func.script()  # mma.sync fragments, not the SIMT tiling
    for sch in kept[-most:]:  # the last: a neighbour, not the rule's own tile
        assert "mma.sync.aligned" in build_cuda_source(sch.mod, SM90).text
        check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM90)


def _tiled_gemm(unroll_tiles: bool) -> Schedule:
    """A GEMM tiled by MultiLevelTilingGPU with 4x4 per thread and no unroll budget."""
    sch = Schedule(matmul(64, 64, 64), seed=0)
    (sch,) = MultiLevelTilingGPU(max_per_thread=4).apply(sch, sch.get_block("matmul"), SM90)
    posts = [RewriteReductionBlock(), RewriteCooperativeFetch()]
    posts += [UnrollLocalTiles()] if unroll_tiles else []
    assert apply_postprocs(sch, posts) is None
    return sch


def test_local_tile_loops_are_unrolled() -> None:
    rolled, unrolled = _tiled_gemm(False), _tiled_gemm(True)
    for name in ("matmul", "matmul_init", "matmul_local"):  # update, init, write-back
        before = tile_loops(rolled, rolled.get_block(name))
        assert before, name  # serial loops index the thread's tile
        assert not tile_loops(unrolled, unrolled.get_block(name)), name
        after = [unrolled.get(lp) for lp in unrolled.get_loops(unrolled.get_block(name))]
        assert sum(1 for n in after if n.kind is ForKind.UNROLLED) >= len(before)  # type: ignore[union-attr]
    check_numeric(unrolled.func, matmul(64, 64, 64), emulate_gpu="racecheck", target=SM90)


@pytest.mark.nvcc
def test_local_tile_in_registers_not_on_the_stack() -> None:
    """Regression: a sampled unroll budget of 0 left the accumulator tile indexed by rolled
    loops; ptxas put it on the stack (256 bytes of local memory)."""

    def stack(sch: Schedule) -> int:
        src = build_cuda_source(sch.mod, SM90)
        return max(s.stack_bytes for s in ptxas_info(src.text, "sm_90").values())

    assert stack(_tiled_gemm(False)) > 0
    assert stack(_tiled_gemm(True)) == 0


@pytest.mark.nvcc
def test_tune_on_sm90_builds_the_default_space_without_a_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``tune_tir`` on a CUDA target with the default space: the rules' schedule first, then
    the space's candidates, every one built by nvcc; with no GPU one warning, and each record
    says it was not measured (no build failure, no traceback)."""
    monkeypatch.setattr("tilecraft.tune.runner.local.why_no_device", _NoDevice())
    func = gemv()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        db = ms.tune_tir(func, SM90, max_trials_global=4, num_trials_per_iter=2, seed=0)
    assert sum(1 for w in seen if "no GPU to measure on" in str(w.message)) == 1
    records = db.get_all_tuning_records()
    assert len(records) == 4
    assert all((r.error or "").startswith("not measured: no CUDA device") for r in records)


def test_tile_size_mutations_of_nested_tilings_replay() -> None:
    """Regression: a GPU axis is tiled in two steps (a thread's part, then the levels); moving
    a factor of the first left the second's decision for the old extent, and a third of the
    mutated traces failed to replay."""
    func = matmul(64, 64, 64)
    sch = Schedule(func, seed=1)
    (sch,) = MultiLevelTilingGPU().apply(sch, sch.get_block("matmul"), SM90)
    rng = random.Random(0)
    for seed in range(30):
        mutated = MutateTileSize().apply(func, sch.trace, rng)
        assert mutated is not None
        mutated.apply_to_schedule(Schedule(func, seed=seed))  # raises ScheduleError if stale

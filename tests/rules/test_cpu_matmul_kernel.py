"""CPU Matmul on each x86 preset: the register tile, panel packing and padding the rule derives
from the target, and the micro-kernel gcc makes of the emitted C (``gcc -S``): the intended
FMA sequence, the accumulators in registers, nothing spilled or reloaded in the inner loop."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import tilecraft as tc
from tilecraft.ir import PrimFunc
from tilecraft.rules.cpu import Matmul, MatmulConfig
from tilecraft.runtime.compiler import build_flags, find_compiler

te = tc.te
# preset -> (SIMD register prefix, mr, nr in float32 lanes, vector registers)
PRESETS = {"avx2": ("ymm", 6, 16, 16), "avx512": ("zmm", 8, 32, 32)}
# preset -> K steps unrolled for the full mr x 2 tile (k_unroll: enough for the loop's three
# instructions to be under a tenth of the steps'; AVX2's 6 x 2 leaves one register free)
K_UNROLL = {"avx2": 2, "avx512": 2}


def _matmul(m: int, n: int, k: int, batch: tuple[int, ...] = ()) -> PrimFunc:
    a = te.placeholder((*batch, m, k), "float32", name="A")
    b = te.placeholder((*batch, k, n), "float32", name="B")
    return te.create_prim_func([a, b, tc.topi.matmul(a, b)])


def _schedule(func: PrimFunc, preset: str) -> tc.Schedule:
    sch = Matmul().apply(func, tc.Target(preset), False)
    assert isinstance(sch, tc.Schedule), sch
    return sch


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_register_tile_from_the_target(preset: str) -> None:
    """Every vector register not holding the streamed vectors or the broadcast accumulates
    (AVX2: 6 x 2 of 16, as BLIS-style kernels), capped by the rows' address registers."""
    _, mr, nr, registers = PRESETS[preset]
    cfg = MatmulConfig.for_target(tc.Target(preset))
    assert (cfg.mr, cfg.nr_vectors, cfg.lanes(tc.ir.dtype("float32")) * cfg.nr_vectors) == (
        mr,
        2,
        nr,
    )
    assert cfg.mr * cfg.nr_vectors + cfg.nr_vectors + 1 <= registers


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_wide_operand_is_packed_into_contiguous_panels(preset: str) -> None:
    """B (K x N, rows 4 KiB apart) is copied once into N / nr panels of K x nr: read in place,
    every row of a panel maps to the same L1 set (measured AVX2 1024 x 256 x 1024: 20 GFLOP/s
    read in place, 66 packed)."""
    _, mr, nr, _ = PRESETS[preset]
    func = _matmul(192, 1024, 64)
    sch = _schedule(func, preset)
    text = sch.func.script()
    assert f'B_global = T.alloc_buffer(({1024 // nr}, 64, {nr}), "float32")' in text
    assert f"T.unroll({mr})" in text
    assert f"T.vectorized({nr})" in text
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("m", [64, 256])  # packed per panel; m blocked, packed before the nest
def test_linear_weight_rows_4k_apart_are_transposed_by_cache_lines(preset: str, m: int) -> None:
    """A linear weight ``W[n, k]`` (rows 4 KiB apart) is packed reading a cache line of one row
    per vector step (``k`` innermost, 16 floats), not gathering ``n`` innermost, one element
    per row, every row in one L1 set (128 x 2048 x 2048 on AVX-512: 21 GFLOP/s gathered, 66
    by lines)."""
    x = te.placeholder((m, 1024), "float32", name="x")
    w = te.placeholder((256, 1024), "float32", name="W")
    func = te.create_prim_func([x, w, tc.topi.dense(x, w)])
    sch = Matmul().apply(func, tc.Target(f"{preset} -num-cores=2"), False)
    assert isinstance(sch, tc.Schedule), sch
    lines = sch.func.script().splitlines()
    at = next(i for i, line in enumerate(lines) if 'T.block("W_global")' in line)
    vector = re.fullmatch(r"\s*for (\w+) in T\.vectorized\(16\):", lines[at - 1])
    assert vector is not None, lines[at - 1]
    k_binding = next(line for line in lines[at:] if "T.axis.spatial(1024," in line)
    assert k_binding.endswith(f"* 16 + {vector.group(1)})"), k_binding
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize(("m", "n", "k", "batch"), [(1000, 1000, 48, ()), (197, 197, 64, (2,))])
def test_ragged_shapes_keep_a_full_register_tile(
    preset: str, m: int, n: int, k: int, batch: tuple[int, ...]
) -> None:
    """Ragged extents are padded to tiles that keep at least 8 accumulators (4 cycles of FMA
    latency x 2 ports) and more FMAs than loads: on AVX2, 1000 columns to 2 vectors (1008;
    1000 = 125 x 8 by one vector left half the FMA units idle: 37 GFLOP/s against 52 padded)
    and 197 rows to 6; on AVX-512, to 2 vectors as well (1024 and 224 columns: 8 rows x 1
    vector issue 9 loads for 8 FMAs, measured 1000^3 71 GFLOP/s against 86, 16 x 197 x 64 x
    197 78 against 86)."""
    _, mr, cols, _ = PRESETS[preset]
    func = _matmul(m, n, k, batch)
    sch = _schedule(func, preset)
    text = sch.func.script()
    assert f"T.vectorized({cols})" in text
    unrolled = {int(x) for x in re.findall(r"T\.unroll\((\d+)\)", text)}
    assert max(unrolled) == (5 if (m, preset) == (1000, "avx2") else mr)  # 5 divides 1000
    rows = max(unrolled)
    shape = ", ".join(map(str, (*batch, -(-m // rows) * rows, -(-n // cols) * cols)))
    assert f"matmul_pad = T.alloc_buffer(({shape})" in text
    if batch:
        tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_padded_batched_gemm_copies_per_batch_without_guards(preset: str) -> None:
    """A batched GEMM with ragged extents (ViT attention, 197 x 64 x 197) runs its batch loop
    in parallel and makes each batch's zero-filled operand copies under it, unpadding each row
    tile's output right after it; no loop holds a guard gcc would run one element at a time
    (the write-back's tile columns past 197: 29 GFLOP/s on AVX-512, 77 without)."""
    func = _matmul(197, 197, 64, (4,))
    sch = _schedule(func, preset)
    text = sch.func.script()
    assert "for i0 in T.parallel(4):" in text, text
    assert text.count("T.parallel(") == 1, text
    _, mr, _, _ = PRESETS[preset]
    # the one guard left: the last row tile's rows past 197, the same for every column
    assert text.count("T.where") == 1, text
    assert f"T.where(i1_0 * {mr} + ax1_1 < 197)" in text, text
    # B's copy and the unpadding run over the 197 columns there are, at unit stride
    assert text.count("T.vectorized(197)") == 2, text
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize(("n", "k"), [(255, 511), (511, 255)])
def test_ragged_panels_are_packed_from_a_padded_copy_without_guards(
    preset: str, n: int, k: int
) -> None:
    """A ragged streamed operand packed into panels, under the tile (K x nr beyond the stack)
    or all at once before the nest (AVX2, K = 255), is zero-filled once before the nest, its
    in-range part copied without a guard, and the panels packed from that copy: a panel
    packed as it pads holds the last panel's column guard, run one element at a time
    (127 x 255 x 511 (M x K x N), AVX2: 0.61x numpy's GFLOP/s packed as it pads, 0.89x from
    the padded copy; AVX-512, packed under the tile: 0.86x, 1.01x)."""
    func = _matmul(127, n, k)
    sch = _schedule(func, preset)
    text = sch.func.script()
    pack = text.split('T.block("B_pad_global")')[1].split("T.block(")[0]
    assert "T.where" not in pack, text
    assert " if " not in pack, text
    copy = text.split('T.block("B_pad")')[0].splitlines()[-2]
    assert copy.strip() == f"for ax1 in T.vectorized({n}):", text  # B's in-range part
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_panels_are_packed_one_after_the_other(preset: str) -> None:
    """Packing a batch's B (64 x 128, rows 512 bytes apart: packed into panels) walks one
    panel after the other, each vector read from a row of B stored whole into one panel row
    (the copy along all 128 columns stored each vector across panels: AVX2 12 x 128 x 64 x
    128, 43 GFLOP/s against 62)."""
    _, _, nr, _ = PRESETS[preset]
    func = _matmul(128, 128, 64, (4,))
    sch = _schedule(func, preset)
    text = sch.func.script()
    assert f'B_global = T.alloc_buffer((4, {128 // nr}, 64, {nr}), "float32")' in text, text
    pack = text.split('T.block("B_global")')[0].splitlines()[-3:-1]
    assert [ln.strip() for ln in pack] == [
        f"for ax2_2_0, ax1_2 in T.grid({128 // nr}, 64):",
        f"for ax2_2_1 in T.vectorized({nr}):",
    ], text
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_rows_of_the_broadcast_operand_are_blocked_for_l2(preset: str) -> None:
    """A (256 x 2048, 2 MiB) is cut into blocks of rows that fit in half the target's L2,
    each running over every panel of B (packed once, before the nest) before the next: the
    block is read from memory once, then from L2 (AVX2 1024^3 on a Cascade Lake: 0.72x
    numpy's GFLOP/s streaming A from L3, 0.83x blocked)."""
    target = tc.Target(preset)
    _, _, nr, _ = PRESETS[preset]
    m, n, k = 256, 64, 2048
    func = _matmul(m, n, k)
    sch = _schedule(func, preset)
    text = sch.func.script()
    blocks = m * k * 4 // (target.l2_bytes // 2)
    assert blocks > 1
    assert f"T.parallel({blocks * (n // nr)})" in text, text
    assert f'B_global = T.alloc_buffer(({n // nr}, {k}, {nr}), "float32")' in text, text
    # the copy goes row after row of B, reading it at unit stride, each vector stored whole
    # (panel after panel read 64 bytes of each row, a page apart: twice the time at 1024^3)
    copy = text.split('T.block("B_global")')[0].splitlines()[-3:-1]
    assert [ln.strip() for ln in copy] == [
        f"for ax1_0 in range({n // nr}):",
        f"for ax1_1_1 in T.vectorized({nr}):",
    ], text
    assert f"for ax0 in T.parallel({k}):" in text, text
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-3)


def test_a_streamed_operand_beyond_the_last_level_cache_is_packed_per_panel() -> None:
    """128 tokens against a 4096 x 1536 weight (24 MiB, more than half the avx512 preset's
    L3): A's rows are not blocked for L2, which would pack the whole weight before the nest,
    written to memory and read back; each K x nr panel is packed under its own column tile,
    where it stays in L2."""
    text = _schedule(_matmul(128, 1536, 4096), "avx512").func.script()
    assert text.count("T.parallel(") == 1, text
    assert "T.parallel(48)" in text, text  # 1536 / 32 column tiles, rows not blocked


def test_a_prime_count_of_row_tiles_is_not_cut_into_single_tiles() -> None:
    """1016 rows are 127 AVX-512 row tiles (prime): the blocks L2 asks for (8) do not divide
    them and one-tile blocks would stream every panel of B from memory once per row tile,
    so the rows stay whole (B's 32 panels are the parallel loop)."""
    text = _schedule(_matmul(1016, 1024, 1024), "avx512").func.script()
    assert "T.parallel(32)" in text, text
    assert "T.parallel(4064)" not in text, text


@pytest.mark.parametrize(
    ("preset", "m", "k", "unroll"),
    [
        ("avx2", 1024, 64, 4),
        ("avx2", 192, 64, 2),
        ("avx2", 1000, 64, 2),
        ("avx2", 1024, 6, 2),
        ("avx2", 1024, 7, 1),
        ("avx512", 1024, 64, 2),
    ],
)
def test_k_loop_unrolled_for_the_tile(preset: str, m: int, k: int, unroll: int) -> None:
    """The K loop is unrolled until its three instructions are under a tenth of the steps':
    AVX2's 4 x 2 tile (14 a step) by 4, the 5 x 2 (17) and 6 x 2 (20, also 15 of 16
    registers: by 4 gcc spilled an accumulator) by 2, AVX-512's 8 x 2 (26) by 2 (by 4 gcc
    kept a pointer per row: 0.46x numpy at 128 x 2048 x 5632, 0.59x by 2); by a power of two
    dividing K only (no guard)."""
    rows = {1024: 8 if preset == "avx512" else 4, 192: 6, 1000: 5}[m]
    text = _schedule(_matmul(m, 64, k), preset).func.script()
    assert f"T.unroll({rows})" in text, text
    unrolled = [int(x) for x in re.findall(r"for k_\d+ in T\.unroll\((\d+)\)", text)]
    assert unrolled == ([unroll] if unroll > 1 else []), text


def _inner_loop(asm: str) -> list[str]:
    """The instructions of the innermost loop holding FMAs: from its label to the backward
    jump to it."""
    lines = [ln.strip() for ln in asm.splitlines()]
    for end, line in enumerate(lines):
        jump = re.match(r"j\w+\s+(\.L\d+)$", line)
        if not jump:
            continue
        start = lines.index(f"{jump.group(1)}:") if f"{jump.group(1)}:" in lines else end
        body = lines[start + 1 : end]
        if start < end and any(ln.startswith("vfmadd") for ln in body):
            return body
    raise AssertionError("no loop with FMAs in the assembly")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc for -S")
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_micro_kernel_assembly(preset: str, tmp_path: Path) -> None:
    """The inner loop is ``unroll`` K steps of mr x nr_vectors FMAs into vector registers,
    the broadcast operand's values and the panel's vectors loaded once each, no stack access
    (no accumulator spilled: AVX2's 6 x 2 tile unrolled by 4 spilled one)."""
    reg, mr, _, _ = PRESETS[preset]
    unroll = K_UNROLL[preset]
    target = tc.Target(preset)
    sch = _schedule(_matmul(192, 1024, 1024), preset)
    assert f"T.unroll({unroll})" in sch.func.script()
    source = tc.codegen.c_source(sch.mod, target)
    src = tmp_path / "k.c"
    src.write_text(source)
    compiler = find_compiler()
    flags = [f for f in build_flags(compiler, source, target.arch_flags) if f != "-shared"]
    subprocess.run([compiler, *flags, "-S", str(src), "-o", str(tmp_path / "k.s")], check=True)
    body = _inner_loop((tmp_path / "k.s").read_text())
    fmas = [ln for ln in body if ln.startswith("vfmadd")]
    assert len(fmas) == mr * 2 * unroll, body
    accumulators = {ln.split(",")[-1].strip() for ln in fmas}
    assert len(accumulators) >= mr * 2, body
    assert all(re.fullmatch(rf"%{reg}\d+", a) for a in accumulators), body
    assert len([ln for ln in body if ln.startswith("vbroadcastss")]) == mr * unroll, body
    assert not [ln for ln in body if "(%rsp)" in ln or "(%rbp)" in ln], body

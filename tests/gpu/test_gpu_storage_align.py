"""storage_align on shared-memory tiles: padded layout in CUDA, emulation numerics, nvcc build."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kernels import make_matmul, make_transpose

import tilecraft as tc
from tilecraft.ir import Allocate, post_order_visit
from tilecraft.ir.transform import PassContext, PrimFuncHooks
from tilecraft.lower import CollectStorageAlign, CompactThreadDims, ConvertBlocksToLoops, Sequential
from tilecraft.lower.collect_storage_align import STORAGE_ALIGN_ATTR, storage_align_table
from tilecraft.lower.gpu_pipeline import lower_gpu_function
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.testing import check_numeric

GPU = tc.Target("cuda -arch=sm_90")


def unpadded_transpose(n: int = 64, scope: str = "shared"):
    """The transpose kernel with a plain 32x32 tile (the reference kernel pads it by hand)."""
    func, ref = make_transpose(n, scope)
    t = n // 32
    text = func.script()
    tile = f"T.alloc_buffer(({t}, {t}, 32, 33)"
    assert tile in text
    return tc.script.parse(text.replace(tile, f"T.alloc_buffer(({t}, {t}, 32, 32)")), ref


def aligned_transpose(*aligns: tuple[int, int, int], scope: str = "shared"):
    func, ref = unpadded_transpose(scope=scope)
    sch = tc.Schedule(func)
    for axis, factor, offset in aligns:
        sch.storage_align(sch.get_block("load"), 0, axis, factor, offset)
    return func, sch, ref


def cuda_text(sch: tc.Schedule) -> str:
    return tc.codegen.cuda_source(sch.mod, GPU)


def shared_decl(src: str, name: str) -> int:
    m = re.search(rf"__shared__ [^;]*float {name}\[(\d+)\];", src)
    assert m is not None, src
    return int(m.group(1))


def test_transpose_tile_gets_row_stride_33():
    func, sch, ref = aligned_transpose((2, 32, 1))
    src = cuda_text(sch)
    assert shared_decl(src, "tile") == 32 * 33
    assert "tile[(((r * 264) + (ty * 33)) + tx)] = " in src
    assert "= tile[(((tx_1 * 33) + (r_1 * 8)) + ty_1)];" in src
    check_numeric(func, sch.func, emulate_gpu=True, target=GPU)
    check_numeric(sch.func, ref, emulate_gpu=True, target=GPU)


def test_dynamic_shared_tile_is_padded():
    _, sch, ref = aligned_transpose((2, 32, 1), scope="shared.dyn")
    src = cuda_text(sch)
    assert "float* tile = (float*)(tc_dyn_smem + 0);" in src
    assert "= tile[(((tx_1 * 33) + (r_1 * 8)) + ty_1)];" in src
    (kernel,) = build_cuda_source(sch.func, GPU).programs["transpose"].kernels
    (tile,) = kernel.dyn_shared
    assert tile.shape[0].value == 32 * 33
    check_numeric(sch.func, ref, emulate_gpu=True, target=GPU)


def test_unaligned_variant_keeps_the_plain_tile():
    func, _ = unpadded_transpose()
    src = tc.codegen.cuda_source(func, GPU)
    assert shared_decl(src, "tile") == 32 * 32
    assert "(ty * 32)" in src


def test_alignment_on_a_dropped_block_axis_is_dropped():
    # axis 0 is indexed by blockIdx.y only: thread-dim compaction removes it, and its request
    # with it; the request on axis 2 (renumbered to 0) still applies
    _, both, _ = aligned_transpose((0, 4, 1), (2, 32, 1))
    _, only_inner, _ = aligned_transpose((2, 32, 1))
    _, only_dropped, _ = aligned_transpose((0, 4, 1))
    assert cuda_text(both) == cuda_text(only_inner)
    assert shared_decl(cuda_text(only_dropped), "tile") == 32 * 32
    low = lower_gpu_function(both.func, GPU)
    assert STORAGE_ALIGN_ATTR not in low.attrs
    sizes = []
    post_order_visit(low.body, lambda n: sizes.append(n.buffer.shape[0].value) if isinstance(
        n, Allocate) else None)  # fmt: skip
    assert sizes == [32 * 33]


def test_table_is_renumbered_by_thread_dim_compaction():
    _, sch, _ = aligned_transpose((0, 4, 1), (2, 32, 1), (3, 2, 1))
    seen = {}

    def hook(name, _before, after):
        seen[name] = storage_align_table(after)

    with PassContext(instruments=[PrimFuncHooks([hook])]):
        Sequential([CollectStorageAlign(), ConvertBlocksToLoops(), CompactThreadDims()])(sch.func)
    assert seen["CollectStorageAlign"] == {"tile": ((0, 4, 1), (2, 32, 1), (3, 2, 1))}
    assert seen["CompactThreadDims"] == {"tile": ((0, 32, 1), (1, 2, 1))}


def aligned_matmul():
    func, ref = make_matmul()
    sch = tc.Schedule(func)
    sch.storage_align(sch.get_block("A_load"), 0, 1, 16, 1)  # rows of 16 -> stride 17
    sch.storage_align(sch.get_block("B_load"), 0, 1, 32, 8)  # rows of 32 -> stride 40
    return func, sch, ref


def test_matmul_shared_tiles_are_padded():
    func, sch, ref = aligned_matmul()
    src = cuda_text(sch)
    assert shared_decl(src, "A_sh") == 32 * 17
    assert shared_decl(src, "B_sh") == 16 * 40
    assert "* 17)" in src
    assert "* 40)" in src
    check_numeric(sch.func, ref, emulate_gpu=True, target=GPU, rtol=1e-4, atol=1e-5)
    check_numeric(func, sch.func, emulate_gpu=True, target=GPU, rtol=1e-4, atol=1e-5)


@pytest.mark.nvcc
def test_padded_tiles_compile_with_the_padded_shared_size():
    _, matmul, _ = aligned_matmul()
    info = ptxas_info(build_cuda_source(matmul.func, GPU).text, GPU.arch)
    (stats,) = info.values()
    assert not stats.spills
    assert stats.shared_bytes == (32 * 17 + 16 * 40) * 4
    _, transpose, _ = aligned_transpose((2, 32, 1))
    info = ptxas_info(build_cuda_source(transpose.func, GPU).text, GPU.arch)
    (stats,) = info.values()
    assert stats.shared_bytes == 32 * 33 * 4


@pytest.mark.gpu
@pytest.mark.parametrize("make", [aligned_matmul, lambda: aligned_transpose((2, 32, 1))])
def test_padded_kernels_run_on_gpu(make):
    from tilecraft.runtime import build_cuda

    _, sch, ref = make()
    lib = build_cuda(sch.func, GPU)
    rng = np.random.default_rng(0)
    ins = [rng.uniform(-1, 1, [int(s) for s in p.static_shape()]).astype(np.float32)
           for p in sch.func.params[:-1]]  # fmt: skip
    out = np.full(sch.func.params[-1].static_shape(), np.nan, np.float32)
    lib[sch.func.name](*ins, out)
    np.testing.assert_allclose(out, ref(*ins), rtol=1e-4, atol=1e-4)

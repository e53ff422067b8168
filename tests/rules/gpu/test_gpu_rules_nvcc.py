"""Every GPU rule's kernels at full size compile with ptxas for sm_80 and sm_90: no spills, no
local-memory arrays, within the register and shared-memory limits of the arch."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import workloads as w

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc, Var
from tilecraft.lower.gpu_verify import STATIC_SHARED_LIMIT
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info

FULL: dict[str, tuple[Callable[[], PrimFunc], str]] = {
    "softmax_fp16": (lambda: w.softmax(Var("m"), 4096, "float16"), "GeneralReduction"),
    "softmax_symbolic_cols": (lambda: w.softmax(4096, Var("n")), "GeneralReduction"),
    "softmax_channels_nchw": (w.softmax_nchw, "GeneralReduction"),
    "layer_norm": (lambda: w.layer_norm(Var("m"), 768), "GeneralReduction"),
    "group_norm": (w.group_norm, "GeneralReduction"),
    "rms_norm_fp16": (lambda: w.rms_norm(Var("m"), 4096, "float16"), "RMSNorm"),
    "sum_4d_non_last": (lambda: w.reduce_sum((8, 512, 32, 32), 1), "Reduction"),
    "sum_last": (lambda: w.reduce_sum((4096, 4096), 1), "Reduction"),
    "transpose": (lambda: w.transpose((4096, 4096)), "Transpose"),
    "transpose_batched_symbolic": (
        lambda: w.transpose((Var("b"), 512, 64), (0, 2, 1)),
        "Transpose",
    ),
    "ewise_chain": (lambda: w.ewise_chain((Var("n"), 4096), "float16"), "Fallback"),
}


@pytest.mark.nvcc
# every kernel for sm_80 in the default run; sm_90 under -m slow
@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(FULL))
def test_rule_kernels_compile_without_spills(name: str, arch: str) -> None:
    make, rule = FULL[name]
    target = tc.Target(f"cuda -arch={arch}")
    outcome = dl.try_rules(make(), dl.gpu.default_rules(), target, strict=True)
    assert outcome.rule == rule
    assert outcome.schedule is not None
    src = build_cuda_source(outcome.schedule.mod, target)
    info = ptxas_info(src.text, arch)
    limits = target.gpu
    assert limits is not None
    for prog in src.programs.values():
        for kernel in prog.kernels:
            stats = info[kernel.name]
            assert not stats.spills, (kernel.name, stats)
            assert stats.stack_bytes == 0, (kernel.name, stats)
            assert 0 < stats.registers <= limits.max_registers_per_thread
            threads = kernel.threads_per_block or 1
            assert stats.registers * threads <= limits.registers_per_block
            assert stats.shared_bytes <= STATIC_SHARED_LIMIT

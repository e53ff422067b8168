"""Building for the emulator stays quick: the C compiler's time dominates at reduced sizes,
so emulator units are compiled at a lower optimization level than CPU kernels."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from schedules import gemm_func, schedule_gemm

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.errors import BuildError
from tilecraft.runtime import compiler
from tilecraft.runtime.backend.emulated import EMULATOR_OPTIMIZE

SM80 = tc.Target("cuda -arch=sm_80")


def _softmax() -> tc.ir.PrimFunc:
    x = tc.te.placeholder((4, 64), "float32", name="X")
    return tc.te.create_prim_func([x, tc.topi.nn.softmax(x, axis=1)])


def test_emulator_units_compile_at_the_emulator_level(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    seen: list[tuple[str, ...]] = []
    original = compiler._compile_into

    def spy(folder: Path, key: str, source: str, cc: str, flags: tuple[str, ...]) -> Path:
        seen.append(flags)
        return original(folder, key, source, cc, flags)

    monkeypatch.setattr(compiler, "_compile_into", spy)
    func = schedule_gemm(gemm_func(32, 64, 32)).func
    tc.build(func, target=SM80, emulate="racecheck")
    assert len(seen) == 1
    assert EMULATOR_OPTIMIZE in seen[0]
    assert "-O3" not in seen[0]
    assert EMULATOR_OPTIMIZE != "-O3"


def test_cpu_kernels_keep_o3() -> None:
    cc = compiler.find_compiler()
    assert "-O3" in compiler.build_flags(cc, "int f(void) { return 0; }")
    assert "-O1" in compiler.build_flags(cc, "", optimize="-O1")
    with pytest.raises(BuildError, match="optimization level"):
        compiler.build_flags(cc, "", optimize="-Ofast")


@pytest.mark.slow
def test_rule_kernel_builds_for_racecheck_within_five_seconds(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    func = _softmax()
    sch = dl.try_rules(func, dl.gpu.default_rules(), SM80).schedule
    assert sch is not None
    start = time.perf_counter()
    tc.build(sch.func, target=SM80, emulate="racecheck")
    assert time.perf_counter() - start < 5.0

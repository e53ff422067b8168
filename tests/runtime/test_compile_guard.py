"""The C compile flags are guarded against a gcc 12.2 -O3 miscompile (issue 10, 6d).

gcc 12.2 at ``-O3`` distributes loops into ``memset``/``memcpy`` patterns and gets the result
wrong for a kernel tilecraft generates for a correct schedule; ``-fno-tree-loop-distribute-
patterns`` fixes it. ``data/gcc12_ldist_miscompile.c`` is the reduced plain-C reproducer.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.runtime.compiler import (
    FORBIDDEN_FLAGS,
    GUARD_FLAGS,
    compile_flags,
    find_compiler,
    link_flags,
)

REPRO = Path(__file__).parent / "data" / "gcc12_ldist_miscompile.c"


def _compiler_version(cc: str) -> str:
    proc = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.splitlines()[0] if proc.stdout else ""


def _run_repro(tmp_path: Path, flags: list[str]) -> subprocess.CompletedProcess[str]:
    cc = find_compiler()
    exe = tmp_path / "repro"
    build = subprocess.run(
        [cc, *flags, str(REPRO), "-o", str(exe), "-lm"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    return subprocess.run([str(exe), "2"], capture_output=True, text=True, check=False, timeout=60)


def _executable_flags() -> list[str]:
    """tilecraft's compile flags, for a program instead of a shared library."""
    flags = compile_flags(find_compiler())
    return [f for f in flags if f not in ("-shared", "-fPIC")] + list(link_flags(flags))


def test_compile_flags_carry_the_guard_and_no_unsafe_math() -> None:
    flags = compile_flags(find_compiler())
    if "gcc" in _compiler_version(find_compiler()).lower():
        assert set(GUARD_FLAGS) <= set(flags)
    assert not set(FORBIDDEN_FLAGS) & set(flags)


def test_c_reproducer_is_correct_with_tilecraft_flags(tmp_path: Path) -> None:
    proc = _run_repro(tmp_path, _executable_flags())
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip() == "0 wrong"


def test_c_reproducer_shows_the_gcc_bug_without_the_guard(tmp_path: Path) -> None:
    """Documents the compiler bug itself: plain -O3 on gcc 12.2 computes wrong values."""
    version = _compiler_version(find_compiler())
    if "12.2" not in version:
        pytest.skip(f"the miscompile was reduced on gcc 12.2; this compiler is {version!r}")
    assert _run_repro(tmp_path, ["-O3"]).returncode == 1
    assert _run_repro(tmp_path, ["-O3", *GUARD_FLAGS]).returncode == 0


def _symbolic_batch_matmul() -> tc.ir.PrimFunc:
    n = te.size_var("n")
    a = te.placeholder((n, 16, 16), "float32", name="A")
    b = te.placeholder((n, 16, 8), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def test_rfactor_decompose_schedule_computes_the_right_values() -> None:
    """The schedule the fuzz campaign found miscompiled: fuse, split, rfactor, decompose."""
    sch = tc.Schedule(_symbolic_batch_matmul())
    blk = sch.get_block("matmul")
    _, i, j, k = sch.get_loops(blk)
    sch.fuse(i, j)
    _, ki = sch.split(k, factors=[None, 8])
    rf = sch.rfactor(ki)
    sch.decompose_reduction(rf, sch.get_loops(rf)[2])
    sch.decompose_reduction(blk, sch.get_loops(blk)[2])
    lib = tc.build(sch.func)
    rng = np.random.default_rng(0)
    for n in (1, 3):
        a = rng.standard_normal((n, 16, 16)).astype("float32")
        b = rng.standard_normal((n, 16, 8)).astype("float32")
        c = np.full((n, 16, 8), np.nan, dtype="float32")
        lib["main"](a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

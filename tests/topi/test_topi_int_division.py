"""Integer floor_divide / floor_mod / truncating divide match numpy and never trap (issue 10, 6c).

C traps (SIGFPE) on ``x / 0`` and ``MIN / -1``; numpy gives 0 for ``x // 0`` and ``x % 0``
and wraps ``MIN // -1`` to ``MIN``. The kernels run in a child process, so a crash fails the
test instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.arith import Analyzer, evaluate
from tilecraft.ir import Div, FloorDiv, FloorMod, IntImm, Var

ROOT = Path(tc.__file__).resolve().parents[1]
DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint32")

_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tilecraft as tc
    from tilecraft import te, topi

    out = {}
    for dt in json.loads(sys.argv[1]):
        info = np.iinfo(dt)
        lo = int(info.min)
        a = np.array([7, 0, lo, lo, info.max, 5, 3, 1, 0, lo], dtype=dt)
        if info.min < 0:
            b = np.array([0, 0, -1, 0, -1, 2, -2, -1, -1, 3], dtype=dt)
            a[5:8] = np.array([-5, 5, lo + 1], dtype=dt)
        else:
            b = np.array([0, 0, 1, 0, 2, 2, 3, 1, 1, 3], dtype=dt)
        n = a.size
        A = te.placeholder((n,), dt, name="A")
        B = te.placeholder((n,), dt, name="B")
        stages = [
            topi.floor_divide(A, B),
            topi.floor_mod(A, B),
            te.compute((n,), lambda i: A[i] // B[i], name="fd"),
            te.compute((n,), lambda i: A[i] % B[i], name="fm"),
            te.compute((n,), lambda i: A[i] // 0, name="fd0"),  # folded constant divisor
            te.compute((n,), lambda i: A[i] % 0, name="fm0"),
        ]
        lib = tc.build(te.create_prim_func([A, B, *stages]))
        res = [np.full(n, 99, dtype=dt) for _ in stages]
        lib["main"](a, b, *res)
        out[dt] = {"a": a.tolist(), "b": b.tolist(), "res": [r.tolist() for r in res]}
    print(json.dumps(out))
    """
)


def _run_child(dtypes: tuple[str, ...]) -> dict[str, dict[str, list[object]]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(list(dtypes))],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"child died (status {proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_integer_division_matches_numpy_without_trapping() -> None:
    results = _run_child(DTYPES)
    with np.errstate(all="ignore"):
        for dt in DTYPES:
            got = results[dt]
            a, b = np.array(got["a"], dtype=dt), np.array(got["b"], dtype=dt)
            zero = np.zeros_like(a)
            want = [a // b, a % b, a // b, a % b, zero, zero]
            for k, (g, w) in enumerate(zip(got["res"], want, strict=True)):
                np.testing.assert_array_equal(np.array(g, dtype=dt), w, err_msg=f"{dt} stage {k}")


@pytest.mark.parametrize("dt", ["int8", "int32", "int64"])
def test_constant_folding_follows_numpy(dt: str) -> None:
    ana = Analyzer()
    lo = int(np.iinfo(dt).min)
    cases = [(7, 0), (-7, 0), (0, 0), (lo, -1), (-7, 2), (7, -2), (lo, 3)]
    with np.errstate(all="ignore"):
        for a, b in cases:
            x, y = np.array([a], dtype=dt), np.array([b], dtype=dt)
            for cls, want in ((FloorDiv, x // y), (FloorMod, x % y)):
                got = ana.simplify(cls(IntImm(dt, a), IntImm(dt, b)))
                assert isinstance(got, IntImm), (cls.__name__, a, b, got)
                assert got.value == int(want[0]), (cls.__name__, a, b, got)
            trunc = ana.simplify(Div(IntImm(dt, a), IntImm(dt, b)))
            assert isinstance(trunc, IntImm)
            want_t = 0 if b == 0 else int(np.trunc(np.float64(a) / b)) if a != lo else None
            if want_t is not None:
                assert trunc.value == want_t, (a, b, trunc)


def test_zero_divisor_folds_and_evaluates_to_zero() -> None:
    x = Var("x", "int32")
    ana = Analyzer()
    for e in (x // 0, x % 0, Div(x, IntImm("int32", 0))):
        got = ana.simplify(e)
        assert isinstance(got, IntImm)
        assert got.value == 0
        assert evaluate(e, {x: -5}) == 0

"""Reductions over float16/bfloat16 accumulate in float32 (sum, mean, prod, softmax,
log-softmax, layer/RMS/group norm): a float16 accumulator loses the small addends once the sum
is large (RMS norm over 4096 columns was off by 0.06) and overflows past 65504 (``inf``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.ir import Block, DataType, IterKind, post_order_visit

te, topi = tc.te, tc.topi
COLS = 4096


def _run(make: Callable[[tc.te.Tensor], tc.te.Tensor], x: np.ndarray) -> np.ndarray:
    xt = te.placeholder(x.shape, "float16", name="X")
    out = make(xt)
    func = te.create_prim_func([xt, out])
    res = np.zeros(tuple(int(s.value) for s in out.shape), "float16")
    tc.build(func, "cpu")["main"](x, res)
    return res


def _accumulators(make: Callable[[tc.te.Tensor], tc.te.Tensor], dtype: str) -> list[DataType]:
    xt = te.placeholder((4, 64), dtype, name="X")
    func = te.create_prim_func([xt, make(xt)])
    found: list[DataType] = []

    def visit(node: object) -> None:
        if isinstance(node, Block) and any(iv.kind is IterKind.REDUCE for iv in node.iter_vars):
            found.extend(w.buffer.dtype for w in node.writes)

    post_order_visit(func.body, visit)
    return found


def _rms(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5)


def _layer_norm(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.mean(axis=1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=1, keepdims=True) + 1e-5)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


CASES = {
    "rms_norm": (lambda x: topi.rms_norm(x, None), _rms),
    "layer_norm": (lambda x: topi.layer_norm(x, None, None), _layer_norm),
    "softmax": (lambda x: topi.softmax(x), _softmax),
    "sum": (lambda x: topi.sum(x, axis=1), lambda x: x.astype(np.float64).sum(axis=1)),
    "mean": (lambda x: topi.mean(x, axis=1), lambda x: x.astype(np.float64).mean(axis=1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float16_reductions_match_float64(name: str) -> None:
    make, ref = CASES[name]
    rng = np.random.default_rng(0)
    x = rng.uniform(3.0, 5.0, (2, COLS)).astype("float16")  # sum of squares > 65504
    got = _run(make, x).astype(np.float64)
    expected = ref(x)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-3 * np.abs(expected).max())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", [*sorted(CASES), "log_softmax", "prod", "group_norm"])
def test_accumulators_are_float32(name: str, dtype: str) -> None:
    makes = {
        **{k: v[0] for k, v in CASES.items()},
        "log_softmax": lambda x: topi.log_softmax(x),
        "prod": lambda x: topi.prod(x, axis=1),
        "group_norm": lambda x: topi.group_norm(x, None, None, num_groups=2),
    }
    accs = _accumulators(makes[name], dtype)
    sums = [d for d in accs if str(d) == "float32"]
    assert sums, accs
    assert all(str(d) in ("float32", dtype) for d in accs)

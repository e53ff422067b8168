"""Reshape legalized group by group: splits and merges of neighbouring axes never divide by a
symbolic extent; the result is numpy's reshape for static, symbolic and unit shapes."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.graph import GraphBuilder, get_pipeline
from tilecraft.graph._grouped_reshape import reshape_groups
from tilecraft.ir import IntImm, Var

SEQ = Var("seq", "int32")


def _shape(*dims: int | Var) -> list[tc.ir.Expr]:
    return [IntImm("int32", d) if isinstance(d, int) else d for d in dims]


@pytest.mark.parametrize(
    ("src", "dst", "groups"),
    [
        ((1, SEQ, 2048), (1, SEQ, 32, 64), [([0], []), ([], [0]), ([1], [1]), ([2], [2, 3])]),
        ((SEQ, 4, 8), (SEQ, 32), [([0], [0]), ([1, 2], [1])]),
        ((2, 3, 5), (3, 10), [([0, 1, 2], [0, 1])]),
        ((6, 4), (8, 3), [([0, 1], [0, 1])]),
        ((1, 1), (), [([0], []), ([1], [])]),
        ((SEQ, 4), (4, SEQ), None),  # a symbolic extent moves: not a split or a merge
        ((SEQ, 4), (SEQ * 4,), None),  # merged with another axis
        ((4, 0), (0, 4), None),
    ],
)
def test_reshape_groups(src: tuple, dst: tuple, groups: list | None) -> None:
    assert reshape_groups(_shape(*src), _shape(*dst)) == groups


def _reshape_module(src: tuple[int | str, ...], dst: tuple[int | str, ...]) -> tc.IRModule:
    bb = GraphBuilder()
    x = bb.param("x", src, "float32")
    y = bb.emit("reshape", [x], {"shape": dst})
    return tc.IRModule({"main": bb.finish(bb.emit("exp", [y]), "main")})


@pytest.mark.parametrize(
    ("src", "dst", "seq"),
    [
        ((1, "seq", 64), (1, "seq", 4, 16), 5),
        ((2, "seq", 4, 16), (2, "seq", 64), 3),
        ((1, 8, "seq", 16), (1, 2, 4, "seq", 16), 7),
        ((6, 4), (8, 3), 0),
        ((2, 3, 5), (3, 10), 0),
        ((4, "seq"), ("seq", 4), 5),  # not grouped: topi.reshape's flat index
    ],
)
def test_legalized_reshape_matches_numpy(src: tuple, dst: tuple, seq: int) -> None:
    with tc.Target("cpu"):
        mod = get_pipeline("zero")(_reshape_module(src, dst))
    exe = tc.build(mod, "cpu")
    x = np.random.default_rng(seq).standard_normal([seq if d == "seq" else d for d in src])
    want = np.exp(x.astype("float32").reshape([seq if d == "seq" else d for d in dst]))
    np.testing.assert_allclose(exe["main"](x.astype("float32")), want, rtol=1e-6)


def _division_arguments(source: str) -> list[str]:
    """The argument text of every ``tc_floordiv``/``tc_floormod`` call in C ``source``."""
    out = []
    for m in re.finditer(r"tc_floor(?:div|mod)_int32\(", source):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        out.append(source[m.end() : i - 1])
    return out


def test_inlined_reshapes_divide_nothing_in_the_vector_loop() -> None:
    # regression: reshape (1, seq, 64) -> (1, seq, 4, 16), transpose, reshape to
    # (1, 2, 2, seq, 16), inlined into one kernel by the Injective rule, read x at indices
    # divided by seq * 64 inside the vector loop (a call and a branch per element: the
    # Llama prefill's fused rotary kernels took 25 ms instead of 5)
    bb = GraphBuilder()
    x = bb.param("x", (1, "seq", 64), "float32")
    y = bb.emit("reshape", [x], {"shape": (1, "seq", 4, 16)})
    y = bb.emit("permute_dims", [y], {"axes": (0, 2, 1, 3)})
    y = bb.emit("reshape", [y], {"shape": (1, 2, 2, "seq", 16)})
    mod = tc.IRModule({"main": bb.finish(bb.emit("exp", [y]), "main")})
    with tc.Target("cpu"):
        mod = get_pipeline("zero")(mod)
        mod = dl.ApplyDefaultSchedule(*dl.cpu.default_rules(), strict=True)(mod)
    ((_, func),) = list(mod.prim_funcs())
    source = tc.codegen.c_source(tc.IRModule({"k": func}))
    assert "for (int32_t i4 = 0; i4 < 16; ++i4)" in source  # the vector loop
    assert not [a for a in _division_arguments(source) if "i4" in a]
    exe = tc.build(mod, "cpu")
    xv = np.random.default_rng(0).standard_normal((1, 6, 64)).astype("float32")
    want = np.exp(xv.reshape(1, 6, 4, 16).transpose(0, 2, 1, 3).reshape(1, 2, 2, 6, 16))
    np.testing.assert_allclose(exe["main"](xv), want, rtol=1e-6)

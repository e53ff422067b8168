"""Symbolic shapes against static ones: one model compiled once with a symbolic extent and
once per size with that size fixed, timed in the same run.

Models (nn frontend, weights bound, ``tc.compile`` defaults):

- the MLP Linear 1000 -> 333, ReLU, Linear 333 -> 17 with a symbolic batch ``n``
  (sizes 1, 7, 64);
- a transformer attention block on ``(1, s, hidden)`` with a symbolic sequence length ``s``
  (sizes 1, 17, 128): q, k and v projections, ``scaled_dot_product_attention`` over
  ``heads`` heads of 64, output projection (12 heads by default, ``--heads`` for fewer).

For each size the table gives the median time of the symbolic compile, of the static compile
and their ratio (the goal: at most 1.2). Calls go through the graph function object
(``exe["forward"]`` looked up once): the same entry and argument checks on both sides, so the
ratio compares the kernels and the executor's planning for a symbolic extent. After the table,
per size, the per-kernel times (``exe.profile``) of both compiles, to say where a gap is.
One thread (``BENCH_THREADS`` to change), OpenBLAS/OpenMP environment as in
``_bench_common``; the header names the ISA tilecraft compiles for.

Run: ``python benchmarks/symbolic_bench.py [--rounds N] [--only mlp|attention] [--heads H]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("BENCH_THREADS", "1")

# isort: off
import _bench_common as bench  # first: sets the thread environment before numpy loads

# isort: on

import argparse
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812


class MLP(nn.Module):
    """Linear 1000 -> 333, ReLU, Linear 333 -> 17 (the issue's symbolic-batch model)."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(1000, 333)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(333, 17)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """``fc2(relu(fc1(x)))``."""
        return self.fc2(self.relu(self.fc1(x)))


class AttentionBlock(nn.Module):
    """q/k/v projections, SDPA over ``heads`` heads of 64, output projection."""

    def __init__(self, heads: int) -> None:
        self.heads = heads
        hidden = heads * 64
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.o_proj = nn.Linear(hidden, hidden)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """``o_proj(sdpa(q, k, v))`` on ``x`` of shape ``(1, s, hidden)``."""
        s = x.shape[1]

        def heads(t: nn.Tensor) -> nn.Tensor:
            return t.reshape(1, s, self.heads, 64).permute_dims(0, 2, 1, 3)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        o = F.scaled_dot_product_attention(q, k, v)
        return self.o_proj(o.permute_dims(0, 2, 1, 3).reshape(1, s, self.heads * 64))


def random_params(params: dict[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
    """Weights of the exported shapes, small normal values."""
    rng = np.random.default_rng(seed)
    return {k: (0.05 * rng.standard_normal(v.shape)).astype(np.float32) for k, v in params.items()}


def compile_for(model: nn.Module, shape: tuple[Any, ...], weights: dict[str, np.ndarray]) -> Any:
    """``tc.compile`` of ``model`` on input ``shape`` with ``weights`` bound; (exe, seconds
    with an empty compile cache)."""
    mod, params = model.export({"forward": {"x": nn.spec.Tensor(shape, "float32")}})
    return bench.cold_compile(mod, {k: weights[k] for k in params})


def run_model(
    name: str,
    model: nn.Module,
    shape: Callable[[Any], tuple[Any, ...]],
    sizes: list[int],
    rounds: int,
) -> list[tuple[str, int, float, float]]:
    """Compile symbolic once and static per size; check, time, profile; table rows."""
    _, params = model.export({"forward": {"x": nn.spec.Tensor(shape(1), "float32")}})
    weights = random_params(dict(params))
    sym, sym_s = compile_for(model, shape("n"), weights)
    print(f"{name}: symbolic compile {sym_s:.2f} s (cold compile cache)")
    rows = []
    for n in sizes:
        static, static_s = compile_for(model, shape(n), weights)
        x = np.random.default_rng(n).standard_normal(shape(n)).astype(np.float32)
        f_sym, f_static = sym["forward"], static["forward"]
        np.testing.assert_allclose(f_sym(x), f_static(x), rtol=1e-4, atol=1e-4)
        t_sym, t_static = bench.per_call(
            [lambda f=f_sym, x=x: f(x), lambda f=f_static, x=x: f(x)], rounds
        )
        print(f"  size {n}: static compile {static_s:.2f} s (cold)")
        for label, exe in (("symbolic", sym), ("static", static)):
            shares = bench.kernel_shares(exe, "forward", [x], runs=7)
            text = ", ".join(f"{k} {t * 1e6:.1f}" for k, t in shares)
            print(f"    {label:<9} kernels (us): {text}")
        rows.append((name, n, t_sym, t_static))
    return rows


def isa_line() -> str:
    """The ISA tilecraft compiles for on this host."""
    target = tc.Target("cpu")
    names = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("sse4.2", "SSE4.2"))
    isa = next((label for feat, label in names if feat in target.features), target.arch)
    return f"ISA: {isa} ({target.simd_bits}-bit SIMD); tilecraft target: {target}"


def main(argv: list[str] | None = None) -> int:
    """Compile, check, time; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--only", default="", help="mlp or attention")
    parser.add_argument("--heads", type=int, default=12, help="attention heads of 64")
    args = parser.parse_args(argv)
    print(bench.environment_line())
    print(isa_line())
    rows = []
    if args.only in ("", "mlp"):
        rows += run_model(
            "MLP 1000-333-17, batch n", MLP(), lambda n: (n, 1000), [1, 7, 64], args.rounds
        )
    if args.only in ("", "attention"):
        block = AttentionBlock(args.heads)
        hidden = args.heads * 64
        rows += run_model(
            f"attention {args.heads}x64, seq s",
            block,
            lambda s: (1, s, hidden),
            [1, 17, 128],
            args.rounds,
        )
    print()
    print(f"{'model':<32}{'size':>6}{'symbolic us':>14}{'static us':>12}{'ratio':>8}")
    for name, n, t_sym, t_static in rows:
        print(
            f"{name:<32}{n:>6}{t_sym * 1e6:>14,.1f}{t_static * 1e6:>12,.1f}{t_sym / t_static:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

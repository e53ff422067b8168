"""The hand-written reference kernels: exact print form, parse, JSON and cross-process hashes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from reference_kernels import ALL

import tilecraft as tc
from tilecraft.ir import Block, PrimFunc
from tilecraft.ir.visitor import post_order_visit

ROOT = Path(__file__).resolve().parents[2]


def _parse(name: str) -> PrimFunc:
    func = tc.script.parse(ALL[name])
    assert isinstance(func, PrimFunc)
    return func


@pytest.mark.parametrize("name", sorted(ALL))
def test_print_is_the_handwritten_text(name: str) -> None:
    assert _parse(name).script() == textwrap.dedent(ALL[name]).strip()


@pytest.mark.parametrize("name", sorted(ALL))
def test_print_parse_structural_equal(name: str) -> None:
    func = _parse(name)
    again = tc.script.parse(func.script())
    assert tc.ir.structural_equal(func, again)
    assert tc.ir.structural_hash(func) == tc.ir.structural_hash(again)


@pytest.mark.parametrize("name", sorted(ALL))
def test_json_roundtrip(name: str) -> None:
    func = _parse(name)
    back = tc.ir.from_json(tc.ir.to_json(func))
    assert tc.ir.structural_equal(func, back)
    assert back.script() == func.script()


def test_kernel_contents() -> None:
    blocks: list[str] = []
    post_order_visit(
        _parse("softmax").body, lambda n: isinstance(n, Block) and blocks.append(n.name)
    )
    assert blocks == ["A_max", "A_sum", "B", "root"]
    gpu = _parse("gpu_fused_matmul_add_relu")
    assert gpu.attrs["tir.is_scheduled"] is True
    root = gpu.body.block  # type: ignore[attr-defined]
    assert root.name == "root"
    assert [b.scope for b in root.alloc_buffers] == ["local", "local"]


def test_hash_is_identical_across_processes() -> None:
    here = {name: tc.ir.structural_hash(_parse(name)) for name in sorted(ALL)}
    assert len(set(here.values())) == len(ALL)
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import tilecraft as tc; "
        "from reference_kernels import ALL; "
        "print(json.dumps({k: tc.ir.structural_hash(tc.script.parse(v)) for k, v in ALL.items()}))"
    )
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", code, str(Path(__file__).parent)],
            env=env, capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        assert json.loads(out.stdout) == here

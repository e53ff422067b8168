"""The command on the TinyLlama layer: ``compile``, ``inspect``, ``run``, ``bench --json``.

The model file defines the Llama-style decoder layer of ``tests/models/llama.py`` whose
``forward`` is its ``prefill`` entry (symbolic sequence length) and a numpy ``reference``.
The default run uses the small layer of the same structure; the TinyLlama-1.1B sizes run
under the ``slow`` marker. The library the command writes must load in the runtime and give
what ``tc.compile`` of the same model gives.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from models import llama

import tilecraft as tc

TESTS = Path(__file__).resolve().parents[1]

MODEL = """
import sys

sys.path.insert(0, {tests!r})

import numpy as np

from models import llama
from models.common import random_params

cfg = llama.{config}


class Prefill(llama.LlamaDecoderLayer):
    def forward(self, x):
        return self.prefill(x)


model = Prefill(cfg)
_weights = random_params(model, 0)
inputs = llama.specs(cfg)["prefill"]


def reference(x):
    return llama.np_layer(x, _weights, cfg).astype(np.float32)
"""


@pytest.mark.parametrize(
    ("config", "seq"),
    [("SMALL", 5), pytest.param("TINYLLAMA", 8, marks=pytest.mark.slow)],
)
def test_compile_inspect_run_bench_on_the_llama_layer(
    invoke_json: Any, tmp_path: Path, config: str, seq: int
) -> None:
    cfg = getattr(llama, config)
    model_file = tmp_path / "llama_layer.py"
    model_file.write_text(MODEL.format(tests=str(TESTS), config=config))
    lib = tmp_path / "llama.tc"

    report = invoke_json("compile", model_file, "-o", lib, "-q")
    assert report["output"] == str(lib)
    assert report["target"]["kind"] == "cpu"
    kernels = report["kernels"]
    assert len(kernels) > 5
    assert all(k["scheduled_by"] and k["scheduled_by"].startswith("rule:") for k in kernels)

    info = invoke_json("inspect", lib)
    assert info["runs_here"] is True
    assert info["params_bound"] is True
    (fn,) = info["functions"]
    assert fn["function"] == "forward"
    assert fn["inputs"] == [{"name": "x", "shape": f"Tensor((1, seq, {cfg.hidden}), float32)"}]
    assert fn["result"] == f"Tensor((1, seq, {cfg.out_width}), float32)"
    assert [k["kernel"] for k in info["kernels"]] == [k["kernel"] for k in kernels]

    (x,) = llama.example_inputs(cfg, "prefill", seed=2, tokens=seq)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    ran = invoke_json("run", lib, "-i", f"x={tmp_path / 'x.npy'}", "-o", out)
    assert ran["function"] == "forward"
    assert ran["output"]["shape"] == [1, seq, cfg.out_width]
    got = np.load(out)

    # the library the command wrote, in the loader, gives what tc.compile gives
    ns = runpy.run_path(str(model_file))
    mod, params = ns["model"].export({"forward": ns["inputs"]})
    compiled = tc.compile(mod, target="cpu", params=params)
    want = compiled["forward"](x)
    loaded = tc.runtime.load_module(lib)
    np.testing.assert_array_equal(loaded["forward"](x), want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, llama.np_layer(x, params, cfg), rtol=2e-3, atol=2e-3)

    bench = invoke_json(
        "bench", lib, "--reference", model_file, "--dim", f"seq={seq}", "--number", 1,
        "--repeat", 1,
    )  # fmt: skip
    ours, ref = bench["results"]
    assert bench["function"] == "forward"
    assert ours["name"] == "tilecraft"
    assert ours["median_s"] > 0
    assert ref["name"] == "numpy"
    assert ref["match"] is True
    assert ref["max_abs_err"] < 1e-3

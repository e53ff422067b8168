"""The exact JSON round trip of graph programs (symbolic shapes included)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import LowerError
from tilecraft.frontend import nn
from tilecraft.lower.graph_program import GraphProgram
from tilecraft.lower.graph_program_json import program_from_json, program_to_json


class _Net(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(8, 12)
        self.norm = nn.LayerNorm(12)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(12, 4)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.norm(self.fc1(x))))


def _program() -> GraphProgram:
    spec = {"forward": {"x": nn.spec.Tensor(("batch", "seq", 8), "float32")}}
    mod, params = _Net().export(spec)
    exe = tc.compile(mod, target="cpu", params=params)
    return exe.functions["forward"].program


def test_round_trip_is_exact_and_keeps_symbolic_extents_shared() -> None:
    prog = _program()
    assert len(prog.shape_vars) == 2
    assert prog.constants
    text = program_to_json(prog)
    back = program_from_json(text, prog.constants)
    assert program_to_json(back) == text
    for field in dataclasses.fields(GraphProgram):  # every field survives
        a, b = getattr(prog, field.name), getattr(back, field.name)
        if field.name == "constants":
            assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        elif field.name in ("slot_types", "shape_vars"):
            assert len(a) == len(b)
        else:
            assert a == b, field.name
    assert [t.dtype for t in prog.slot_types] == [t.dtype for t in back.slot_types]
    shapes = (tuple(t.shape for t in prog.slot_types), prog.shape_vars)
    shapes_back = (tuple(t.shape for t in back.slot_types), back.shape_vars)
    assert tc.ir.structural_equal(shapes, shapes_back, map_free_vars=True)
    assert [v.name for v in back.shape_vars] == ["batch", "seq"]
    # a symbolic extent is one Var, shared by the parameters' shapes and shape_vars
    batch = back.shape_vars[0]
    assert back.param_types[0].shape[0] is batch
    assert any(any(d is batch for d in t.shape) for t in back.step_types)


def test_constants_must_match_what_was_written() -> None:
    prog = _program()
    text = program_to_json(prog)
    with pytest.raises(LowerError, match=r"expects .* constants"):
        program_from_json(text, prog.constants[1:])
    wrong = [c.astype(np.float64) for c in prog.constants]
    with pytest.raises(LowerError, match=r"dtype float64, expected .* float32"):
        program_from_json(text, wrong)
    doc = json.loads(text)
    doc["version"] = 2
    with pytest.raises(LowerError, match="version 2"):
        program_from_json(json.dumps(doc), prog.constants)
    doc = json.loads(text)
    doc["steps"][0][1] = ["x"]
    with pytest.raises(LowerError, match="step args must be a list of integers"):
        program_from_json(json.dumps(doc), prog.constants)

"""An exact JSON round trip of :class:`~tilecraft.lower.graph_program.GraphProgram`.

A program's arrays (its constants) are not JSON: :func:`program_to_json` writes everything
else, and :func:`program_from_json` takes the constants back from the caller (a deployable
library stores them as ``.npy`` members next to the document). Layout (``"tilecraft.graph_
program"``, version 1)::

    {"format": "tilecraft.graph_program", "version": 1, "name": "forward",
     "param_names": ["x"], "dtypes": ["float32", ...],          # one per slot
     "ir": "<tc.ir JSON of (slot shapes, shape_vars)>",
     "constants": [[slot, index, [shape...], "float32"], ...],
     "steps": [["fused_matmul", [0, 3], 4, [0]], ...], "ret_slot": 6}

A program returning a tuple has ``"ret_slots": [6, 7]`` in place of ``"ret_slot"``.

A step calling an external library routine has a fifth entry, its attributes:
``["blas.gemm", [0, 3], 4, [0], {"trans_a": false, "trans_b": true}]``; a ``bind_symbol``
step an empty object: ``["tc.bind_symbol", [5], 6, [5], {}]``; the ``(lower, upper)`` bounds
of the bind_symbol steps (extent expressions, in step order) are then a third part of ``ir``.

The slot shapes and the symbolic extents are one ``tc.ir`` document, so a symbolic extent
comes back as one :class:`~tilecraft.ir.Var` shared by every shape that names it (the
executor binds extents by identity). Reading never evaluates anything; every malformed
document is a :class:`~tilecraft.errors.LowerError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import IRError, LowerError
from ..ir import DataType, Expr, IntImm, Var, as_expr, dtype, from_json, to_json
from .graph_program import BIND_SYMBOL, GraphProgram, GraphStep, TensorSpec

FORMAT = "tilecraft.graph_program"
VERSION = 1
_KEYS = {"format", "version", "name", "param_names", "dtypes", "ir", "constants", "steps"}


def program_to_json(program: GraphProgram) -> str:
    """``program`` without its constants' values, as one JSON document (module docstring)."""
    shapes = tuple(t.shape for t in program.slot_types)
    inverse = {c: s for s, c in program.const_of_slot.items()}
    constants = []
    for index, arr in enumerate(program.constants):
        constants.append([inverse[index], index, list(arr.shape), str(arr.dtype)])
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "name": program.name,
        "param_names": list(program.param_names),
        "dtypes": [str(t.dtype) for t in program.slot_types],
        "ir": to_json(_ir_parts(program, shapes)),
        "constants": constants,
        "steps": [_step_json(s) for s in program.steps],
    }
    if program.returns_tuple:
        doc["ret_slots"] = list(program.ret_slots)
    else:
        doc["ret_slot"] = program.ret_slot
    return json.dumps(doc)


def constant_specs(text: str) -> list[tuple[tuple[int, ...], str]]:
    """Shape and numpy dtype name of each constant a document expects, by index."""
    doc = _document(text)
    return [(tuple(_ints(c[2], "constant shape")), str(c[3])) for c in _constants(doc)]


def program_from_json(text: str, constants: Sequence[np.ndarray]) -> GraphProgram:
    """The program :func:`program_to_json` wrote, with ``constants`` as its arrays.

    Raises
    ------
    LowerError
        When the document is malformed, or a constant's shape or dtype is not the one the
        program was written with.
    """
    doc = _document(text)
    try:
        shapes, shape_vars, *rest = from_json(doc["ir"])
        bounds = list(rest[0]) if rest else []  # written since bind_symbol steps
        dtypes = [dtype(str(d)) for d in doc["dtypes"]]
        slot_types = tuple(_spec(s, d) for s, d in zip(shapes, dtypes, strict=True))
        steps = tuple(_step(s, bounds) for s in doc["steps"])
        if not all(isinstance(v, Var) for v in shape_vars):
            raise TypeError("shape_vars must be Vars")
        params = tuple(_strs(doc["param_names"]))
        name = doc["name"]
        if not isinstance(name, str):
            raise TypeError("name must be a string")
        returns_tuple = "ret_slots" in doc
        rets = _ints(doc["ret_slots"], "ret_slots") if returns_tuple else [doc["ret_slot"]]
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in rets):
            raise TypeError("ret_slot must be an integer")
    except (IRError, TypeError, ValueError, KeyError) as e:
        raise LowerError(f"malformed graph program document: {e}") from None
    const_of_slot, arrays = _bind_constants(_constants(doc), constants)
    return GraphProgram(
        name, params, slot_types, arrays, const_of_slot, steps, tuple(rets),
        tuple(shape_vars), returns_tuple,
    )  # fmt: skip


def _document(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise LowerError(f"graph program document is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise LowerError(f"not a {FORMAT} document")
    if doc.get("version") != VERSION:
        raise LowerError(
            f"graph program document version {doc.get('version')!r}; this reader knows {VERSION}"
        )
    if set(doc) - {"ret_slot"} != _KEYS and set(doc) - {"ret_slots"} != _KEYS:
        want = sorted([*_KEYS, "ret_slot"])
        raise LowerError(
            f"graph program document keys {sorted(doc)}, expected {want} (or ret_slots)"
        )
    return doc


def _constants(doc: dict[str, Any]) -> list[list[Any]]:
    items = doc["constants"]
    if not isinstance(items, list) or not all(
        isinstance(c, list) and len(c) == 4 and isinstance(c[2], list) for c in items
    ):
        raise LowerError("graph program document: constants must be [slot, index, shape, dtype]")
    return items


def _bind_constants(
    items: list[list[Any]], constants: Sequence[np.ndarray]
) -> tuple[dict[int, int], tuple[np.ndarray, ...]]:
    """Slot -> constant index, and the arrays (checked against what was written)."""
    if len(items) != len(constants):
        raise LowerError(f"graph program expects {len(items)} constants, got {len(constants)}")
    const_of_slot: dict[int, int] = {}
    arrays: list[np.ndarray | None] = [None] * len(items)
    for slot, index, shape, dt in items:
        valid = isinstance(index, int) and 0 <= index < len(items) and isinstance(slot, int)
        if not valid or arrays[index] is not None:
            raise LowerError("graph program document: constants need distinct slots and indices")
        arr = np.asarray(constants[index])
        if arr.shape != tuple(shape) or str(arr.dtype) != dt:
            raise LowerError(
                f"graph program constant {index} has shape {arr.shape} and dtype {arr.dtype}, "
                f"expected {tuple(shape)} and {dt}"
            )
        arr = np.ascontiguousarray(arr).reshape(arr.shape)  # ascontiguousarray makes 0-d 1-d
        arr.flags.writeable = False
        const_of_slot[slot] = index
        arrays[index] = arr
    return const_of_slot, tuple(a for a in arrays if a is not None)


def _spec(shape: object, dt: DataType) -> TensorSpec:
    if not isinstance(shape, tuple) or not all(isinstance(s, Expr) for s in shape):
        raise TypeError("a slot shape must be a list of expressions")
    return TensorSpec(shape, dt)


def _step_json(s: GraphStep) -> list[Any]:
    out: list[Any] = [s.func, list(s.args), s.out, list(s.free_after)]
    if s.extern is not None:
        out.append(dict(s.extern))
    if s.bind is not None:  # its bounds are in the "ir" document (extent expressions)
        out.append({})
    return out


def _ir_parts(program: GraphProgram, shapes: tuple[tuple[Expr, ...], ...]) -> tuple[Any, ...]:
    """(slot shapes, shape vars), and the bind_symbol steps' bounds if it has any."""
    bounds = tuple(
        (as_expr(s.bind[0]), as_expr(s.bind[1])) for s in program.steps if s.bind is not None
    )
    parts = (shapes, tuple(program.shape_vars))
    return (*parts, bounds) if bounds else parts


def _step(raw: object, bounds: list[Any]) -> GraphStep:
    if not isinstance(raw, list) or len(raw) not in (4, 5) or not isinstance(raw[0], str):
        raise TypeError("a step is [func, args, out, free_after] or [..., extern attributes]")
    func, args, out, free = raw[:4]
    if not isinstance(out, int):
        raise TypeError("a step's output slot is an integer")
    extern, bind = None, None
    if len(raw) == 5:
        attrs = raw[4]
        if not isinstance(attrs, dict) or not all(
            isinstance(v, (bool, int, float, str)) for v in attrs.values()
        ):
            raise TypeError("a step's extern attributes are an object of scalars")
        if func == BIND_SYMBOL:
            if attrs or not bounds or not _bounds_pair(bounds[0]):
                raise TypeError("a bind_symbol step's bounds are a pair of the ir document's")
            lo, hi = (b.value if isinstance(b, IntImm) else b for b in bounds.pop(0))
            bind = (lo, hi)
        else:
            extern = tuple(sorted(attrs.items()))
    return GraphStep(
        func, tuple(_ints(args, "step args")), out, tuple(_ints(free, "free_after")), extern, bind
    )


def _bounds_pair(item: object) -> bool:
    return isinstance(item, tuple) and len(item) == 2 and all(isinstance(e, Expr) for e in item)


def _ints(values: object, what: str) -> list[int]:
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    ):
        raise LowerError(f"graph program document: {what} must be a list of integers")
    return values


def _strs(values: object) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TypeError("param_names must be a list of strings")
    return values

"""JSON form of a trace: encoding, and a hardened decoder.

Package-private; :meth:`Trace.as_json` / :meth:`Trace.from_json` are the public entry points.

Format (version 1)::

    {"format": "tilecraft.trace", "version": 1, "insts": [
        {"kind": "split", "inputs": [{"rv": "l1"}, [{"rv": "v4"}, {"rv": "v5"}]],
         "attrs": {"preserve_unit_iters": true}, "decision": null, "outputs": ["l6", "l7"]},
        ...]}

A handle is ``{"rv": name}`` (``b``/``l``/``v`` prefix for block/loop/value), an index map
``{"index_map": {"vars": [...], "exprs": [...]}}`` with expressions as ints,
``{"var": k}`` or ``[op, a, b]``.

The decoder accepts only what replays can use, and raises only :class:`TraceFormatError`:
nesting deeper than :data:`MAX_DEPTH`, ints outside int64, NaN or infinities, unknown kinds,
missing or extra fields, output counts and handle prefixes that do not fit the kind, and
arguments the primitive's own checks reject (a loop handle where a block is expected, a
negative split factor, an unknown storage scope ...). A trace that loads therefore prints,
and its replay either succeeds or raises ScheduleError / TraceFormatError.
"""

from __future__ import annotations

import json
from typing import Any

from .. import ir
from ..errors import IRError, TilecraftError
from .arguments import INT64_MAX, INT64_MIN, RejectedError, normalise_args
from .handles import HANDLE_PREFIX, BlockRV, ExprRV, Location, LoopRV
from .instruction import INSTRUCTION_KINDS, Instruction, InstructionKind
from .primitives._annotation_values import annotation_problem
from .primitives.index_map import IndexMap

FORMAT = "tilecraft.trace"
VERSION = 1
MAX_DEPTH = 64
"""Deepest nesting of JSON arrays/objects a trace may have."""

_KEYS = {"kind", "inputs", "attrs", "decision", "outputs"}
_EXPR_OPS = ("Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Min", "Max")


class TraceFormatError(TilecraftError):
    """A serialised trace is malformed (bad JSON, unknown instruction, undefined handle)."""


# ------------------------------------------------------------------------------------------
# encoding
def output_names(insts: list[Instruction]) -> dict[int, str]:
    """``id(handle) -> name`` (``b0``, ``l1``, ``v2`` ...) for every output, in order."""
    names: dict[int, str] = {}
    counter = 0
    for inst in insts:
        for out in inst.outputs:
            names[id(out)] = f"{HANDLE_PREFIX[type(out)]}{counter}"
            counter += 1
    return names


def encode(insts: list[Instruction]) -> str:
    """The JSON text of a trace made of ``insts``."""
    names = output_names(insts)
    items = [
        {
            "kind": inst.kind,
            "inputs": [_enc(v, names) for v in inst.inputs],
            "attrs": {k: _enc(v, names, literal=True) for k, v in inst.attrs},
            "decision": _enc(inst.decision, names, literal=True),
            "outputs": [names[id(o)] for o in inst.outputs],
        }
        for inst in insts
    ]
    return json.dumps({"format": FORMAT, "version": VERSION, "insts": items})


def _enc(value: Any, names: dict[int, str], literal: bool = False) -> Any:
    if isinstance(value, IndexMap):
        pos = {id(v): k for k, v in enumerate(value.initial_indices)}
        return {
            "index_map": {
                "vars": [v.name for v in value.initial_indices],
                "exprs": [_expr_enc(e, pos) for e in value.final_indices],
            }
        }
    if isinstance(value, BlockRV | LoopRV | ExprRV) and id(value) in names and not literal:
        return {"rv": names[id(value)]}
    if isinstance(value, BlockRV | LoopRV):
        raise TraceFormatError(f"trace: handle {value!r} is not defined by an earlier instruction")
    if isinstance(value, list | tuple):
        return [_enc(v, names, literal) for v in value]
    if isinstance(value, dict):
        return {"dict": {k: _enc(v, names, literal) for k, v in value.items()}}
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return int(value)
    raise TraceFormatError(f"trace: cannot serialise value {value!r}")


def _expr_enc(e: ir.Expr, pos: dict[int, int]) -> Any:
    if isinstance(e, ir.Var):
        if id(e) not in pos:
            raise TraceFormatError(f"trace: index map uses free variable {e.name!r}")
        return {"var": pos[id(e)]}
    if isinstance(e, ir.IntImm):
        return int(e.value)
    name = type(e).__name__
    if name in _EXPR_OPS and isinstance(e, ir.BinaryOp):
        return [name, _expr_enc(e.a, pos), _expr_enc(e.b, pos)]
    raise TraceFormatError(f"trace: index map expression {name} is not supported")


# ------------------------------------------------------------------------------------------
# decoding
def _reject_constant(name: str) -> Any:
    raise TraceFormatError(f"trace: {name} is not allowed (only finite numbers)")


def decode(text: object) -> list[Instruction]:
    """The instructions of trace JSON ``text``; TraceFormatError on anything malformed."""
    if not isinstance(text, str | bytes | bytearray):
        raise TraceFormatError(f"trace: expected JSON text, got {type(text).__name__}")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, int digit limit, nesting
        raise TraceFormatError(f"trace: not valid JSON: {type(e).__name__}: {e}") from None
    _check_shape(data)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TraceFormatError(f'trace: expected an object with "format": "{FORMAT}"')
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise TraceFormatError(f"trace: unsupported version {data.get('version')!r}")
    raw = data.get("insts")
    if not isinstance(raw, list):
        raise TraceFormatError('trace: "insts" must be a list')
    env: dict[str, BlockRV | LoopRV | ExprRV] = {}
    return [_decode_inst(i, item, env) for i, item in enumerate(raw)]


def _check_shape(data: object) -> None:
    """Depth at most MAX_DEPTH, ints within int64 (iterative: no recursion on input)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TraceFormatError(f"trace: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not INT64_MIN <= value <= INT64_MAX
        ):
            raise TraceFormatError("trace: an integer does not fit in 64 bits")


def _decode_inst(i: int, item: Any, env: dict[str, BlockRV | LoopRV | ExprRV]) -> Instruction:
    where = f"instruction {i}"
    if not isinstance(item, dict) or set(item) != _KEYS:
        raise TraceFormatError(
            f"trace: {where}: expected keys kind, inputs, attrs, decision, outputs"
        )
    kind = INSTRUCTION_KINDS.get(item["kind"]) if isinstance(item["kind"], str) else None
    if kind is None:
        raise TraceFormatError(f"trace: {where}: unknown instruction kind {item['kind']!r}")
    where = f"instruction {i} ({kind.name})"
    if not isinstance(item["inputs"], list) or len(item["inputs"]) != len(kind.inputs):
        raise TraceFormatError(f"trace: {where}: expected {len(kind.inputs)} inputs")
    if not isinstance(item["attrs"], dict) or set(item["attrs"]) != set(kind.attr_names):
        raise TraceFormatError(f"trace: {where}: expected attrs {sorted(kind.attr_names)}")
    if item["decision"] is not None and not kind.sampling:
        raise TraceFormatError(f"trace: {where}: only sampling instructions have a decision")
    inputs = tuple(_dec(v, env, where) for v in item["inputs"])
    attrs = tuple((n, _dec(item["attrs"][n], env, where, literal=True)) for n in kind.attr_names)
    decision = _dec(item["decision"], env, where, literal=True)
    _check_arguments(kind, inputs, attrs, decision, where)
    outputs = _decode_outputs(kind, item["outputs"], dict(attrs), decision, env, where)
    return Instruction(kind.name, inputs, attrs, decision, outputs)


def _check_arguments(
    kind: InstructionKind, inputs: tuple[Any, ...], attrs: tuple[tuple[str, Any], ...],
    decision: Any, where: str,
) -> None:  # fmt: skip
    """The primitive's own argument checks, on the decoded values (which are kept as is)."""
    arguments: dict[str, Any] = dict(zip(kind.inputs, inputs, strict=True))
    arguments.update(attrs)
    if kind.sampling:
        arguments["decision"] = decision
    try:
        normalise_args(kind.checks, arguments)
    except RejectedError as e:
        raise TraceFormatError(f"trace: {where}: {e.detail}") from None
    if kind.name == "annotate":
        target, key, value = (arguments[n] for n in ("block_or_loop", "key", "value"))
        problem = annotation_problem(key, value, isinstance(target, LoopRV))
        if problem is not None:
            raise TraceFormatError(f"trace: {where}: {problem.short}; {problem.requires}")


def _decode_outputs(
    kind: InstructionKind, outs: Any, attrs: dict[str, Any], decision: Any,
    env: dict[str, BlockRV | LoopRV | ExprRV], where: str,
) -> tuple[BlockRV | LoopRV | ExprRV, ...]:  # fmt: skip
    if not isinstance(outs, list) or not all(isinstance(o, str) for o in outs):
        raise TraceFormatError(f"trace: {where}: outputs must be a list of names")
    arity = {"one": (1, 1), "none": (0, 0), "many": (0, None)}[kind.outputs]
    if len(outs) < arity[0] or (arity[1] is not None and len(outs) > arity[1]):
        raise TraceFormatError(f"trace: {where}: {len(outs)} outputs for a {kind.outputs!r} kind")
    want = HANDLE_PREFIX.get(kind.output_type) if kind.output_type is not None else None
    values = _output_values(kind.name, attrs, decision, len(outs))
    outputs: list[BlockRV | LoopRV | ExprRV] = []
    for name, val in zip(outs, values, strict=True):
        if name in env or not name[1:].isdigit() or not name[1:].isascii():
            raise TraceFormatError(f"trace: {where}: bad or repeated output name {name!r}")
        if want is not None and name[0] != want:
            raise TraceFormatError(f"trace: {where}: output {name!r} should start with {want!r}")
        rv: BlockRV | LoopRV | ExprRV
        if name[0] == "b":
            rv = BlockRV("?", -1)
        elif name[0] == "l":
            rv = LoopRV(None, Location.UNBOUND)
        elif name[0] == "v":
            rv = ExprRV(val)
        else:
            raise TraceFormatError(f"trace: {where}: output name {name!r} has no b/l/v prefix")
        env[name] = rv
        outputs.append(rv)
    return tuple(outputs)


def _dec(value: Any, env: dict[str, Any], where: str, literal: bool = False) -> Any:
    if isinstance(value, list):
        return tuple(_dec(v, env, where, literal) for v in value)
    if isinstance(value, dict):
        if set(value) == {"rv"} and isinstance(value["rv"], str) and not literal:
            if value["rv"] not in env:
                raise TraceFormatError(
                    f"trace: {where}: handle {value['rv']!r} used before defined"
                )
            return env[value["rv"]]
        if set(value) == {"index_map"} and isinstance(value["index_map"], dict):
            return _index_map_dec(value["index_map"], where)
        if set(value) == {"dict"} and isinstance(value["dict"], dict):
            return {k: _dec(v, env, where, literal) for k, v in value["dict"].items()}
        raise TraceFormatError(f"trace: {where}: unexpected object {value!r:.80}")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TraceFormatError(f"trace: {where}: unexpected value {value!r:.80}")


def _output_values(kind: str, attrs: dict[str, Any], decision: Any, n: int) -> list[int]:
    """Values of sampled outputs implied by a decision (0 when not implied)."""
    if kind == "sample_perfect_tile" and isinstance(decision, tuple) and len(decision) == n:
        if all(isinstance(d, int) and not isinstance(d, bool) for d in decision):
            return [int(d) for d in decision]
        return [0] * n
    if kind == "sample_categorical" and isinstance(decision, int) and n == 1:
        cands = attrs.get("candidates")
        if (
            isinstance(cands, tuple)
            and 0 <= decision < len(cands)
            and isinstance(cands[decision], int)
        ):
            return [int(cands[decision])]
    return [0] * n


def _index_map_dec(data: dict[str, Any], where: str) -> IndexMap:
    names, exprs = data.get("vars"), data.get("exprs")
    if (
        set(data) != {"vars", "exprs"}
        or not isinstance(names, list)
        or not isinstance(exprs, list)
        or not exprs
        or not all(isinstance(n, str) and n.isidentifier() for n in names)
        or len(set(names)) != len(names)
    ):
        raise TraceFormatError(f"trace: {where}: malformed index map")
    vars_ = tuple(ir.Var(n, ir.dtype("int32")) for n in names)
    try:
        return IndexMap(vars_, tuple(_expr_dec(x, vars_, where) for x in exprs))
    except IRError as e:
        raise TraceFormatError(f"trace: {where}: malformed index map: {e}") from None


def _expr_dec(x: Any, vars_: tuple[ir.Var, ...], where: str) -> ir.Expr:
    if isinstance(x, int) and not isinstance(x, bool):
        return ir.IntImm(ir.dtype("int32"), x)
    if isinstance(x, dict) and set(x) == {"var"} and isinstance(x["var"], int):
        if isinstance(x["var"], bool) or not 0 <= x["var"] < len(vars_):
            raise TraceFormatError(f"trace: {where}: index map variable out of range")
        return vars_[x["var"]]
    if isinstance(x, list) and len(x) == 3 and x[0] in _EXPR_OPS:
        cls = getattr(ir, str(x[0]))
        out: ir.Expr = cls(_expr_dec(x[1], vars_, where), _expr_dec(x[2], vars_, where))
        return out
    raise TraceFormatError(f"trace: {where}: malformed index map expression {x!r:.80}")

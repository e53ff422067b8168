"""The trace: the instructions a schedule applied, with their sampling decisions.

A trace prints as Python that reproduces it (:meth:`Trace.as_python`), round-trips exactly
through JSON (:meth:`Trace.as_json` / :meth:`Trace.from_json`; no pickle, no eval) and replays
onto a fresh schedule of the original function (:meth:`Trace.apply_to_schedule`).
:meth:`Trace.with_decision` changes one sampling decision, which is how mutators explore.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import TilecraftError
from .state import BlockRV, ExprRV, LoopRV

if TYPE_CHECKING:
    from .instruction import Instruction
    from .schedule import Schedule

FORMAT = "tilecraft.trace"
VERSION = 1


class TraceFormatError(TilecraftError):
    """A serialised trace is malformed (bad JSON, unknown instruction, undefined handle)."""


_PREFIX = {BlockRV: "b", LoopRV: "l", ExprRV: "v"}


class Trace:
    """An ordered list of :class:`~tilecraft.schedule.instruction.Instruction`.

    Parameters
    ----------
    insts
        The instructions, oldest first.
    """

    __slots__ = ("_insts",)

    def __init__(self, insts: Sequence[Instruction] = ()) -> None:
        self._insts: list[Instruction] = list(insts)

    # -- container --------------------------------------------------------------------------
    @property
    def insts(self) -> tuple[Instruction, ...]:
        """The instructions, oldest first."""
        return tuple(self._insts)

    def __len__(self) -> int:
        return len(self._insts)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self._insts)

    def __getitem__(self, i: int) -> Instruction:
        return self._insts[i]

    def append(self, inst: Instruction) -> None:
        """Add ``inst`` at the end (used by ``@primitive``)."""
        self._insts.append(inst)

    def copy(self) -> Trace:
        """A shallow copy (instructions are immutable)."""
        return Trace(self._insts)

    def truncate(self, n: int) -> None:
        """Drop every instruction after the first ``n`` (used to roll back ``try_``)."""
        del self._insts[n:]

    # -- decisions --------------------------------------------------------------------------
    def sampling_indices(self) -> list[int]:
        """Indices of the instructions that carry a sampling decision."""
        from .instruction import INSTRUCTION_KINDS

        return [i for i, inst in enumerate(self._insts) if INSTRUCTION_KINDS[inst.kind].sampling]

    def with_decision(self, inst_index: int, decision: Any) -> Trace:
        """A new trace whose instruction ``inst_index`` uses ``decision`` on replay.

        Raises
        ------
        TraceFormatError
            When the index is out of range or the instruction does not sample.
        """
        from .instruction import INSTRUCTION_KINDS, _freeze

        if not -len(self._insts) <= inst_index < len(self._insts):
            raise TraceFormatError(
                f"with_decision: index {inst_index} out of range for {len(self._insts)} "
                "instructions"
            )
        inst = self._insts[inst_index]
        if not INSTRUCTION_KINDS[inst.kind].sampling:
            raise TraceFormatError(
                f"with_decision: instruction {inst_index} ({inst.kind}) has no decision; "
                f"sampling instructions are at {self.sampling_indices()}"
            )
        insts = list(self._insts)
        insts[inst_index] = inst.with_decision(_freeze(decision))
        return Trace(insts)

    # -- replay -----------------------------------------------------------------------------
    def apply_to_schedule(self, sch: Schedule) -> None:
        """Replay every instruction on ``sch`` (a fresh schedule of the original function).

        Raises
        ------
        ScheduleError
            When an instruction no longer applies (for example a decision that does not fit).
        """
        from .instruction import INSTRUCTION_KINDS

        state = sch.state
        rv_map: dict[int, Any] = {}
        for inst in self._insts:
            kind = INSTRUCTION_KINDS[inst.kind]
            values = dict(zip(kind.inputs, (_map_rvs(v, rv_map) for v in inst.inputs), strict=True))
            values.update(inst.attrs)
            if kind.sampling:
                values["decision"] = inst.decision
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for name, pkind, _ in kind.params:
                if name not in values:
                    continue
                if pkind.name == "VAR_POSITIONAL":
                    args.extend(values[name])
                elif pkind.name == "KEYWORD_ONLY":
                    kwargs[name] = values[name]
                else:
                    args.append(values[name])
            result = kind.func(state, *args, **kwargs)
            outs = (
                ()
                if result is None
                else tuple(result)
                if isinstance(result, list | tuple)
                else (result,)
            )
            if len(outs) != len(inst.outputs):
                raise state.error(
                    f"replay of {inst.kind} returned {len(outs)} handles, the trace expects "
                    f"{len(inst.outputs)}",
                    hint="the trace was recorded on a different function",
                )
            for old, new in zip(inst.outputs, outs, strict=True):
                rv_map[id(old)] = new

    # -- printing ---------------------------------------------------------------------------
    def _names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        counter = 0
        for inst in self._insts:
            for out in inst.outputs:
                names[id(out)] = f"{_PREFIX[type(out)]}{counter}"
                counter += 1
        return names

    def as_python(self) -> str:
        """Python statements (``sch.<primitive>(...)``) that reproduce this trace."""
        from .instruction import INSTRUCTION_KINDS

        names = self._names()
        lines: list[str] = []
        for inst in self._insts:
            kind = INSTRUCTION_KINDS[inst.kind]
            parts: list[str] = []
            first = True
            inputs = dict(zip(kind.inputs, inst.inputs, strict=True))
            attrs = dict(inst.attrs)
            for name, pkind, default in kind.params:
                if name == "decision":
                    continue
                if name in inputs:
                    text = _py(inputs[name], names)
                    if pkind.name == "VAR_POSITIONAL":
                        parts.extend(_py(v, names) for v in inputs[name])
                        first = False
                        continue
                else:
                    value = attrs[name]
                    if not first and _same(value, default):
                        continue
                    text = _py(value, names)
                if first and pkind.name == "POSITIONAL_OR_KEYWORD":
                    parts.append(text)
                else:
                    parts.append(f"{name}={text}")
                first = False
            if kind.sampling:
                parts.append(f"decision={_py(inst.decision, names)}")
            call = f"sch.{inst.kind}({', '.join(parts)})"
            outs = [names[id(o)] for o in inst.outputs]
            if kind.outputs == "none" or (kind.outputs == "many" and not outs):
                lines.append(call)
            elif kind.outputs == "one":
                lines.append(f"{outs[0]} = {call}")
            elif len(outs) == 1:
                lines.append(f"({outs[0]},) = {call}")
            else:
                lines.append(f"{', '.join(outs)} = {call}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.as_python()

    def __repr__(self) -> str:
        return f"Trace({len(self._insts)} instructions)"

    # -- JSON -------------------------------------------------------------------------------
    def as_json(self) -> str:
        """A JSON string holding every instruction; :meth:`from_json` restores it exactly."""
        names = self._names()
        insts = [
            {
                "kind": inst.kind,
                "inputs": [_enc(v, names) for v in inst.inputs],
                "attrs": {k: _enc(v, names, literal=True) for k, v in inst.attrs},
                "decision": _enc(inst.decision, names, literal=True),
                "outputs": [names[id(o)] for o in inst.outputs],
            }
            for inst in self._insts
        ]
        return json.dumps({"format": FORMAT, "version": VERSION, "insts": insts})

    @staticmethod
    def from_json(text: str) -> Trace:
        """Rebuild a trace from :meth:`as_json` text.

        Raises
        ------
        TraceFormatError
            When ``text`` is not valid JSON or not a well-formed trace.
        """
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError) as e:
            raise TraceFormatError(f"trace: not valid JSON: {e}") from e
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TraceFormatError(f'trace: expected an object with "format": "{FORMAT}"')
        if data.get("version") != VERSION:
            raise TraceFormatError(f"trace: unsupported version {data.get('version')!r}")
        raw = data.get("insts")
        if not isinstance(raw, list):
            raise TraceFormatError('trace: "insts" must be a list')
        env: dict[str, Any] = {}
        return Trace([_decode_inst(i, item, env) for i, item in enumerate(raw)])


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _py(value: Any, names: dict[int, str]) -> str:
    if _is_index_map(value):
        params = ", ".join(v.name for v in value.initial_indices)
        outs = ", ".join(_expr_py(e) for e in value.final_indices)
        return (
            f"lambda {params}: ({outs},)"
            if len(value.final_indices) == 1
            else f"lambda {params}: ({outs})"
        )
    if isinstance(value, BlockRV | LoopRV | ExprRV) and id(value) in names:
        return names[id(value)]
    if isinstance(value, BlockRV | LoopRV):
        raise TraceFormatError(f"trace: handle {value!r} is not defined by an earlier instruction")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_py(v, names) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_py(v, names)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    raise TraceFormatError(f"trace: cannot print value {value!r}")


def _enc(value: Any, names: dict[int, str], literal: bool = False) -> Any:
    if _is_index_map(value):
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


def _dec(value: Any, env: dict[str, Any], where: str) -> Any:
    if isinstance(value, list):
        return tuple(_dec(v, env, where) for v in value)
    if isinstance(value, dict):
        if set(value) == {"rv"} and isinstance(value["rv"], str):
            if value["rv"] not in env:
                raise TraceFormatError(
                    f"trace: {where}: handle {value['rv']!r} used before defined"
                )
            return env[value["rv"]]
        if set(value) == {"index_map"} and isinstance(value["index_map"], dict):
            return _index_map_dec(value["index_map"], where)
        if set(value) == {"dict"} and isinstance(value["dict"], dict):
            return {k: _dec(v, env, where) for k, v in value["dict"].items()}
        raise TraceFormatError(f"trace: {where}: unexpected object {value!r}")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TraceFormatError(f"trace: {where}: unexpected value {value!r}")


def _decode_inst(i: int, item: Any, env: dict[str, Any]) -> Instruction:
    from .instruction import INSTRUCTION_KINDS, Instruction

    where = f"instruction {i}"
    if not isinstance(item, dict) or set(item) != {
        "kind",
        "inputs",
        "attrs",
        "decision",
        "outputs",
    }:
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
    outs = item["outputs"]
    if not isinstance(outs, list) or not all(isinstance(o, str) for o in outs):
        raise TraceFormatError(f"trace: {where}: outputs must be a list of names")
    inputs = tuple(_dec(v, env, where) for v in item["inputs"])
    attrs = tuple((n, _dec(item["attrs"][n], env, where)) for n in kind.attr_names)
    decision = _dec(item["decision"], env, where)
    values = _output_values(kind.name, dict(attrs), decision, len(outs))
    outputs: list[BlockRV | LoopRV | ExprRV] = []
    for name, val in zip(outs, values, strict=True):
        if name in env or not name[1:].isdigit():
            raise TraceFormatError(f"trace: {where}: bad or repeated output name {name!r}")
        rv: BlockRV | LoopRV | ExprRV
        if name[0] == "b":
            rv = BlockRV("?", -1)
        elif name[0] == "l":
            rv = LoopRV(None, "unbound")
        elif name[0] == "v":
            rv = ExprRV(val)
        else:
            raise TraceFormatError(f"trace: {where}: output name {name!r} has no b/l/v prefix")
        env[name] = rv
        outputs.append(rv)
    return Instruction(kind.name, inputs, attrs, decision, tuple(outputs))


def _output_values(kind: str, attrs: dict[str, Any], decision: Any, n: int) -> list[int]:
    """Values of sampled outputs implied by a decision (0 when not implied)."""
    if kind == "sample_perfect_tile" and isinstance(decision, tuple) and len(decision) == n:
        return (
            [int(d) for d in decision if isinstance(d, int)]
            if all(isinstance(d, int) for d in decision)
            else [0] * n
        )
    if kind == "sample_categorical" and isinstance(decision, int) and n == 1:
        cands = attrs.get("candidates")
        if (
            isinstance(cands, tuple)
            and 0 <= decision < len(cands)
            and isinstance(cands[decision], int)
        ):
            return [int(cands[decision])]
    return [0] * n


def _map_rvs(value: Any, rv_map: dict[int, Any]) -> Any:
    if isinstance(value, BlockRV | LoopRV | ExprRV):
        hit = rv_map.get(id(value))
        if hit is not None:
            return hit
        if isinstance(value, ExprRV):
            return int(value)
        raise TraceFormatError(f"trace: replay: handle {value!r} is not defined by the trace")
    if isinstance(value, tuple):
        return [_map_rvs(v, rv_map) for v in value]
    return value


# -- index maps (transform_layout) ----------------------------------------------------------
_EXPR_OPS = ("Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Min", "Max")
_EXPR_SYM = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%"}


def _is_index_map(value: Any) -> bool:
    return hasattr(value, "initial_indices") and hasattr(value, "final_indices")


def _expr_enc(e: Any, pos: dict[int, int]) -> Any:
    from ..ir import IntImm, Var

    if isinstance(e, Var):
        if id(e) not in pos:
            raise TraceFormatError(f"trace: index map uses free variable {e.name!r}")
        return {"var": pos[id(e)]}
    if isinstance(e, IntImm):
        return int(e.value)
    name = type(e).__name__
    if name in _EXPR_OPS:
        return [name, _expr_enc(e.a, pos), _expr_enc(e.b, pos)]
    raise TraceFormatError(f"trace: index map expression {name} is not supported")


def _expr_py(e: Any) -> str:
    from ..ir import IntImm, Var

    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        return str(e.value)
    name = type(e).__name__
    if name in _EXPR_SYM:
        return f"({_expr_py(e.a)} {_EXPR_SYM[name]} {_expr_py(e.b)})"
    if name in ("Min", "Max"):
        return f"T.{name.lower()}({_expr_py(e.a)}, {_expr_py(e.b)})"
    raise TraceFormatError(f"trace: index map expression {name} is not supported")


def _index_map_dec(data: dict[str, Any], where: str) -> Any:
    from importlib import import_module

    from .. import ir

    names, exprs = data.get("vars"), data.get("exprs")
    if (
        not isinstance(names, list)
        or not isinstance(exprs, list)
        or not all(isinstance(n, str) and n for n in names)
    ):
        raise TraceFormatError(f"trace: {where}: malformed index map")
    vars_ = tuple(ir.Var(n, ir.dtype("int32")) for n in names)

    def dec(x: Any) -> Any:
        if isinstance(x, bool):
            raise TraceFormatError(f"trace: {where}: malformed index map expression")
        if isinstance(x, int):
            return ir.IntImm(ir.dtype("int32"), x)
        if isinstance(x, dict) and set(x) == {"var"} and isinstance(x["var"], int):
            if not 0 <= x["var"] < len(vars_):
                raise TraceFormatError(f"trace: {where}: index map variable out of range")
            return vars_[x["var"]]
        if isinstance(x, list) and len(x) == 3 and x[0] in _EXPR_OPS:
            cls = getattr(ir, str(x[0]))
            return cls(dec(x[1]), dec(x[2]))
        raise TraceFormatError(f"trace: {where}: malformed index map expression {x!r}")

    index_map = import_module("tilecraft.schedule.primitives.index_map").IndexMap
    return index_map(vars_, tuple(dec(x) for x in exprs))

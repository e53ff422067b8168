"""How the schedule package is put together: no import cycle among its core modules, no
primitive reached through an import string, the public names kept."""

from __future__ import annotations

import ast
from pathlib import Path

import tilecraft.schedule as sched

PKG = Path(sched.__file__).resolve().parent
CORE = ["handles", "arguments", "instruction", "_trace_json", "trace", "state"]


def _schedule_imports(path: Path) -> set[str]:
    """Modules of tilecraft.schedule imported anywhere in ``path`` (TYPE_CHECKING included)."""
    rel = path.relative_to(PKG).parent.parts
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = list(rel)[: len(rel) - (node.level - 1)] if node.level > 1 else list(rel)
            target = [*base, *(node.module.split(".") if node.module else [])]
            if target:
                out.add(".".join(target))
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "tilecraft.schedule."
        ):
            out.add((node.module or "").removeprefix("tilecraft.schedule."))
    return out


def test_core_modules_import_without_cycles() -> None:
    graph = {m: _schedule_imports(PKG / f"{m}.py") & set(CORE) for m in CORE}
    # each core module imports only modules listed before it
    for k, module in enumerate(CORE):
        assert graph[module] <= set(CORE[:k]), (module, graph[module])
    assert "state" not in graph["trace"]
    assert "state" not in graph["instruction"]


def test_no_import_strings() -> None:
    for path in PKG.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for word in ("importlib", "import_module", "__import__"):
            assert word not in text, f"{path.relative_to(PKG)} uses {word}"


def test_public_names_kept() -> None:
    for name in [
        "INSTRUCTION_KINDS", "BlockRV", "ExprRV", "Instruction", "IndexMap", "InstructionKind",
        "LoopRV", "Schedule", "ScheduleError", "ScheduleState", "Trace", "TraceFormatError",
        "primitive",
    ]:  # fmt: skip
        assert hasattr(sched, name), name
    from tilecraft.schedule.instruction import INSTRUCTION_KINDS, Instruction, primitive
    from tilecraft.schedule.state import BlockRV, ExprRV, LoopRV
    from tilecraft.schedule.trace import TraceFormatError

    assert primitive is sched.primitive
    assert Instruction is sched.Instruction
    assert BlockRV is sched.BlockRV
    assert LoopRV is sched.LoopRV
    assert ExprRV is sched.ExprRV
    assert TraceFormatError is sched.TraceFormatError
    assert "split" in INSTRUCTION_KINDS
    assert "enter_postproc" in INSTRUCTION_KINDS

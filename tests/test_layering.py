"""The package layout is the architecture: no module imports a layer above its own.

Layers follow DESIGN.md's table, top (lowest) first. A module may import its own layer and
any layer listed before it. ``tilecraft/__init__.py`` (the public surface, importing lazily)
and ``tilecraft.testing`` (helpers for tests, free to use everything) are outside the order.
Only import statements are checked. Two deliberate hooks reach a layer above at call time
through ``importlib``, never through an import statement: ``Node.script()`` reaches the printer
(``ir`` into ``script``), and ``tilecraft.ir.verify`` reaches its bounds checks in
``tilecraft.arith.verify_bounds`` (``ir`` into ``arith``: proving an index in range needs the
analyzer, which must not be duplicated in ``ir``). A third keeps old names working:
``tilecraft.codegen``'s lower-and-emit conveniences (``c_source``, ``cuda_source``...) are
aliases resolved at call time of the runtime's backends, which lower (``codegen`` itself only
emits). ``tilecraft.ir.transform`` is part of the ``ir`` layer. The backends
(``tilecraft.runtime.backend``) sit in the ``runtime`` layer: they import ``lower`` and
``codegen``, and everything that builds (graph, tune, driver) imports them. The graph executor
sits in the ``runtime`` layer too (``tilecraft.runtime.executor``) and works on the lowered form
of a graph function (``tilecraft.lower.graph_program``); its C entry is emitted by ``codegen``.
No lower layer registers a callback to finish its job through an upper one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "tilecraft"

LAYERS: list[set[str]] = [
    {"errors", "config", "target"},
    {"ir"},
    {"script"},
    {"arith"},
    {"te"},
    {"topi"},
    {"schedule"},
    {"lower"},
    {"codegen"},
    {"runtime"},
    {"graph"},
    {"frontend"},
    {"rules"},
    {"dispatch"},
    {"tune"},
    {"driver"},
    {"cli"},
]
UNRANKED = {"testing", "__init__", "__main__"}
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _layer_of(module: Path) -> str:
    rel = module.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py")


def _imported_layers(module: Path) -> list[tuple[int, str]]:
    return _imports_of(module.read_text(encoding="utf-8"), module.relative_to(ROOT).parent.parts)


def _imports_of(source: str, rel_pkg: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, top-level tilecraft package) for each import in ``source``."""
    tree = ast.parse(source)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "tilecraft" and len(parts) > 1:
                    out.append((node.lineno, parts[1]))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] != "tilecraft":
                    continue
                if len(parts) > 1:
                    out.append((node.lineno, parts[1]))
                else:
                    out.extend((node.lineno, a.name) for a in node.names)
            else:
                base = list(rel_pkg)
                up = node.level - 1
                if up > len(base):
                    continue
                base = base[: len(base) - up] if up else base
                target = [*base, *((node.module or "").split(".") if node.module else [])]
                if target:
                    out.append((node.lineno, target[0]))
                else:
                    out.extend((node.lineno, a.name) for a in node.names)
    return out


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p.parent != ROOT or p.stem != "__init__")


def test_every_top_level_package_has_a_layer() -> None:
    names = {_layer_of(p) for p in _modules()}
    unknown = sorted(n for n in names if n not in RANK and n not in UNRANKED)
    assert not unknown, f"add these packages to LAYERS in {__file__}: {unknown}"


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_upward_imports(module: Path) -> None:
    layer = _layer_of(module)
    if layer in UNRANKED:
        return
    bad = [
        f"line {line}: {layer} imports {target}"
        for line, target in _imported_layers(module)
        if target in RANK and RANK[target] > RANK[layer]
    ]
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_codegen_only_emits() -> None:
    # the emitters never reach a lowering entry point; the backends do the lowering
    lowering = {"lower", "lower_gpu", "lower_gpu_function", "get_pipeline", "get_gpu_pipeline"}
    for module in sorted((ROOT / "codegen").rglob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("lower"):
                used = lowering & {a.name for a in node.names}
                assert not used, f"{module.relative_to(ROOT)} imports {used}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith(
                ("gpu_pipeline", "lower.pipeline")
            ):
                raise AssertionError(f"{module.relative_to(ROOT)} imports {node.module}")


def test_no_layer_finishes_its_job_through_a_registered_upper_layer() -> None:
    # tc.build of graph functions once reached the graph layer through a builder registry in
    # the runtime; the graph layer now lowers and calls the runtime's executor directly
    import tilecraft.runtime as runtime

    assert not hasattr(runtime, "register_builder")
    for module in sorted((ROOT / "runtime").rglob("*.py")):
        text = module.read_text(encoding="utf-8")
        assert "register_builder" not in text, module.relative_to(ROOT)
    executor = {p.stem for p in (ROOT / "runtime" / "executor").glob("*.py")}
    assert {"executable", "function", "memory_plan", "native"} <= executor
    assert (ROOT / "codegen" / "graph_c.py").exists()


def test_checker_sees_upward_imports() -> None:
    # Absolute, relative (from a subpackage two levels deep) and plain imports are all seen.
    src = (
        "from tilecraft.schedule import Schedule\n"
        "import tilecraft.runtime.build\n"
        "from ...lower import pipeline\n"
        "from .. import codegen\n"
        "from .expr import Var\n"
    )
    edges = _imports_of(src, ("ir", "sub"))
    assert edges == [(1, "schedule"), (2, "runtime"), (3, "lower"), (4, "ir"), (5, "ir")]

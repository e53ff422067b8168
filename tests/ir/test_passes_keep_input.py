"""Every Pass of the package leaves its input module exactly as it was.

Every module of ``tilecraft`` is imported and every concrete ``Pass`` subclass defined in it is
found by walking the subclass tree; each one must have at least one representative input here
(graph modules exported from ``nn`` models for graph passes; unscheduled, CPU-scheduled and
GPU-scheduled PrimFuncs for lowering passes, each fed the output of the pipeline's earlier
passes). A new Pass class without an input makes ``test_every_pass_has_an_input`` fail.

"Unchanged" means: the module's JSON text is identical after the pass, and the module still
holds the very same function objects under the same names (IR nodes are frozen, so a pass
could only write into a module through its private fields).
"""

from __future__ import annotations

import atexit
import importlib
import inspect
import pkgutil
import shutil
import tempfile
from collections.abc import Callable, Iterator
from functools import cache

import pytest
import verify_corpus  # noqa: F401  (puts the GPU kernels' directory on sys.path)
from kernels import make_matmul, make_softmax

import tilecraft as tc
from tilecraft.dispatch import DispatchLibrary
from tilecraft.frontend import nn
from tilecraft.ir import IRModule, PrimFunc, to_json
from tilecraft.ir.transform import (
    FunctionPass,
    Pass,
    Sequential,
    function_pass,
    module_pass,
)
from tilecraft.lower import FlattenBuffer, get_gpu_pipeline, get_pipeline
from tilecraft.lower.bounds_check import InsertBoundsChecks
from tilecraft.rules import ApplyDefaultSchedule, SpecializeShapes
from tilecraft.rules.cpu import GEMV, Matmul
from tilecraft.tune import ApplyDatabase, TuneIRMod, TuneTIR

Case = tuple[str, Pass, IRModule]


def _concrete_pass_classes() -> list[type[Pass]]:
    for info in pkgutil.walk_packages(tc.__path__, "tilecraft."):
        importlib.import_module(info.name)
    found: dict[str, type[Pass]] = {}
    todo: list[type[Pass]] = [Pass]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("tilecraft.") and not inspect.isabstract(cls):
            found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [found[k] for k in sorted(found)]


# graph inputs -------------------------------------------------------------------------------
class _Block(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 8)
        self.soft = nn.Softmax()

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.soft(self.fc2(self.norm(self.act(self.fc1(x)))))


class _Conv(nn.Module):
    def __init__(self) -> None:
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.act(self.conv(x))


@cache
def _graph_stages() -> list[list[Case]]:
    """For each model, (pass, input) along the zero pipeline, each fed the previous output."""
    models = [
        _Block().export({"forward": {"x": nn.spec.Tensor(("n", 16), "float32")}}),
        _Conv().export({"forward": {"x": nn.spec.Tensor((1, 3, 8, 8), "float32")}}),
    ]
    out = []
    for mod, params in models:
        for pipeline in (
            tc.graph.get_pipeline("zero"),
            tc.graph.get_pipeline("default", params=params),
        ):
            assert isinstance(pipeline, Sequential)
            out.append(_along(pipeline.passes, mod, f"graph/{pipeline.name}"))
    return out


def _along(passes: tuple[Pass, ...] | list[FunctionPass], mod: IRModule, label: str) -> list[Case]:
    cases = []
    for p in passes:
        cases.append((label, p, mod))
        mod = p(mod)
    return cases


# lowering inputs ----------------------------------------------------------------------------
def _unscheduled() -> IRModule:
    n = tc.ir.Var("n", "int32")
    x = tc.te.placeholder((n, 24), "float32", name="x")
    w = tc.te.placeholder((24, 8), "float32", name="w")
    soft = tc.te.create_prim_func([x, tc.topi.softmax(x)])
    mm = tc.te.create_prim_func([x, w, tc.topi.matmul(x, w)])
    return IRModule({"softmax": soft, "matmul": mm})


def _cpu_scheduled() -> IRModule:
    a = tc.te.placeholder((64, 64), "float32", name="A")
    b = tc.te.placeholder((64, 64), "float32", name="B")
    sch = tc.Schedule(tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)]))
    blk = sch.get_block("matmul")
    i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, k, ii, ji)
    cw = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(cw, jo)
    sch.decompose_reduction(blk, k)
    sch.parallel(io)
    sch.vectorize(ji)
    sch.storage_align(blk, 0, 0, 16, 1)
    return sch.mod


def _gpu_scheduled() -> IRModule:
    return IRModule({"softmax": make_softmax()[0], "matmul": make_matmul()[0]})


def _bounds_checked_pipeline() -> list[FunctionPass]:
    passes = get_pipeline("cpu")
    at = next(i for i, p in enumerate(passes) if isinstance(p, FlattenBuffer))
    return [*passes[:at], InsertBoundsChecks(), *passes[at:]]


@cache
def _lowering_stages() -> list[list[Case]]:
    gpu = tc.Target("cuda")
    return [
        _along(get_pipeline("cpu"), _unscheduled(), "cpu/unscheduled"),
        _along(_bounds_checked_pipeline(), _cpu_scheduled(), "cpu/bounds-checked"),
        _along(get_pipeline("cpu"), _cpu_scheduled(), "cpu/scheduled"),
        _along(get_pipeline("cpu", emulate_gpu=True), _gpu_scheduled(), "cpu/emulated-gpu"),
        _along(get_gpu_pipeline(gpu), _gpu_scheduled(), "gpu/scheduled"),
        _along(get_gpu_pipeline(gpu), _unscheduled(), "gpu/unscheduled"),
    ]


# passes that are no pipeline's step ---------------------------------------------------------
def _identity(mod: IRModule) -> IRModule:
    return mod


def _rename_blocks(func: PrimFunc) -> PrimFunc:
    return func.with_attr("seen", True)


def _for_cpu(mod: IRModule) -> IRModule:
    """``mod`` with every PrimFunc carrying the ``target`` attribute default scheduling reads."""
    for name, func in mod.prim_funcs():
        mod = mod.with_function(name, func.with_attr("target", "cpu"))
    return mod


def _small_static() -> IRModule:
    a = tc.te.placeholder((16, 16), "float32", name="A")
    b = tc.te.placeholder((16, 16), "float32", name="B")
    return IRModule({"mm": tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])})


def _symbolic_linear() -> IRModule:
    """``x @ W`` with the batch ``n`` symbolic: the function ``SpecializeShapes`` copies."""
    n = tc.ir.Var("n", "int64")
    x = tc.te.placeholder((n, 16), "float32", name="x")
    w = tc.te.placeholder((16, 8), "float32", name="W")
    return IRModule({"linear": tc.te.create_prim_func([x, w, tc.topi.matmul(x, w)])})


def _tuning_cases() -> list[Case]:
    work_dir = tempfile.mkdtemp(prefix="tc_pass_input_")
    atexit.register(shutil.rmtree, work_dir, ignore_errors=True)
    tune = TuneTIR(work_dir, max_trials_global=2, target="cpu")
    return [
        ("tune", tune, _small_static()),
        ("tune", TuneIRMod(work_dir, max_trials_global=2, target="cpu"), _small_static()),
        ("tune", ApplyDatabase(work_dir, target="cpu"), _small_static()),
    ]


EXTRA: dict[str, Callable[[], list[Case]]] = {
    "TuneTIR": _tuning_cases,
    "ApplyDefaultSchedule": lambda: [
        ("graph", ApplyDefaultSchedule(Matmul(), GEMV()), _for_cpu(_zero_output(i)))
        for i in range(2)
    ],
    "Sequential": lambda: [
        ("graph", tc.graph.get_pipeline("zero"), _graph_stages()[0][0][2]),
        ("graph", tc.graph.get_pipeline("default"), _graph_stages()[2][0][2]),
        ("lower", Sequential(get_pipeline("cpu"), name="lower"), _cpu_scheduled()),
    ],
    "SpecializeShapes": lambda: [("graph", SpecializeShapes((1, 4)), _symbolic_linear())],
    "_ModuleFunctionPass": lambda: [("graph", module_pass(_identity), _graph_stages()[2][0][2])],
    "_PrimFunctionPass": lambda: [("cpu", function_pass(_rename_blocks), _cpu_scheduled())],
    # needs the blas extra (in dev): the pass loads the library before it rewrites anything
    "DispatchLibrary": lambda: [("graph", DispatchLibrary(), _zero_output(i)) for i in range(2)],
}


def _zero_output(model: int) -> IRModule:
    stages = _graph_stages()[2 * model]
    _label, last_pass, last_input = stages[-1]
    return last_pass(last_input)


def _cases() -> Iterator[Case]:
    for stages in (*_graph_stages(), *_lowering_stages()):
        yield from stages
    for make in EXTRA.values():
        yield from make()


def _cases_by_class() -> dict[type, list[Case]]:
    out: dict[type, list[Case]] = {}
    for case in _cases():
        out.setdefault(type(case[1]), []).append(case)
    return out


def test_every_pass_has_an_input() -> None:
    have = _cases_by_class()
    missing = [
        f"{c.__module__}.{c.__qualname__}" for c in _concrete_pass_classes() if c not in have
    ]
    assert not missing, (
        f"Pass classes without a representative input: {missing}; add one to EXTRA in {__file__}"
    )


def _snapshot(mod: IRModule) -> tuple[str, list[tuple[str, object]], object]:
    return to_json(mod), list(mod.functions.items()), mod.attrs


@pytest.mark.parametrize(
    "cls", _concrete_pass_classes(), ids=lambda c: f"{c.__module__.rsplit('.', 1)[-1]}.{c.__name__}"
)
def test_pass_leaves_its_input_unchanged(cls: type[Pass]) -> None:
    cases = _cases_by_class().get(cls, [])
    assert cases, f"{cls.__name__} has no input (see test_every_pass_has_an_input)"
    for label, p, mod in cases:
        text, funcs, attrs = _snapshot(mod)
        out = p(mod)
        assert isinstance(out, IRModule)
        after_text, after_funcs, after_attrs = _snapshot(mod)
        assert after_text == text, f"{p.name} on {label} changed its input module"
        assert len(after_funcs) == len(funcs), f"{p.name} on {label} changed the functions"
        for (name, f), (name2, f2) in zip(funcs, after_funcs, strict=True):
            assert name == name2
            assert f is f2, f"{p.name} on {label} replaced function {name} of its input"
        assert after_attrs is attrs
        if isinstance(p, FunctionPass):  # called on each PrimFunc directly too
            for _, func in mod.prim_funcs():
                before = to_json(func)
                assert isinstance(p(func), PrimFunc)
                assert to_json(func) == before, f"{p.name} on {label} changed its PrimFunc"

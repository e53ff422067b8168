"""``tc.compile``: the default path (graph pipeline, default rules, build) on every issue-12
model (``tests/models``, small sizes; the sizes of the issue under ``-m slow``), with bound
and unbound weights, against the float64 numpy references."""

from __future__ import annotations

import models
import numpy as np
import pytest
from models.common import ModelCase

import tilecraft as tc
from tilecraft.errors import BuildError
from tilecraft.graph import GraphError
from tilecraft.rules import SCHEDULE_RULE_ATTR
from tilecraft.runtime import ArgumentTypeError

SMALL = [c.name for c in models.cases("small")]
# the prefill layer (the largest small model) also runs in tests/frontend/test_models_issue12.py;
# here it is under -m slow
QUICK = [pytest.param(n, marks=pytest.mark.slow) if "prefill" in n else n for n in SMALL]


def _check(case: ModelCase, out: np.ndarray) -> None:
    want = case.expected()
    assert out.shape == want.shape
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=case.rtol, atol=case.atol, err_msg=case.name)


def _every_kernel_scheduled(exe: tc.graph.Executable) -> dict[str, str]:
    rules = {name: f.attrs.get(SCHEDULE_RULE_ATTR) for name, f in exe.mod.prim_funcs()}
    assert rules
    assert None not in rules.values(), rules
    return rules  # type: ignore[return-value]


@pytest.mark.parametrize("name", QUICK)
def test_compile_with_bound_weights_matches_numpy(name: str) -> None:
    case = models.small(name)
    exe = tc.compile(case.mod, "cpu", params=case.params)
    assert isinstance(exe, tc.graph.Executable)
    assert len(exe[case.entry].func.params) == len(case.inputs)  # the inputs only
    rules = _every_kernel_scheduled(exe)
    assert "Fallback" not in rules.values()
    _check(case, exe[case.entry](*case.inputs))


@pytest.mark.parametrize("name", QUICK)
def test_compile_with_weight_arguments_matches_numpy(name: str) -> None:
    case = models.small(name)
    exe = tc.compile(case.mod, target=tc.Target("cpu"))
    _every_kernel_scheduled(exe)
    _check(case, exe[case.entry](*case.inputs, *case.params.values()))


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(SMALL)))
def test_compile_at_the_sizes_of_the_issue(index: int) -> None:
    case = models.cases("full")[index]
    exe = tc.compile(case.mod, "cpu", params=case.params)
    _check(case, exe[case.entry](*case.inputs))


def test_bound_weights_fold_parameter_only_work() -> None:
    # the weight transposes of the zero pipeline are gone: matmuls read the stored weights,
    # and batch norm's scale and shift are constants computed at compile time
    case = models.small("resnet18_block_small")
    exe = tc.compile(case.mod, "cpu", params=case.params)
    assert sorted(n for n, _ in exe.mod.prim_funcs()) == [
        "fused_conv2d_multiply_add_add1_relu",
        "fused_conv2d_multiply_add_relu",
    ]
    unbound = tc.compile(case.mod, "cpu")
    assert len(list(unbound.mod.prim_funcs())) > 2


def test_compile_does_not_change_the_module() -> None:
    case = models.small("tutorial_metaschedule_b1")
    text = case.mod.script()
    tc.compile(case.mod, "cpu", params=case.params)
    assert case.mod.script() == text


def test_compile_takes_a_module_after_a_graph_pipeline() -> None:
    case = models.small("tutorial_reference_b64")
    exe = tc.compile(models.pipelined(case, "default", bind=True))
    _every_kernel_scheduled(exe)
    _check(case, exe[case.entry](*case.inputs))


def test_compile_schedules_and_builds_prim_funcs_alone() -> None:
    a = tc.te.placeholder((64, 48), "float32", name="A")
    b = tc.te.placeholder((48, 32), "float32", name="B")
    func = tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])
    lib = tc.compile(func)
    assert "#pragma omp parallel" in lib.source
    x = np.random.default_rng(0).standard_normal((64, 48)).astype("float32")
    w = np.random.default_rng(1).standard_normal((48, 32)).astype("float32")
    out = np.zeros((64, 32), "float32")
    lib["main"](x, w, out)
    np.testing.assert_allclose(out, x @ w, rtol=1e-4, atol=1e-4)
    lib = tc.compile(tc.IRModule({"mm": func}))
    assert "mm" in lib


def test_gpu_targets_use_the_gpu_rules_and_match_the_cpu_build() -> None:
    case = models.small("tutorial_metaschedule_b1")
    (x,) = case.inputs
    cpu = tc.compile(case.mod, "cpu", params=case.params)["forward"](x)
    gpu = tc.Target("cuda -arch=sm_90")
    exe = tc.compile(case.mod, gpu, params=case.params, emulate="racecheck")
    np.testing.assert_allclose(np.asarray(exe["forward"](x)), cpu, rtol=1e-4, atol=1e-5)
    assert [r.name for r in tc.driver.default_rules(gpu)] == [
        r.name for r in tc.rules.gpu.default_rules()
    ]


def test_bad_arguments_raise_tilecraft_errors() -> None:
    case = models.small("tutorial_metaschedule_b1")
    with pytest.raises(GraphError, match="no parameter named"):
        tc.compile(case.mod, "cpu", params={"fc9.weight": case.params["fc1.weight"]})
    with pytest.raises(GraphError, match="dtype float64"):
        tc.compile(
            case.mod, "cpu", params={"fc1.weight": case.params["fc1.weight"].astype("float64")}
        )
    with pytest.raises(ArgumentTypeError, match="expected an IRModule or PrimFunc"):
        tc.compile("forward")  # type: ignore[arg-type]
    a = tc.te.placeholder((4,), "float32", name="A")
    func = tc.te.create_prim_func([a, tc.te.compute((4,), lambda i: a[i] * 2.0, name="B")])
    with pytest.raises(BuildError, match="no graph function"):
        tc.compile(func, params={"w": np.zeros(4, "float32")})

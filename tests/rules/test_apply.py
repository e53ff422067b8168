"""ApplyDefaultSchedule: order, skipping, targets, declines, rule bugs, purity.

Includes the reference tutorial's rule-probing and custom-rule examples with tilecraft's names.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import models
import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.errors import ScheduleError
from tilecraft.ir import ForKind, PrimFunc
from tilecraft.schedule.analysis import normalize_prim_func
from tilecraft.target import TargetError

CPU = tc.Target("cpu")


def _add_one(n: int = 64) -> PrimFunc:
    a = tc.te.placeholder((n,), "float32", name="A")
    return tc.te.create_prim_func([a, tc.te.compute((n,), lambda i: a[i] + 1.0, name="B")])


def _module(**funcs: PrimFunc) -> tc.IRModule:
    return tc.IRModule(funcs)


@dl.ScheduleRule.from_callable("Vectorize")
def vectorize_rule(func: PrimFunc, target: tc.Target, tunable: bool) -> tc.Schedule | dl.Decline:
    """Vectorize the only loop of a one-block, one-loop function."""
    sch = tc.Schedule(func)
    infos = normalize_prim_func(sch)
    if infos is None or len(infos) != 1 or len(infos[0].loops) != 1:
        return dl.Decline("needs one block with one loop")
    sch.vectorize(infos[0].loops[0])
    return sch


# -- the reference tutorial's examples ---------------------------------------------------------
def test_tutorial_probing_finds_which_rule_takes_each_function() -> None:
    mod = models.pipelined(models.small("tutorial_reference_b1"))
    rules = OrderedDict([("Matmul", dl.cpu.Matmul()), ("GEMV", dl.cpu.GEMV())])
    rule_assignment: dict[str, str] = {}
    for rule_name, rule in rules.items():
        with CPU:
            test_mod = dl.ApplyDefaultSchedule(rule)(mod)
        for name, func in test_mod.prim_funcs():
            if name not in rule_assignment and func.attrs.get("tc.schedule_rule") == rule_name:
                rule_assignment[name] = rule_name
    fallback_funcs = sorted(n for n, _ in mod.prim_funcs() if n not in rule_assignment)
    assert rule_assignment == {"fused_matmul_add_relu": "GEMV", "fused_matmul1_add1": "GEMV"}
    assert fallback_funcs == ["layer_norm", "transpose", "transpose1"]


@dl.ScheduleRule.from_callable("MyTileAndVectorize")
def my_tile_and_vectorize(func: PrimFunc, target: tc.Target, tunable: bool) -> tc.Schedule | None:
    """The tutorial's minimal custom rule, for the CPU: one injective block, fused, split,
    parallel outer loop, vectorized inner loop."""
    if not isinstance(func, PrimFunc):
        return None
    sch = tc.Schedule(func)
    block_infos = normalize_prim_func(sch)
    if block_infos is None or len(block_infos) != 1:
        return None
    info = block_infos[0]
    if not info.is_injective():
        return None
    loops = sch.get_loops(info.block_rv)
    if len(loops) == 0:
        return None
    fused = sch.fuse(*loops)
    outer, inner = sch.split(fused, factors=[None, 64])
    sch.parallel(outer)
    sch.vectorize(inner)
    return sch


def test_tutorial_custom_rule_joins_the_chain() -> None:
    mod = models.pipelined(models.small("tutorial_reference_b1"))
    with CPU:
        custom_mod = dl.ApplyDefaultSchedule(
            dl.cpu.Matmul(),
            dl.cpu.GEMV(),
            my_tile_and_vectorize,  # an instance: from_callable already made it
        )(mod)
    taken = {n: f.attrs.get("tc.schedule_rule") for n, f in custom_mod.prim_funcs()}
    assert taken == {
        "transpose": "MyTileAndVectorize",
        "transpose1": "MyTileAndVectorize",
        "layer_norm": None,
        "fused_matmul_add_relu": "GEMV",
        "fused_matmul1_add1": "GEMV",
    }
    before, after = mod["transpose1"], custom_mod["transpose1"]
    assert isinstance(before, PrimFunc)
    assert isinstance(after, PrimFunc)
    tc.testing.check_numeric(after, before)


def test_passing_the_decorator_result_called_again_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="already returns an instance"):
        dl.ApplyDefaultSchedule(my_tile_and_vectorize.apply)  # type: ignore[arg-type]


# -- order, attribute, purity ------------------------------------------------------------------
def test_first_acceptance_wins_and_the_rule_is_recorded() -> None:
    @dl.ScheduleRule.from_callable("Never")
    def never(func: PrimFunc, target: tc.Target, tunable: bool) -> dl.Decline:
        return dl.Decline("not mine")

    @dl.ScheduleRule.from_callable("Second")
    def second(func: PrimFunc, target: tc.Target, tunable: bool) -> tc.Schedule:
        raise AssertionError("must not run after an acceptance")

    mod = _module(f=_add_one())
    with CPU:
        out = dl.ApplyDefaultSchedule(never, vectorize_rule, second, strict=True)(mod)
    f = out["f"]
    assert isinstance(f, PrimFunc)
    assert f.attrs["tc.schedule_rule"] == "Vectorize"
    assert f.name == "f"
    assert [lp.kind for lp in _loops(f)] == [ForKind.VECTORIZED]


def _loops(func: PrimFunc) -> list[tc.ir.For]:
    found: list[tc.ir.For] = []
    tc.ir.visitor.post_order_visit(
        func.body, lambda n: found.append(n) if isinstance(n, tc.ir.For) else None
    )
    return found


def test_input_module_is_untouched() -> None:
    mod = _module(f=_add_one(), g=_add_one(32))
    f = mod["f"]
    text = mod.script()
    with CPU:
        out = dl.ApplyDefaultSchedule(vectorize_rule)(mod)
    assert mod["f"] is f
    assert mod.script() == text
    assert "tc.schedule_rule" not in f.attrs
    assert out is not mod
    assert out["f"] is not f


def test_nothing_to_schedule_returns_the_same_module() -> None:
    mod = _module(f=_add_one())
    with CPU:
        assert dl.ApplyDefaultSchedule(dl.cpu.Matmul())(mod) is mod


# -- already scheduled -------------------------------------------------------------------------
class _Counting(dl.ScheduleRule):
    name = "Counting"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def apply(self, func: PrimFunc, target: tc.Target, tunable: bool) -> dl.Decline:
        self.seen.append(func.name)
        return dl.Decline("counting only")


def test_already_scheduled_functions_are_skipped() -> None:
    sch = tc.Schedule(_add_one())
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    mod = _module(
        by_rule=_add_one().with_attr("tc.schedule_rule", "Matmul"),
        by_hand=_add_one().with_attr("tc.is_scheduled", True),
        parallel=sch.func,
        fresh=_add_one(),
    )
    assert dl.scheduled_reason(mod["parallel"]) == "has a parallel loop 'i'"  # type: ignore[arg-type]
    counting = _Counting()
    with CPU:
        out = dl.ApplyDefaultSchedule(counting, vectorize_rule)(mod)
    assert counting.seen == ["fresh"]
    for name in ("by_rule", "by_hand", "parallel"):
        assert out[name] is mod[name]
    with CPU:  # a second pass finds nothing left to do
        again = dl.ApplyDefaultSchedule(counting, vectorize_rule)(out)
    assert again is out
    assert counting.seen == ["fresh"]


# -- targets -----------------------------------------------------------------------------------
def test_target_from_the_function_attribute_then_the_current_target() -> None:
    seen: list[str] = []

    @dl.ScheduleRule.from_callable("Record")
    def record(func: PrimFunc, target: tc.Target, tunable: bool) -> dl.Decline:
        seen.append(f"{func.name}:{target.kind}")
        return dl.Decline("recording")

    mod = _module(cuda=_add_one().with_attr("target", "cuda -arch=sm_80"), plain=_add_one())
    with CPU:
        dl.ApplyDefaultSchedule(record)(mod)
    assert seen == ["cuda:cuda", "plain:cpu"]


def test_rules_unavailable_for_the_target_are_skipped() -> None:
    mod = _module(f=_add_one().with_attr("target", "cuda"))
    with CPU:
        out = dl.ApplyDefaultSchedule(dl.cpu.Matmul(), dl.cpu.GEMV())(mod)
    assert out is mod
    outcome = dl.try_rules(_add_one(), [dl.cpu.GEMV(), vectorize_rule], tc.Target("cuda"))
    assert outcome.unavailable == ("GEMV",)
    assert outcome.rule == "Vectorize"


def test_no_target_is_a_target_error() -> None:
    with pytest.raises(TargetError, match="no target to schedule function 'f'"):
        dl.ApplyDefaultSchedule(vectorize_rule)(_module(f=_add_one()))
    with pytest.raises(TargetError, match="must be a target string"):
        dl.ApplyDefaultSchedule(vectorize_rule)(_module(f=_add_one().with_attr("target", 3)))


# -- declines, ScheduleError, rule bugs --------------------------------------------------------
@dl.ScheduleRule.from_callable("BadPrimitive")
def bad_primitive(func: PrimFunc, target: tc.Target, tunable: bool) -> tc.Schedule:
    """Asks split for two inferred factors: a ScheduleError."""
    sch = tc.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, None])
    return sch


@dl.ScheduleRule.from_callable("Buggy")
def buggy(func: PrimFunc, target: tc.Target, tunable: bool) -> tc.Schedule:
    """A rule with a bug."""
    return 1 // 0  # type: ignore[no-any-return]


@dl.ScheduleRule.from_callable("WrongType")
def wrong_type(func: PrimFunc, target: tc.Target, tunable: bool) -> tc.Schedule:
    """Returns something that is not a rule result."""
    return "done"  # type: ignore[return-value]


def test_schedule_error_inside_a_rule_is_a_decline_with_its_reason() -> None:
    outcome = dl.try_rules(_add_one(), [bad_primitive, vectorize_rule], CPU, strict=True)
    assert outcome.rule == "Vectorize"
    (name, decline), = outcome.declines  # fmt: skip
    assert name == "BadPrimitive"
    assert decline.reason.startswith("split: ")
    assert "split" in decline.detail


@pytest.mark.parametrize(
    ("rule", "what", "detail"),
    [(buggy, "raised ZeroDivisionError", "Traceback"),
     (wrong_type, "returned a str", "expected Schedule, list of Schedule, Decline or None")],
)  # fmt: skip
def test_a_rule_bug_is_a_logged_decline_by_default(
    rule: dl.ScheduleRule, what: str, detail: str, caplog: pytest.LogCaptureFixture
) -> None:
    mod = _module(f=_add_one())
    with caplog.at_level(logging.WARNING, logger="tilecraft"), CPU:
        out = dl.ApplyDefaultSchedule(rule, vectorize_rule)(mod)
    assert out["f"].attrs["tc.schedule_rule"] == "Vectorize"
    assert any(what in r.getMessage() and r.name == "tilecraft" for r in caplog.records)
    outcome = dl.try_rules(_add_one(), [rule, vectorize_rule], CPU)
    (_, decline), = outcome.declines  # fmt: skip
    assert decline.reason.startswith(f"rule bug: {what}")
    assert detail in decline.detail


def test_a_rule_bug_raises_under_strict() -> None:
    mod = _module(f=_add_one())
    with pytest.raises(dl.RuleError, match="rule 'Buggy' raised ZeroDivisionError") as info, CPU:
        dl.ApplyDefaultSchedule(buggy, vectorize_rule, strict=True)(mod)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    with pytest.raises(dl.RuleError, match="returned a str"), CPU:
        dl.ApplyDefaultSchedule(wrong_type, strict=True)(mod)


def test_a_rule_never_brings_the_pass_down() -> None:
    mod = _module(f=_add_one(), g=_add_one(8))
    with CPU:
        out = dl.ApplyDefaultSchedule(buggy, bad_primitive, wrong_type)(mod)
    assert out is mod


def test_none_is_a_decline_without_reason_and_lists_take_the_first() -> None:
    @dl.ScheduleRule.from_callable("Nothing")
    def nothing(func: PrimFunc, target: tc.Target, tunable: bool) -> None:
        return None

    @dl.ScheduleRule.from_callable("Candidates")
    def candidates(func: PrimFunc, target: tc.Target, tunable: bool) -> list[tc.Schedule]:
        first, second = tc.Schedule(func), tc.Schedule(func)
        first.unroll(first.get_loops(first.get_block("B"))[0])
        return [first, second]

    @dl.ScheduleRule.from_callable("Empty")
    def empty(func: PrimFunc, target: tc.Target, tunable: bool) -> list[tc.Schedule]:
        return []

    outcome = dl.try_rules(_add_one(), [nothing, empty, candidates], CPU, strict=True)
    assert [(n, d.reason) for n, d in outcome.declines] == [
        ("Nothing", "declined (no reason given)"),
        ("Empty", "returned no candidate schedules"),
    ]
    assert outcome.schedule is not None
    assert [lp.kind for lp in _loops(outcome.schedule.func)] == [ForKind.UNROLLED]


def test_scheduled_functions_run_correctly() -> None:
    mod = _module(f=_add_one(100))
    with CPU:
        out = dl.ApplyDefaultSchedule(vectorize_rule)(mod)
    lib = tc.build(out, target="cpu")
    a = np.arange(100, dtype="float32")
    b = np.empty_like(a)
    lib["f"](a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_schedule_error_from_analysis_misuse_is_a_decline() -> None:
    @dl.ScheduleRule.from_callable("Misuse")
    def misuse(func: PrimFunc, target: tc.Target, tunable: bool) -> None:
        tc.schedule.analysis.classify_einsum("not a block")  # type: ignore[arg-type]
        return None

    outcome = dl.try_rules(_add_one(), [misuse], CPU, strict=True)
    (_, decline), = outcome.declines  # fmt: skip
    assert decline.reason.startswith("classify_einsum: ")
    with pytest.raises(ScheduleError):
        misuse.apply(_add_one(), CPU, False)

"""tilecraft.ir.transform: passes, Sequential, PassContext (instruments, config) and instruments."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import tilecraft as tc
from tilecraft.errors import IRError, TilecraftError
from tilecraft.ir import IRModule, PrimFunc
from tilecraft.ir.transform import (
    DumpIR,
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassInstrument,
    PassTimingInstrument,
    PrimFuncHooks,
    RecordPasses,
    Sequential,
    VerifyIR,
    function_pass,
    module_pass,
    register_pass_config,
    registered_pass_configs,
)
from tilecraft.script import parse

ADD_ONE = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] + T.float32(1.0)
"""


def _func() -> PrimFunc:
    f = parse(ADD_ONE)
    assert isinstance(f, PrimFunc)
    return f


def _mod() -> IRModule:
    return IRModule({"main": _func(), "other": _func()})


@function_pass
def tag(func: PrimFunc) -> PrimFunc:
    """Mark a function (so a test can see the pass ran)."""
    return func.with_attr("tagged", True)


@function_pass("Untag")
def untag(func: PrimFunc) -> PrimFunc:
    return func.update(attrs=func.attrs.without("tagged")) if "tagged" in func.attrs else func


@module_pass
def drop_other(mod: IRModule) -> IRModule:
    return mod.without_function("other")


class Log(PassInstrument):
    """Write every hook call into a shared list."""

    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log

    def enter_pass_ctx(self) -> None:
        self.log.append(f"{self.label}:enter")

    def exit_pass_ctx(self) -> None:
        self.log.append(f"{self.label}:exit")

    def run_before_pass(self, mod: IRModule, pass_: Pass) -> None:
        self.log.append(f"{self.label}:before:{pass_.name}")

    def run_after_pass(self, mod: IRModule, pass_: Pass) -> None:
        self.log.append(f"{self.label}:after:{pass_.name}")

    def pass_failed(self, mod: IRModule, pass_: Pass, error: BaseException) -> None:
        self.log.append(f"{self.label}:failed:{pass_.name}")


# passes ---------------------------------------------------------------------------------------
def test_function_pass_on_module_and_on_prim_func() -> None:
    mod = _mod()
    out = tag(mod)
    assert isinstance(out, IRModule)
    assert all(f.attrs["tagged"] is True for _, f in out.prim_funcs())
    assert all("tagged" not in f.attrs for _, f in mod.prim_funcs())  # input untouched
    f = _func()
    g = tag(f)
    assert isinstance(g, PrimFunc)
    assert g.attrs["tagged"] is True
    assert "tagged" not in f.attrs


def test_function_pass_returns_the_same_module_when_nothing_changes() -> None:
    mod = _mod()
    assert untag(mod) is mod


def test_pass_names() -> None:
    assert tag.name == "tag"
    assert untag.name == "Untag"
    assert drop_other.name == "drop_other"
    assert Sequential([tag]).name == "Sequential"
    assert Sequential([tag], name="pipe").name == "pipe"
    assert tc.lower.Simplify().name == "Simplify"
    assert repr(untag) == "<_PrimFunctionPass 'Untag'>"


def test_sequential_runs_in_order_on_module_and_function() -> None:
    seq = Sequential([tag, Sequential([untag, tag], name="inner")], name="outer")
    assert seq.function_level
    out = seq(_mod())
    assert out["main"].attrs["tagged"] is True
    assert seq(_func()).attrs["tagged"] is True


def test_sequential_with_a_module_pass_refuses_a_prim_func() -> None:
    seq = Sequential([tag, drop_other])
    assert not seq.function_level
    assert list(seq(_mod()).functions) == ["main"]
    with pytest.raises(
        IRError, match=r"Sequential Sequential: cannot run on a PrimFunc, .*drop_other"
    ):
        seq(_func())


def test_bad_arguments_raise_ir_error() -> None:
    with pytest.raises(IRError, match="item 1 is not a Pass, got function"):
        Sequential([tag, lambda m: m])  # type: ignore[list-item]
    with pytest.raises(IRError, match="drop_other: expected an IRModule, got PrimFunc"):
        drop_other(_func())  # type: ignore[arg-type]
    with pytest.raises(IRError, match="expected an IRModule, got str"):
        tag("main")  # type: ignore[call-overload]
    bad = function_pass(lambda f: None, name="Broken")  # type: ignore[arg-type, return-value]
    with pytest.raises(IRError, match="Broken: transform_function returned a NoneType"):
        bad(_mod())
    with pytest.raises(TypeError):
        ModulePass()  # type: ignore[abstract]


def test_old_import_paths_name_the_same_classes() -> None:
    from tilecraft import graph, lower
    from tilecraft.graph import transform as gt

    assert lower.Sequential is graph.Sequential is gt.Sequential is Sequential
    assert lower.PassContext is gt.PassContext is graph.PassContext is PassContext
    assert gt.ModulePass is ModulePass
    assert lower.FunctionPass is FunctionPass
    assert gt.RecordPasses is RecordPasses


# context and instruments ----------------------------------------------------------------------
def test_instrument_order_and_nesting() -> None:
    log: list[str] = []
    seq = Sequential([tag, Sequential([untag], name="inner")], name="outer")
    with PassContext(instruments=[Log("a", log), Log("b", log)]):
        seq(_mod())
    assert log == [
        "a:enter", "b:enter",
        "a:before:outer", "b:before:outer",
        "a:before:tag", "b:before:tag", "a:after:tag", "b:after:tag",
        "a:before:inner", "b:before:inner",
        "a:before:Untag", "b:before:Untag", "a:after:Untag", "b:after:Untag",
        "a:after:inner", "b:after:inner",
        "a:after:outer", "b:after:outer",
        "b:exit", "a:exit",
    ]  # fmt: skip


def test_inner_context_replaces_and_extend_adds() -> None:
    log: list[str] = []
    with PassContext(instruments=[Log("outer", log)]) as outer:
        with PassContext(instruments=[Log("inner", log)]):
            tag(_func())
        with outer.extend([Log("extra", log)]):
            assert PassContext.current().instruments[0] is outer.instruments[0]
            untag(_func())
        assert PassContext.current() is outer
    assert log == [
        "outer:enter",
        "inner:enter", "inner:before:tag", "inner:after:tag", "inner:exit",
        "extra:enter",
        "outer:before:Untag", "extra:before:Untag", "outer:after:Untag", "extra:after:Untag",
        "extra:exit",
        "outer:exit",
    ]  # fmt: skip


def test_default_context_is_empty() -> None:
    ctx = PassContext.current()
    assert ctx.instruments == ()
    assert dict(ctx.config) == {}


def test_failed_pass_reaches_pass_failed_not_run_after() -> None:
    log: list[str] = []

    @module_pass
    def boom(mod: IRModule) -> IRModule:
        raise IRError("boom")

    with PassContext(instruments=[Log("a", log)]), pytest.raises(IRError, match="boom"):
        Sequential([tag, boom])(_mod())
    assert log == [
        "a:enter", "a:before:Sequential", "a:before:tag", "a:after:tag",
        "a:before:boom", "a:failed:boom", "a:failed:Sequential", "a:exit",
    ]  # fmt: skip


def test_contexts_are_per_thread() -> None:
    seen: dict[str, tuple[PassInstrument, ...]] = {}
    ready = threading.Barrier(2)

    def worker(label: str) -> None:
        rec = RecordPasses()
        with PassContext(instruments=[rec]):
            ready.wait()
            tag(_func())
            seen[label] = PassContext.current().instruments
        assert rec.names == ["tag"]

    threads = [threading.Thread(target=worker, args=(str(k),)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["0"] != seen["1"]
    assert PassContext.current().instruments == ()


def test_contexts_must_exit_in_order() -> None:
    a, b = PassContext(), PassContext()
    a.__enter__()
    b.__enter__()
    with pytest.raises(IRError, match="reverse order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)


def test_instruments_must_be_instruments() -> None:
    with pytest.raises(IRError, match="must be PassInstruments, got the class RecordPasses"):
        PassContext(instruments=[RecordPasses])  # type: ignore[list-item]


# config -------------------------------------------------------------------------------------
UNROLL = register_pass_config("test.unroll_limit", int, 16, "largest extent unrolled (test)")
MODE = register_pass_config("test.mode", (str, type(None)), None, "a mode name (test)")


def test_config_lookup_defaults_and_types() -> None:
    assert registered_pass_configs()["test.unroll_limit"] is UNROLL
    ctx = PassContext(config={"test.unroll_limit": 4})
    assert ctx.config == {"test.unroll_limit": 4}
    assert ctx.get_config("test.unroll_limit") == 4
    assert ctx.get_config("test.mode") is None
    with ctx:
        assert PassContext.current().get_config("test.unroll_limit") == 4
        with PassContext.current().extend(config={"test.mode": "fast"}) as inner:
            assert dict(inner.config) == {"test.unroll_limit": 4, "test.mode": "fast"}
    with pytest.raises(TypeError):
        ctx.config["test.unroll_limit"] = 3  # type: ignore[index]


def test_unknown_config_key_is_rejected_with_close_matches() -> None:
    with pytest.raises(
        IRError, match=r"unknown config key 'test.unrol_limit'; did you mean 'test.unroll_limit'"
    ):
        PassContext(config={"test.unrol_limit": 4})
    with pytest.raises(IRError, match="unknown config key"):
        PassContext.current().get_config("test.nothing")


def test_config_value_of_the_wrong_type_is_rejected() -> None:
    with pytest.raises(IRError, match=r"config 'test.unroll_limit' expects a int, got str '4'"):
        PassContext(config={"test.unroll_limit": "4"})
    with pytest.raises(IRError, match="expects a int, got bool"):
        PassContext(config={"test.unroll_limit": True})
    assert PassContext(config={"test.mode": None}).get_config("test.mode") is None


def test_registering_a_key_twice() -> None:
    assert (
        register_pass_config("test.unroll_limit", int, 16, "largest extent unrolled (test)")
        == UNROLL
    )
    with pytest.raises(IRError, match="already registered"):
        register_pass_config("test.unroll_limit", int, 8, "another default")
    with pytest.raises(IRError, match="dotted identifier"):
        register_pass_config("test..bad", int, 0, "")
    with pytest.raises(IRError, match="default '8' is not a int"):
        register_pass_config("test.other", int, "8", "")


# built-in instruments -------------------------------------------------------------------------
def test_record_passes_keeps_names_and_outputs() -> None:
    rec = RecordPasses()
    with PassContext(instruments=[rec]):
        out = Sequential([tag, untag], name="pipe")(_mod())
    assert rec.names == ["tag", "Untag", "pipe"]
    assert rec.modules[-1] is out


def test_timing_report_tree_and_dict() -> None:
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        tc.lower.lower(IRModule({"a": _func(), "b": _func()}))
        tc.lower.lower(_func())
    data = timing.as_dict()
    (top,) = data["passes"]  # type: ignore[misc]
    assert top["name"] == "lower"
    assert top["calls"] == 2
    names = [c["name"] for c in top["children"]]
    assert names[:5] == [
        "ExpandWarpTiles",
        "CollectStorageAlign",
        "LowerInitBlock",
        "PlanAllocations",
        "ConvertBlocksToLoops",
    ]
    assert all(c["calls"] == 2 for c in top["children"])
    assert sum(c["seconds"] for c in top["children"]) <= top["seconds"]
    assert data["total"] == top["seconds"]
    report = timing.report()
    lines = report.splitlines()
    assert lines[0].split() == ["pass", "time", "(ms)", "share", "calls"]
    assert lines[1].startswith("lower ")
    assert lines[2].startswith("  ExpandWarpTiles ")
    assert lines[-1].startswith("total")
    assert str(timing) == report
    timing.clear()
    assert timing.as_dict() == {"passes": [], "total": 0}


def test_dump_ir_writes_numbered_before_and_after_files(tmp_path: Path) -> None:
    out = tmp_path / "dump"
    with PassContext(instruments=[DumpIR(out)]):
        Sequential([tag, untag], name="pipe")(_mod())
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "000_tag.after.py", "000_tag.before.py", "001_Untag.after.py", "001_Untag.before.py",
    ]  # fmt: skip
    before = parse((out / "000_tag.before.py").read_text())
    after = parse((out / "000_tag.after.py").read_text())
    assert isinstance(before, IRModule)
    assert isinstance(after, IRModule)
    assert "tagged" not in before["main"].attrs
    assert after["main"].attrs["tagged"] is True
    assert (out / "001_Untag.after.py").read_text() == (out / "000_tag.before.py").read_text()


def test_dump_ir_with_sequentials_and_unwritable_directory(tmp_path: Path) -> None:
    with PassContext(instruments=[DumpIR(tmp_path, include_sequential=True)]):
        Sequential([tag], name="pipe")(_func())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "000_pipe.after.py", "000_pipe.before.py", "001_tag.after.py", "001_tag.before.py",
    ]  # fmt: skip
    blocker = tmp_path / "file"
    blocker.write_text("")
    with (
        pytest.raises(TilecraftError, match="DumpIR: cannot create"),
        PassContext(instruments=[DumpIR(blocker / "sub")]),
    ):
        pass


def test_verify_ir_names_the_pass_that_broke_the_function() -> None:
    @function_pass("DuplicateBlockName")
    def duplicate(func: PrimFunc) -> PrimFunc:
        text = func.script().replace('T.block("B")', 'T.block("C")')
        return _with_second_block(parse(text))  # type: ignore[arg-type]

    with PassContext(instruments=[VerifyIR()]):
        tag(_mod())  # valid output: no error
        with pytest.raises(
            IRError,
            match=r"VerifyIR: the output of pass 'DuplicateBlockName' is invalid: verify: "
            r"function 'main': block name 'C' is used twice",
        ):
            Sequential([tag, duplicate])(_mod())


def _with_second_block(func: PrimFunc) -> PrimFunc:
    """``func`` with its body repeated (so block names repeat)."""
    return func.update(body=tc.ir.seq(func.body, func.body))


def test_verify_ir_catches_a_pass_that_drops_a_loop() -> None:
    @function_pass
    def drop_loop(func: PrimFunc) -> PrimFunc:
        loop = func.body
        assert isinstance(loop, tc.ir.For)
        return func.update(body=loop.body)

    with (
        PassContext(instruments=[VerifyIR()]),
        pytest.raises(
            IRError, match=r"pass 'drop_loop' is invalid: .*variable 'i' is used in the binding"
        ),
    ):
        drop_loop(_func())


def test_lower_hooks_still_see_each_pass_and_outer_instruments_too() -> None:
    seen: list[str] = []
    rec = RecordPasses()
    with PassContext(instruments=[rec]):
        tc.lower.lower(_func(), hooks=[lambda name, before, after: seen.append(name)])
    assert seen[:3] == ["ExpandWarpTiles", "CollectStorageAlign", "LowerInitBlock"]
    assert "lower" not in seen  # Sequentials are not reported to hooks
    assert rec.names[: len(seen)] == seen
    assert rec.names[-1] == "lower"


def test_prim_func_hooks_get_before_and_after_functions() -> None:
    pairs: list[tuple[str, PrimFunc, PrimFunc]] = []
    f = _func()
    with PassContext(instruments=[PrimFuncHooks([lambda n, b, a: pairs.append((n, b, a))])]):
        out = tag(f)
    assert pairs == [("tag", f, out)]


def test_one_timing_instrument_shared_by_threads() -> None:
    timing = PassTimingInstrument()
    rec = RecordPasses()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with PassContext(instruments=[timing, rec]):
                for _ in range(20):
                    Sequential([tag, untag], name="pipe")(_func())
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    (pipe,) = timing.as_dict()["passes"]  # type: ignore[misc]
    assert pipe["calls"] == 80
    assert [(c["name"], c["calls"]) for c in pipe["children"]] == [("tag", 80), ("Untag", 80)]
    assert len(rec.names) == 240

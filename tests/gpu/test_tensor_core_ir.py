"""Device intrinsics and warp fragment scopes in the IR: validation, script and JSON."""

from __future__ import annotations

import pytest
from tensor_core_kernels import make_gemm, schedule_mma_gemm

import tilecraft as tc
from tilecraft import ir
from tilecraft.errors import IRError
from tilecraft.ir.device_intrin import HARDWARE_OPS, TILE_OPS


def _frag(scope: str = "m16n8k16.accumulator", dt: str = "float32") -> ir.Buffer:
    return ir.decl_buffer((16, 8), dt, "C", scope=scope)


def test_fragment_scopes_are_storage_scopes() -> None:
    for scope in ir.WARP_FRAGMENT_SCOPES:
        assert scope in ir.SCOPES
        assert _frag(scope).scope == scope


def test_device_intrinsic_calls_are_checked_against_their_signatures() -> None:
    c = _frag()
    call = ir.call_device("mma_fill", c[0, 0], 0.0)
    assert call.dtype == ir.dtype("int32")
    with pytest.raises(IRError, match="expects 2 argument"):
        ir.call_device("mma_fill", c[0, 0])
    with pytest.raises(IRError, match="argument 0 must be an element address"):
        ir.call_device("mma_fill", ir.Var("x"), 0.0)
    with pytest.raises(IRError, match="argument 1 must be a float"):
        ir.call_device("mma_fill", c[0, 0], 1)
    with pytest.raises(IRError, match="argument 0 must be an integer"):
        ir.call_device("ptx_cp_async_wait", 1.0)
    with pytest.raises(IRError, match="has dtype int32"):
        ir.Call(ir.dtype("float32"), "ptx_cp_async_commit", ())
    assert TILE_OPS.isdisjoint(HARDWARE_OPS)
    assert set(ir.DEVICE_INTRINSICS) == TILE_OPS | HARDWARE_OPS


def test_device_intrinsics_round_trip_through_script_and_json() -> None:
    sch = schedule_mma_gemm(make_gemm(256, 256, 64))
    func = sch.func
    text = func.script()
    assert "T.mma_sync_m16n8k16(" in text
    assert 'scope="m16n8k16.matrixA"' in text
    again = tc.script.parse(text)
    assert ir.structural_equal(again, func)
    assert ir.structural_hash(again) == ir.structural_hash(func)
    assert ir.structural_equal(ir.from_json(ir.to_json(func)), func)
    ir.verify(func)


def test_script_parser_rejects_a_malformed_device_call() -> None:
    text = """
@T.prim_func
def f(C: T.Buffer((16, 8), "float32", scope="m16n8k16.accumulator")):
    with T.block("root"):
        T.evaluate(T.mma_fill(C[0, 0]))
"""
    with pytest.raises(tc.errors.ScriptParseError, match=r"T\.mma_fill expects 2"):
        tc.script.parse(text)


def test_the_gemm_schedules_replay_from_their_traces() -> None:
    from tensor_core_kernels import schedule_wmma_gemm

    from tilecraft.testing import verify_trace_roundtrip

    func = make_gemm(256, 256, 64)
    for schedule in (schedule_mma_gemm, schedule_wmma_gemm):
        sch = schedule(func)
        text = sch.trace.as_python()
        assert text.count("sch.tensorize(") == 5
        assert 'key="software_pipeline_stage", value=[0, 0, 1])' in text
        verify_trace_roundtrip(sch, func)


def test_an_output_written_only_through_tensor_intrinsics_is_an_output() -> None:
    from tilecraft.runtime import written_params

    sch = schedule_mma_gemm(make_gemm(256, 256, 64))
    # the only writes of "matmul" are mma_store calls inside tensorized blocks
    stores: list[ir.Node] = []
    ir.post_order_visit(
        sch.func.body,
        lambda n: (
            stores.append(n)
            if isinstance(n, ir.BufferStore) and n.buffer.name == "matmul"
            else None
        ),
    )
    assert not stores
    assert [b.name for b in written_params(sch.func)] == ["matmul"]

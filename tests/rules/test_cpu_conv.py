"""CPU Conv rule: what it takes (dense and depthwise NCHW convolutions, any stride, dilation
and epilogue), what it declines and why, the register tile it picks for AVX2 and AVX-512, and
that every schedule computes what the unscheduled function computes."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.rules import Decline
from tilecraft.rules.cpu import Conv, ConvConfig, default_rules
from tilecraft.rules.cpu.conv import register_tile
from tilecraft.schedule.testing_utils import verify_trace_roundtrip
from tilecraft.testing import check_numeric

te, T = tc.te, tc.topi
PRESETS = {"avx2": tc.Target("avx2"), "avx512": tc.Target("avx512")}


def _conv(c: int, o: int, size: int, k: int = 3, stride: int = 1, pad: int = 1,
          dilation: int = 1, groups: int = 1, epilogue: str = "") -> tc.ir.PrimFunc:  # fmt: skip
    """``conv2d`` of a ``(1, c, size, size)`` input, with an optional fused epilogue:
    ``"bn_relu"`` (per-channel scale and shift, ReLU), ``"residual"`` (plus a tensor of the
    output's shape, then ReLU) or ``"clip"`` (ReLU6)."""
    x = te.placeholder((1, c, size, size), "float32", name="x")
    w = te.placeholder((o, c // groups, k, k), "float32", name="w")
    y = T.conv2d(x, w, stride=stride, padding=pad, dilation=dilation, groups=groups)
    args = [x, w]
    if epilogue in ("bn_relu", "residual", "clip"):
        scale = te.placeholder((o, 1, 1), "float32", name="scale")
        shift = te.placeholder((o, 1, 1), "float32", name="shift")
        y = T.add(T.multiply(y, scale), shift)
        args += [scale, shift]
    if epilogue == "residual":
        res = te.placeholder(tuple(int(d.value) for d in y.shape), "float32", name="res")
        y = T.add(y, res)
        args.append(res)
    if epilogue == "clip":
        y = T.clip(y, 0.0, 6.0)
    elif epilogue:
        y = T.relu(y)
    return te.create_prim_func([*args, y])


def _scheduled(func: tc.ir.PrimFunc, target: tc.Target) -> tc.Schedule:
    got = Conv().apply(func, target, False)
    assert isinstance(got, tc.Schedule), got
    return got


CASES = {
    "3x3": {"c": 16, "o": 32, "size": 14},
    "3x3_stride2": {"c": 16, "o": 32, "size": 15, "stride": 2},
    "3x3_bn_relu": {"c": 8, "o": 16, "size": 12, "epilogue": "bn_relu"},
    "3x3_residual": {"c": 16, "o": 16, "size": 9, "epilogue": "residual"},
    "1x1": {"c": 24, "o": 48, "size": 10, "k": 1, "pad": 0, "epilogue": "clip"},
    "1x1_stride2": {
        "c": 16,
        "o": 32,
        "size": 10,
        "k": 1,
        "pad": 0,
        "stride": 2,
        "epilogue": "bn_relu",
    },
    "5x5_dilated": {"c": 8, "o": 16, "size": 11, "k": 5, "pad": 4, "dilation": 2},
    "1x1_rows": {"c": 32, "o": 24, "size": 16, "k": 1, "pad": 0, "epilogue": "residual"},
    "stem": {"c": 3, "o": 32, "size": 17, "stride": 2, "epilogue": "clip"},  # K = 27
    "one_channel": {"c": 1, "o": 16, "size": 12, "epilogue": "bn_relu"},  # K = 9
    "odd_channels": {"c": 5, "o": 12, "size": 13},  # 12 channels: a quarter of an AVX-512 vector
    "depthwise": {"c": 24, "o": 24, "size": 14, "groups": 24, "epilogue": "clip"},
    "depthwise_stride2": {
        "c": 16,
        "o": 16,
        "size": 13,
        "stride": 2,
        "groups": 16,
        "epilogue": "bn_relu",
    },
}


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule_is_exact(name: str, preset: str) -> None:
    func = _conv(**CASES[name])  # type: ignore[arg-type]
    sch = _scheduled(func, PRESETS[preset])
    check_numeric(sch.func, func, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("groups", [1, 8])
def test_symbolic_batch(groups: int) -> None:
    n = tc.ir.Var("n", "int32")
    x = te.placeholder((n, 8, 9, 9), "float32", name="x")
    w = te.placeholder((8, 8 // groups, 3, 3), "float32", name="w")
    func = te.create_prim_func([x, w, T.relu(T.conv2d(x, w, padding=1, groups=groups))])
    sch = _scheduled(func, PRESETS["avx512"])
    for size in (1, 3):
        check_numeric(sch.func, func, shape_vars={"n": size}, rtol=1e-4, atol=1e-5)


def test_trace_replays() -> None:
    func = _conv(16, 32, 9, epilogue="residual")
    verify_trace_roundtrip(_scheduled(func, PRESETS["avx512"]), func)


def test_default_rules_put_conv_before_matmul() -> None:
    names = [r.name for r in default_rules()]
    assert names.index("Conv") == names.index("Matmul") - 1


@pytest.mark.parametrize(
    ("preset", "channels", "columns", "tile"),
    [
        ("avx512", 64, 56, (64, 4)),  # 4 vectors x 4 columns: 16 of 32 registers accumulate
        ("avx512", 128, 28, (64, 4)),
        ("avx512", 144, 56, (48, 8)),  # 3 vectors x 8 columns: 24 accumulators
        ("avx512", 24, 56, (8, 8)),  # 24 channels: half vectors
        ("avx2", 64, 56, (16, 4)),  # 16 registers: 2 vectors x 4 columns (not 4 x 2)
        ("avx2", 24, 56, (24, 4)),
        ("avx2", 6, 56, (0, 0)),  # not a multiple of 4 lanes: Matmul takes it
    ],
)
def test_register_tile_from_the_target(
    preset: str, channels: int, columns: int, tile: tuple[int, int]
) -> None:
    cfg = ConvConfig.for_target(PRESETS[preset])
    lanes = cfg.lanes(32)
    assert register_tile(cfg, lanes, channels, columns) == tile
    width, mr = tile
    if width:
        vectors = -(-width // lanes)
        assert mr * vectors + vectors + 1 <= cfg.registers


def test_dense_loops_and_packed_weight() -> None:
    sch = _scheduled(_conv(64, 64, 56, epilogue="bn_relu"), PRESETS["avx512"])
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("conv2d"))]
    kinds = [(lp.kind.value, lp.extent.value) for lp in loops]  # type: ignore[union-attr]
    assert kinds[-1] == ("vectorized", 64)  # output channels, four AVX-512 vectors
    assert kinds[-2] == ("serial", 4)  # output columns of the register tile
    assert kinds[0][0] == "parallel"
    shapes = {b.name: tuple(d.value for d in b.shape) for b in _allocated(sch.func)}
    assert shapes["w_global"] == (1, 64, 3, 3, 64)  # W_p[oc // 64, ic, r, q, oc % 64]
    assert shapes["conv2d"] == (1, 56, 56, 64)  # the accumulator tile, output channels last


def _innermost(func: tc.ir.PrimFunc, preset: str) -> tuple[str, int]:
    sch = _scheduled(func, PRESETS[preset])
    loop = sch.get(sch.get_loops(sch.get_block("conv2d"))[-1])
    return loop.kind.value, loop.extent.value  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("preset", "c", "o", "size", "innermost"),
    [
        ("avx512", 24, 144, 56, ("vectorized", 56)),  # 1x1 expansion: rows of 56 columns
        ("avx512", 144, 24, 56, ("vectorized", 56)),  # 1x1 projection to 24 channels: rows
        ("avx512", 192, 32, 28, ("vectorized", 32)),  # 28 = 16 + 12 columns: channel vectors
        ("avx2", 24, 144, 56, ("vectorized", 56)),
        ("avx2", 192, 32, 28, ("vectorized", 16)),  # rows: 2 x 4 vectors, an eighth unused
    ],
)
def test_pointwise_rows_or_channel_vectors(
    preset: str, c: int, o: int, size: int, innermost: tuple[str, int]
) -> None:
    func = _conv(c, o, size, k=1, pad=0, epilogue="clip")
    assert _innermost(func, preset) == innermost


def _allocated(func: tc.ir.PrimFunc) -> list[tc.ir.Buffer]:
    root = func.body.block if hasattr(func.body, "block") else func.body
    return list(root.alloc_buffers)


@pytest.mark.parametrize(
    ("func", "reason"),
    [
        (_conv(8, 8, 10, groups=2), "grouped convolution that is not depthwise"),
        (_conv(6, 6, 10), "no multiple of"),
    ],
)
def test_declines_with_a_reason(func: tc.ir.PrimFunc, reason: str) -> None:
    got = Conv().apply(func, PRESETS["avx2"], False)
    assert isinstance(got, Decline), got
    assert reason in got.reason


def test_declines_what_is_not_a_static_nchw_convolution() -> None:
    h = tc.ir.Var("h", "int32")
    x = te.placeholder((1, 4, h, 9), "float32", name="x")
    w = te.placeholder((8, 4, 3, 3), "float32", name="w")
    symbolic = te.create_prim_func([x, w, T.conv2d(x, w, padding=1)])
    xh = te.placeholder((1, 9, 9, 4), "float32", name="x")
    wh = te.placeholder((3, 3, 4, 8), "float32", name="w")
    nhwc = te.create_prim_func([xh, wh, T.conv2d(xh, wh, padding=1, layout="NHWC")])
    a = te.placeholder((16, 16), "float32", name="a")
    b = te.placeholder((16, 16), "float32", name="b")
    matmul = te.create_prim_func([a, b, T.matmul(a, b)])
    for func, reason in ((symbolic, "symbolic"), (nhwc, "W[oc, ic, r, q]"), (matmul, "")):
        got = Conv().apply(func, PRESETS["avx512"], False)
        assert isinstance(got, Decline), got
        assert got.reason
        assert reason in got.reason


def test_explain_names_the_rule_for_a_resnet_block() -> None:
    import models

    from tilecraft import rules as dl

    target = PRESETS["avx512"]
    with target:
        mod = models.pipelined(models.small("resnet18_block_small"), "default", bind=True)
    report = dl.explain(mod, default_rules(), target)
    taken = {f.name: f.rule for f in report.functions}
    assert taken["fused_conv2d_multiply_add_relu"] == "Conv", str(report)
    assert taken["fused_conv2d_multiply_add_add1_relu"] == "Conv", str(report)
    assert "Conv" in str(report)


def test_small_reduction_writes_back_by_channel() -> None:
    """K = 27 (3 input channels, 3x3): the write-back costs more than the products, so the
    epilogue runs on vectors of output channels; K = 27 * 8 does not."""
    for c, innermost in ((3, ("vectorized", 32)), (24, ("serial", 3))):
        sch = _scheduled(_conv(c, 32, 17, stride=2, epilogue="clip"), PRESETS["avx512"])
        loop = sch.get(sch.get_loops(sch.get_block("T_clip"))[-1])
        assert (loop.kind.value, loop.extent.value) == innermost  # type: ignore[union-attr]

"""topi operators as PrimFuncs for the CPU rule tests, with the rule that should take each.

``OPS`` maps a name to ``(builder, expected, sizes)``: ``expected`` is the first rule of
``default_rules()`` (Conv, Matmul, GEMV, Reduction, GeneralReduction, Injective, Fallback)
that should accept the function, ``sizes`` the values of the symbolic extent ``n`` to check
(empty for static shapes).
"""

from __future__ import annotations

from collections.abc import Callable

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.rules import Decline, ScheduleRule
from tilecraft.testing import check_numeric

N = tc.ir.Var("n", "int32")
CPU = tc.Target("cpu")
Builder = Callable[[], tc.ir.PrimFunc]


def ph(shape: tuple[object, ...], name: str, dtype: str = "float32") -> te.Tensor:
    return te.placeholder(shape, dtype, name=name)


def unary(op: Callable[..., te.Tensor], shape: tuple[object, ...], in_dtype: str = "float32",
          **kw: object) -> Builder:  # fmt: skip
    def build() -> tc.ir.PrimFunc:
        x = ph(shape, "x", in_dtype)
        return te.create_prim_func([x, op(x, **kw)])

    return build


def binary(op: Callable[..., te.Tensor], ashape: tuple[object, ...],
           bshape: tuple[object, ...], dtype: str = "float32") -> Builder:  # fmt: skip
    def build() -> tc.ir.PrimFunc:
        a, b = ph(ashape, "a", dtype), ph(bshape, "b", dtype)
        return te.create_prim_func([a, b, op(a, b)])

    return build


def layer_norm(shape: tuple[object, ...], dtype: str = "float32") -> Builder:
    def build() -> tc.ir.PrimFunc:
        x, g, b = ph(shape, "x", dtype), ph(shape[-1:], "g", dtype), ph(shape[-1:], "b", dtype)
        return te.create_prim_func([x, g, b, topi.layer_norm(x, g, b)])

    return build


def rms_norm(shape: tuple[object, ...], dtype: str = "float32") -> Builder:
    def build() -> tc.ir.PrimFunc:
        x, w = ph(shape, "x", dtype), ph(shape[-1:], "w", dtype)
        return te.create_prim_func([x, w, topi.rms_norm(x, w)])

    return build


def add_rms_norm(write_sum: bool) -> Builder:
    """``fused_add_rms_norm``: the residual sum, optionally written out, then RMS norm."""

    def build() -> tc.ir.PrimFunc:
        x, r, w = ph((N, 100), "x"), ph((N, 100), "r"), ph((100,), "w")
        s = topi.add(x, r)
        outs = [s, topi.rms_norm(s, w)] if write_sum else [topi.rms_norm(s, w)]
        return te.create_prim_func([x, r, w, *outs])

    return build


def matmul(ashape: tuple[object, ...], bshape: tuple[object, ...], **kw: bool) -> Builder:
    def build() -> tc.ir.PrimFunc:
        a, b = ph(ashape, "A"), ph(bshape, "B")
        return te.create_prim_func([a, b, topi.matmul(a, b, **kw)])

    return build


def dense_bias() -> tc.ir.PrimFunc:
    x, w, bias = ph((N, 32), "x"), ph((16, 32), "W"), ph((16,), "bias")
    return te.create_prim_func([x, w, bias, topi.dense(x, w, bias)])


def conv2d() -> tc.ir.PrimFunc:
    x, w = ph((N, 3, 9, 9), "X"), ph((4, 3, 3, 3), "W")
    return te.create_prim_func([x, w, topi.conv2d(x, w, padding=1)])


def take() -> tc.ir.PrimFunc:
    x, idx = ph((100, 13), "x"), ph((7,), "idx", "int32")
    return te.create_prim_func([x, idx, topi.take(x, idx, axis=0)])


def embedding() -> tc.ir.PrimFunc:
    table, ids = ph((50, 24), "table"), ph((2, N), "ids", "int32")
    return te.create_prim_func([table, ids, topi.embedding(table, ids)])


def concat() -> tc.ir.PrimFunc:
    x, y = ph((N, 13), "x"), ph((N, 7), "y")
    return te.create_prim_func([x, y, topi.concat([x, y], axis=1)])


def split() -> tc.ir.PrimFunc:
    x = ph((7, 100), "x")
    return te.create_prim_func([x, *topi.split(x, 2, axis=1)])


def where() -> tc.ir.PrimFunc:
    c, a, b = ph((13, 100), "c", "bool"), ph((13, 100), "a"), ph((100,), "b")
    return te.create_prim_func([c, a, b, topi.where(c, a, b)])


def rotary() -> tc.ir.PrimFunc:
    x, cos, sin = ph((2, N, 16), "x"), ph((N, 16), "cos"), ph((N, 16), "sin")
    return te.create_prim_func([x, cos, sin, topi.rotary_embedding(x, cos, sin)])


def attention() -> tc.ir.PrimFunc:
    q, k, v = ph((2, 13, 8), "q"), ph((2, 13, 8), "k"), ph((2, 13, 8), "v")
    return te.create_prim_func([q, k, v, topi.causal_attention(q, k, v)])


SYM = (1, 7, 33)
OPS: dict[str, tuple[Builder, str, tuple[int, ...]]] = {
    # reductions: Reduction
    "sum_last": (unary(topi.sum, (7, 1000), axis=1), "Reduction", ()),
    "sum_last_sym_rows": (unary(topi.sum, (N, 64), axis=1), "Reduction", SYM),
    "sum_last_sym_len": (unary(topi.sum, (5, N), axis=1), "Reduction", SYM),
    "sum_first": (unary(topi.sum, (13, 100), axis=0), "Reduction", ()),
    "sum_middle_keepdims": (unary(topi.sum, (3, 13, 20), axis=1, keepdims=True), "Reduction", ()),
    "sum_two_axes": (unary(topi.sum, (4, 6, 10), axis=(0, 2)), "Reduction", ()),
    "sum_all": (unary(topi.sum, (13, 7)), "Reduction", ()),
    "sum_int32": (unary(topi.sum, (7, 64), in_dtype="int32", axis=1), "Reduction", ()),
    "sum_float64": (unary(topi.sum, (7, 100), in_dtype="float64", axis=1), "Reduction", ()),
    "prod": (unary(topi.prod, (5, 8), axis=1), "Reduction", ()),
    "max_keepdims": (unary(topi.max, (N, 1000), axis=1, keepdims=True), "Reduction", SYM),
    "min_first": (unary(topi.min, (100, N), axis=0), "Reduction", SYM),
    "max_float16": (unary(topi.max, (7, 64), in_dtype="float16", axis=1), "Reduction", ()),
    "mean": (unary(topi.mean, (N, 100), axis=1), "Reduction", SYM),
    "mean_spatial": (unary(topi.mean, (2, 3, 7, 7), axis=(2, 3)), "Reduction", ()),
    "max_pool2d": (unary(topi.max_pool2d, (2, 3, 9, 9), kernel=2, stride=2), "Reduction", ()),
    "max_pool2d_pad": (
        unary(topi.max_pool2d, (1, 4, 10, 10), kernel=3, stride=2, padding=1),
        "Reduction",
        (),
    ),
    "avg_pool2d": (unary(topi.avg_pool2d, (N, 3, 8, 8), kernel=3, stride=1), "Reduction", (1, 3)),
    "rms_norm": (rms_norm((N, 100)), "Reduction", SYM),
    "add_rms_norm": (add_rms_norm(False), "Reduction", SYM),
    # row computations with several reductions: GeneralReduction
    "softmax": (unary(topi.softmax, (13, 1000)), "GeneralReduction", ()),
    "softmax_sym_rows": (unary(topi.softmax, (N, 64)), "GeneralReduction", SYM),
    "softmax_sym_len": (unary(topi.softmax, (3, N)), "GeneralReduction", SYM),
    "softmax_axis1": (unary(topi.softmax, (3, 13, 20), axis=1), "GeneralReduction", ()),
    "softmax_axis0": (unary(topi.softmax, (13, 7), axis=0), "GeneralReduction", ()),
    "softmax_float64": (unary(topi.softmax, (7, 100), in_dtype="float64"), "GeneralReduction", ()),
    "log_softmax": (unary(topi.log_softmax, (7, 13)), "GeneralReduction", ()),
    "layer_norm": (layer_norm((2, 5, 100)), "GeneralReduction", ()),
    "layer_norm_sym": (layer_norm((N, 7)), "GeneralReduction", SYM),
    "layer_norm_float16": (layer_norm((4, 64), "float16"), "GeneralReduction", ()),
    "group_norm": (
        unary(topi.group_norm, (2, 8, 5, 5), gamma=None, beta=None, num_groups=2),
        "GeneralReduction",
        (),
    ),
    "add_rms_norm_two_outputs": (add_rms_norm(True), "GeneralReduction", SYM),
    "attention": (attention, "GeneralReduction", ()),
    # no reduction: Injective
    "relu": (unary(topi.relu, (13, 7)), "Injective", ()),
    "gelu_one": (unary(topi.gelu, (1, 1)), "Injective", ()),
    "silu_sym": (unary(topi.silu, (N, 100)), "Injective", SYM),
    "exp_float64": (unary(topi.exp, (1000,), in_dtype="float64"), "Injective", ()),
    "cast": (unary(topi.cast, (13, 100), dtype="float16"), "Injective", ()),
    "add": (binary(topi.add, (N, 100), (N, 100)), "Injective", SYM),
    "add_bias": (binary(topi.add, (N, 100), (100,)), "Injective", SYM),
    "add_int32": (binary(topi.add, (7, 13), (7, 13), "int32"), "Injective", ()),
    "add_float16": (binary(topi.add, (13, 100), (13, 100), "float16"), "Injective", ()),
    "multiply_column": (binary(topi.multiply, (13, 100), (13, 1)), "Injective", ()),
    "divide_scalar": (binary(topi.divide, (7, 13), ()), "Injective", ()),
    "where": (where, "Injective", ()),
    "transpose": (unary(topi.transpose, (100, 37)), "Injective", ()),
    "transpose_sym": (unary(topi.transpose, (N, 37)), "Injective", SYM),
    "permute_last_two": (unary(topi.permute, (2, 3, 20, 33), axes=[0, 1, 3, 2]), "Injective", ()),
    "permute_heads": (unary(topi.permute, (2, N, 3, 16), axes=[0, 2, 1, 3]), "Injective", SYM),
    "reshape": (unary(topi.reshape, (13, 100), newshape=(26, 50)), "Injective", ()),
    "pad": (unary(topi.pad, (13, 7), pad_before=[1, 2]), "Injective", ()),
    "concat": (concat, "Injective", SYM),
    "split": (split, "Injective", ()),
    "take": (take, "Injective", ()),
    "embedding": (embedding, "Injective", SYM),
    "rotary": (rotary, "Injective", SYM),
    "matmul": (matmul((13, 7), (7, 100)), "Matmul", ()),
    "batch_matmul": (matmul((2, 7, 13), (2, 13, 5)), "Matmul", ()),
    "dense_bias": (dense_bias, "Matmul", SYM),
    "conv2d": (conv2d, "Conv", (1, 2)),  # symbolic batch
    # what the earlier rules leave
    "argmax": (unary(topi.argmax, (7, 13), axis=1), "Fallback", ()),
    "argmin": (unary(topi.argmin, (13, 7), axis=0), "Fallback", ()),
}


def tolerances(func: tc.ir.PrimFunc) -> dict[str, float]:
    """Wider tolerances for float16 (and reductions reassociated in float32)."""
    dtypes = {str(b.dtype) for b in func.buffer_params}
    if "float16" in dtypes:
        return {"rtol": 2e-2, "atol": 2e-2}
    if "float32" in dtypes:
        return {"rtol": 1e-4, "atol": 1e-5}
    return {}


def symbolic_names(func: tc.ir.PrimFunc) -> list[str]:
    """Names of the symbolic extents of ``func``'s buffers."""
    names = {s.name for b in func.buffer_params for s in b.shape if isinstance(s, tc.ir.Var)}
    return sorted(names)


def check_rule(rule: ScheduleRule, func: tc.ir.PrimFunc, sizes: tuple[int, ...] = ()) -> object:
    """Apply ``rule`` alone; a Decline must give a reason, a Schedule must compute the same.

    Returns the rule's result (Schedule or Decline).
    """
    got = rule.apply(func, CPU, False)
    if isinstance(got, Decline):
        assert got.reason, f"{rule.name} declined without a reason"
        return got
    assert isinstance(got, tc.Schedule), f"{rule.name} returned {type(got).__name__}"
    names = symbolic_names(func)
    for size in sizes or ((7,) if names else (0,)):
        shape_vars = dict.fromkeys(names, size) or None
        check_numeric(got.func, func, shape_vars=shape_vars, seed=size, **tolerances(func))
    return got


def loop_kinds(sch: tc.Schedule, block: str) -> list[tuple[str, int | None]]:
    """(kind, constant extent) of each loop above ``block``, outermost first."""
    out: list[tuple[str, int | None]] = []
    for lp in sch.get_loops(sch.get_block(block)):
        node = sch.get(lp)
        assert isinstance(node, tc.ir.For)
        ext = node.extent.value if isinstance(node.extent, tc.ir.IntImm) else None
        out.append((node.kind.value, ext))
    return out


def outer_loop_var(sch: tc.Schedule, block: str) -> tc.ir.Var | None:
    """The variable of the outermost loop above ``block``."""
    loops = sch.get_loops(sch.get_block(block))
    return loops[0].var if loops else None


def block_names(func: tc.ir.PrimFunc) -> list[str]:
    """Names of every block of ``func`` but the root, in program order."""
    names: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, tc.ir.Block) and node.name != "root":
            names.append(node.name)

    tc.ir.post_order_visit(func.body, visit)
    return names

"""Malformed script raises ScriptParseError with position, source line and what was expected."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.errors import ScriptParseError

HEAD = '@T.prim_func\ndef f(A: T.Buffer((4,), "float32"), n: T.int32):\n'


def fn(*body: str) -> str:
    """A function whose body lines start at line 3."""
    return HEAD + "".join("    " + line + "\n" for line in body)


def block(*inner: str) -> str:
    """A loop with a block (line 3: for, 4: with T.block, inner lines from 5)."""
    return fn("for i in range(4):", '    with T.block("B"):', *("        " + s for s in inner))


# (id, text, line, message fragment)
CASES = [
    ("syntax", "@T.prim_func\ndef f(:\n    pass\n", 2, "invalid Python syntax"),
    ("two_functions", fn("T.evaluate(0)") + fn("T.evaluate(0)"), 5, "exactly one"),
    ("empty_text", "   \n", 0, "exactly one"),
    ("undefined_var", fn("A[0] = y"), 3, "undefined variable 'y'"),
    ("undefined_buffer", fn("B[0] = T.float32(1.0)"), 3, "undefined buffer 'B'"),
    (
        "use_before_def",
        fn("A[i] = T.float32(1.0)", "for i in range(4):", "    T.evaluate(i)"),
        3,
        "undefined variable 'i'",
    ),
    (
        "loop_var_out_of_scope",
        fn("for i in range(4):", "    T.evaluate(i)", "T.evaluate(i)"),
        5,
        "undefined variable 'i'",
    ),
    ("unknown_t_name", fn("T.evaluate(T.foo(1))"), 3, "unknown script function T.foo"),
    ("unknown_function", fn("T.evaluate(foo(1))"), 3, "unknown function 'foo'"),
    (
        "wrong_arity",
        fn("A[0] = T.exp(A[0], A[1])"),
        3,
        "T.exp expects 1 positional argument(s), got 2",
    ),
    (
        "bad_dtype",
        '@T.prim_func\ndef f(A: T.Buffer((4,), "flaot32")):\n    T.evaluate(0)\n',
        2,
        "bad dtype 'flaot32'",
    ),
    (
        "non_literal_shape",
        '@T.prim_func\ndef f(A: T.Buffer(("n", 4), "float32")):\n    T.evaluate(0)\n',
        2,
        "shape entries must be integers",
    ),
    (
        "undefined_shape_var",
        '@T.prim_func\ndef f(A: T.Buffer((m, 4), "float32")):\n    T.evaluate(0)\n',
        2,
        "undefined variable 'm'",
    ),
    (
        "duplicate_block",
        fn('with T.block("B"):', "    T.evaluate(0)", 'with T.block("B"):', "    T.evaluate(1)"),
        5,
        "duplicate block name 'B'",
    ),
    ("store_dtype_mismatch", fn("A[0] = T.int64(1)"), 3, "dtype mismatch"),
    (
        "thread_binding_no_tag",
        fn("for i in T.thread_binding(4):", "    T.evaluate(i)"),
        3,
        "needs thread=",
    ),
    (
        "bad_thread_tag",
        fn('for i in T.thread_binding(4, thread="warp.x"):', "    T.evaluate(i)"),
        3,
        "unknown thread tag 'warp.x'",
    ),
    (
        "axis_outside_block",
        fn("vi = T.axis.spatial(4, n)", "T.evaluate(vi)"),
        3,
        "only allowed at the start of a T.block body",
    ),
    ("init_outside_block", fn("with T.init():", "    T.evaluate(0)"), 3, "T.init is only allowed"),
    (
        "block_without_body",
        block("vi = T.axis.spatial(4, i)", "T.reads(A[vi])"),
        4,
        "no body statements",
    ),
    (
        "axis_after_body",
        block("T.evaluate(0)", "vi = T.axis.spatial(4, i)"),
        6,
        "only allowed at the start of a T.block body",
    ),
    (
        "axis_wrong_arity",
        block("vi = T.axis.spatial(4)", "T.evaluate(vi)"),
        5,
        "T.axis.spatial expects 2 positional argument(s), got 1",
    ),
    ("reads_twice", block("T.reads(A[0])", "T.reads(A[1])", "T.evaluate(0)"), 6, "appears twice"),
    ("region_step", block("T.reads(A[0:4:2])", "T.evaluate(0)"), 5, "take no step"),
    ("region_not_buffer", block("T.reads(n)", "T.evaluate(0)"), 5, "is a variable, not a buffer"),
    ("chained_compare", fn("T.evaluate(T.Select(0 < n < 4, 1, 2))"), 3, "chained comparisons"),
    (
        "missing_annotation",
        "@T.prim_func\ndef f(A):\n    T.evaluate(0)\n",
        2,
        "needs an annotation",
    ),
    ("float_index", fn("A[1.5] = T.float32(0.0)"), 3, "indices must be integer"),
    ("rank_mismatch", fn("A[0, 0] = T.float32(0.0)"), 3, "2 indices for a buffer of rank 1"),
    ("pass_body", fn("for i in range(4):", "    pass"), 4, "'pass' has no IR form"),
    ("while_loop", fn("while n < 4:", "    T.evaluate(0)"), 3, "unsupported statement"),
    (
        "bad_decorator",
        '@T.something\ndef f(A: T.Buffer((4,), "float32")):\n    T.evaluate(0)\n',
        1,
        "unexpected decorator",
    ),
    (
        "grid_arity",
        fn("for i in T.grid(4, 4):", "    T.evaluate(i)"),
        3,
        "T.grid has 2 extents but 1 loop variables",
    ),
    ("let_without_body", fn("T.evaluate(0)", "x: T.int32 = n + 1"), 4, "must be followed"),
    ("int_overflow", fn("T.evaluate(T.int8(300))"), 3, "does not fit in int8"),
    ("non_literal_constant", fn("T.evaluate(T.int64(n))"), 3, "takes a literal number"),
    (
        "unknown_keyword",
        '@T.prim_func\ndef f(A: T.Buffer((4,), "float32", scop="local")):\n    T.evaluate(0)\n',
        2,
        "unexpected keyword 'scop'",
    ),
    (
        "bad_scope",
        '@T.prim_func\ndef f(A: T.Buffer((4,), "float32", scope="texture")):\n    T.evaluate(0)\n',
        2,
        "unknown scope 'texture'",
    ),
    (
        "attr_not_literal",
        fn("T.func_attr({'a': n})", "T.evaluate(0)"),
        3,
        "expected a literal attribute value",
    ),
    ("buffer_as_value", fn("T.evaluate(A)"), 3, "buffer 'A' used as a value"),
    ("slice_in_store", fn("A[0:2] = T.float32(0.0)"), 3, "slices are only allowed"),
    (
        "for_else",
        fn("for i in range(4):", "    T.evaluate(i)", "else:", "    T.evaluate(0)"),
        6,
        "for-else",
    ),
    ("power", fn("T.evaluate(n ** 2)"), 3, "unsupported operator Pow"),
    (
        "late_declaration",
        fn("T.evaluate(0)", "m = T.int32()", "T.evaluate(m)"),
        4,
        "only allowed among the first statements",
    ),
    ("reserved_T", fn("for T in range(4):", "    T.evaluate(0)"), 3, "reserved"),
    ("float_into_int", fn("T.evaluate(n + 0.5)"), 3, "cannot use the float 0.5"),
    ("bool_arith", fn("T.evaluate((n < 1) + (n < 2))"), 3, "arithmetic on bool"),
    ("if_not_bool", fn("if n:", "    T.evaluate(0)"), 3, "condition must be a bool"),
    ("module_junk", "@T.ir_module\nclass M:\n    x = 1\n", 3, "holds only @T.prim_func"),
    ("string_expr", fn('T.evaluate("s")'), 3, "unexpected constant 's'"),
    ("cast_bad_dtype", fn('T.evaluate(T.Cast("int33", n))'), 3, "bad dtype 'int33'"),
]


@pytest.mark.parametrize(
    ("text", "line", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_input(text: str, line: int, fragment: str) -> None:
    with pytest.raises(ScriptParseError) as info:
        tc.script.parse(text)
    err = info.value
    assert fragment in err.message, str(err)
    assert err.line == line, str(err)
    if line:
        assert err.column >= 1
        assert err.source_line == text.splitlines()[line - 1].rstrip()
        assert f"line {line}, column {err.column}" in str(err)


def test_case_count_and_distinct() -> None:
    assert len(CASES) >= 20
    assert len({c[1] for c in CASES}) == len(CASES)


def test_column_points_at_the_construct() -> None:
    with pytest.raises(ScriptParseError) as info:
        tc.script.parse(fn("A[0] = A[1] + undefined"))
    assert info.value.column == len("    A[0] = A[1] + ") + 1
    assert info.value.source_line.endswith("undefined")


def test_indented_text_reports_original_columns() -> None:
    text = "\n".join("        " + ln for ln in fn("A[0] = y").splitlines())
    with pytest.raises(ScriptParseError) as info:
        tc.script.parse(text)
    assert info.value.line == 3
    assert info.value.column == len("            A[0] = ") + 1


def test_non_text_input() -> None:
    with pytest.raises(ScriptParseError, match="expected script text"):
        tc.script.parse(5)  # type: ignore[arg-type]

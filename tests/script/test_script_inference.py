"""Script shorthands: inferred T.reads/T.writes, the implicit root block, T.axis.remap."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import ScriptParseError
from tilecraft.ir import Block, BlockRealize, PrimFunc, post_order_visit, structural_equal
from tilecraft.testing import assert_ir_equal


def _parse(text: str, verify: bool = True) -> PrimFunc:
    func = tc.script.parse(textwrap.dedent(text), verify=verify)
    assert isinstance(func, PrimFunc)
    return func


def _block(func: PrimFunc, name: str) -> Block:
    found: list[Block] = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return next(b for b in found if b.name == name)


def _regions(func: PrimFunc, name: str) -> tuple[list[str], list[str]]:
    blk = _block(func, name)
    text = tc.script.to_script
    return [text(r) for r in blk.reads], [text(r) for r in blk.writes]


def _one_block(body: str, header: str = "", extra: str = "", verify: bool = True) -> PrimFunc:
    """One block "B" over ``for i in range(16)`` with ``header`` and ``body`` inside.

    ``verify=False`` for the cases that show what inference does on malformed IR (accesses
    out of range, regions stated empty on purpose), which the verifier rightly refuses.
    """
    inner = textwrap.dedent(header) + textwrap.dedent(body).strip()
    lines = [
        "@T.prim_func",
        f'def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64,), "float32"){extra}):',
        "    for i in range(16):",
        '        with T.block("B"):',
        "            vi = T.axis.spatial(16, i)",
        *("            " + ln for ln in inner.splitlines()),
    ]
    return _parse("\n".join(lines), verify)


MATMUL_IMPLICIT = """
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    with T.block("root"):
        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""  # noqa: E501


def test_reduction_block_reads_like_create_prim_func() -> None:
    """Reads cover every load, sources first and the accumulated output last, as te does."""
    func = _parse(MATMUL_IMPLICIT)
    assert _regions(func, "C") == (["A[vi, vk]", "B[vk, vj]", "C[vi, vj]"], ["C[vi, vj]"])
    a = tc.te.placeholder((16, 16), "float32", name="A")
    b = tc.te.placeholder((16, 16), "float32", name="B")
    k = tc.te.reduce_axis((0, 16), name="k")
    c = tc.te.compute((16, 16), lambda i, j: tc.te.sum(a[i, k] * b[k, j], axis=k), name="C")
    assert_ir_equal(func, tc.te.create_prim_func([a, b, c]))


@pytest.mark.parametrize(
    ("body", "reads"),
    [
        ("B[vi] = A[vi, 3] + A[vi, 3]", ["A[vi, 3]"]),  # one expression stays as written
        ("B[vi] = A[vi + 1, 0] + A[vi, 2] + A[vi + 2, 1]", ["A[vi:vi + 3, 0:3]"]),
        ("B[vi] = A[vi - 1, 0] + A[vi + 1, 0]", ["A[vi - 1:vi - 1 + 3, 0]"]),
        ("B[vi] = A[(vi + 1) % 16, 0] + A[vi, 0]", ["A[0:64, 0]"]),  # no common base
        ('B[vi] = A[vi, T.Cast("int32", B[vi])]', ["A[vi, 0:64]", "B[vi]"]),  # index loads
    ],
)
def test_point_accesses_are_joined_per_axis(body: str, reads: list[str]) -> None:
    assert _regions(_one_block(body, verify=False), "B") == (reads, ["B[vi]"])


@pytest.mark.parametrize(
    ("loop", "index", "region"),
    [
        ("range(16)", "vi, k", "A[vi, 0:16]"),
        ("range(16)", "vi, k + 1", "A[vi, 1:17]"),
        ("range(16)", "vi * 4 + k // 4, 15 - k", "A[vi * 4:vi * 4 + 4, 0:16]"),
        ("range(16)", "vi, k * 2 + 1", "A[vi, 1:32]"),
        ("range(16)", "vi, k % 4", "A[vi, 0:4]"),
        ("range(16)", "vi, T.min(k, 3)", "A[vi, 0:4]"),
        ("range(n)", "vi, k", "A[vi, 0:n]"),
        ("range(16)", "vi, k * vi", "A[vi, 0:64]"),  # not bounded: the whole axis
    ],
)
def test_body_loops_are_relaxed(loop: str, index: str, region: str) -> None:
    body = f"""
    for k in {loop}:
        B[vi] = B[vi] + A[{index}]
    """
    func = _one_block(body, extra=", n: T.int32", verify=False)
    assert _regions(func, "B") == ([region, "B[vi]"], ["B[vi]"])


def test_lets_local_buffers_and_stores_are_covered() -> None:
    body = """
    x: T.int32 = vi * 2
    L = T.allocate((4,), "float32", scope="local")
    L[0] = A[x, 0]
    B[x % 16] = L[0] + A[x + 1, 0]
    """
    func = _one_block(body, header='T.block_attr({"note": "x"})\n')
    assert _regions(func, "B") == (["A[vi * 2:vi * 2 + 2, 0]"], ["B[vi * 2 % 16]"])


def test_block_allocations_and_nested_blocks_are_not_listed() -> None:
    func = _parse(
        """
        @T.prim_func
        def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
            with T.block("outer"):
                S = T.alloc_buffer((8,), "float32")
                for i in range(8):
                    with T.block("inner"):
                        vi = T.axis.spatial(8, i)
                        S[vi] = A[vi]
                C[0] = S[0]
        """
    )
    assert _regions(func, "outer") == ([], ["C[0]"])
    assert _regions(func, "inner") == (["A[vi]"], ["S[vi]"])


def test_only_the_omitted_side_is_inferred() -> None:
    func = _one_block("B[vi] = A[vi, 0]", header="T.reads(A[0:64, 0:64])\n")
    assert _regions(func, "B") == (["A[0:64, 0:64]"], ["B[vi]"])
    func = _one_block("B[vi] = A[vi, 0]", header="T.writes(B[0:16])\n")
    assert _regions(func, "B") == (["A[vi, 0]"], ["B[0:16]"])
    func = _one_block("B[vi] = A[vi, 0]", header="T.reads()\nT.writes()\n", verify=False)
    assert _regions(func, "B") == ([], [])


def test_empty_regions_print_explicitly_and_round_trip() -> None:
    """A block whose stated regions are empty although it accesses buffers keeps them empty."""
    func = _one_block("B[vi] = A[vi, 0]", header="T.reads()\nT.writes()\n", verify=False)
    text = func.script()
    assert "T.reads()\n" in text
    back = tc.script.parse(text, verify=False)
    assert structural_equal(back, func)
    assert back.script() == text
    root_only = _parse(MATMUL_IMPLICIT).script()
    assert 'with T.block("root"):\n        for' in root_only  # root: nothing to state


INLINE_CHAIN = """
@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((16,), "float32")
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] * T.float32(2.0)
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = B[vi] + T.float32(1.0)
"""


def test_compute_inline_sees_consumers_without_stated_regions() -> None:
    """Regression: with empty regions compute_inline deleted the live producer "B"."""
    func = _parse(INLINE_CHAIN)
    sch = tc.Schedule(func)
    sch.compute_inline(sch.get_block("B"))
    assert _regions(sch.func, "C") == (["A[vi]"], ["C[vi]"])
    expected = _parse(
        """
        @T.prim_func
        def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
            with T.block("root"):
                for i in range(16):
                    with T.block("C"):
                        vi = T.axis.spatial(16, i)
                        T.reads(A[vi])
                        T.writes(C[vi])
                        C[vi] = A[vi] * T.float32(2.0) + T.float32(1.0)
        """
    )
    assert_ir_equal(sch.func, expected)
    lib = tc.build(sch.mod, target="cpu")
    a = np.arange(16, dtype="float32")
    c = np.zeros(16, "float32")
    lib["main"](a, c)
    np.testing.assert_allclose(c, a * 2 + 1)


def test_top_level_alloc_buffer_opens_the_root_block() -> None:
    implicit = _parse(
        """
        @T.prim_func
        def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
            B = T.alloc_buffer((16,), "float32")
            for i in range(16):
                with T.block("B"):
                    vi = T.axis.spatial(16, i)
                    B[vi] = A[vi] * T.float32(2.0)
            for i in range(16):
                with T.block("C"):
                    vi = T.axis.spatial(16, i)
                    C[vi] = B[vi] + T.float32(1.0)
        """
    )
    assert isinstance(implicit.body, BlockRealize)
    assert implicit.body.block.name == "root"
    assert [b.name for b in implicit.body.block.alloc_buffers] == ["B"]
    assert_ir_equal(implicit, _parse(INLINE_CHAIN))
    assert structural_equal(tc.script.parse(implicit.script()), implicit)


def test_implicit_root_errors() -> None:
    with pytest.raises(ScriptParseError, match=r"duplicate block name 'root'"):
        _parse(
            """
            @T.prim_func
            def main(A: T.Buffer((4,), "float32")):
                B = T.alloc_buffer((4,), "float32")
                with T.block("root"):
                    A[0] = B[0]
            """
        )
    with pytest.raises(ScriptParseError, match=r"line 4.*must be followed by statements"):
        _parse(
            """
            @T.prim_func
            def main(A: T.Buffer((4,), "float32")):
                B = T.alloc_buffer((4,), "float32")
            """
        )


def test_remap_equals_the_long_form() -> None:
    long_form = MATMUL_IMPLICIT.replace(
        'vi, vj, vk = T.axis.remap("SSR", [i, j, k])',
        "vi = T.axis.spatial(16, i)\n"
        + " " * 16
        + "vj = T.axis.spatial(16, j)\n"
        + " " * 16
        + "vk = T.axis.reduce(16, k)",
    )
    assert_ir_equal(_parse(MATMUL_IMPLICIT), _parse(long_form))


def test_remap_takes_the_loop_range() -> None:
    func = _parse(
        """
        @T.prim_func
        def main(A: T.Buffer((n,), "float32"), n: T.int32):
            for i in range(2, n):
                with T.block("A"):
                    vi = T.axis.remap("S", [i])
                    A[vi] = T.float32(0.0)
        """
    )
    text = func.script()
    assert "vi = T.axis.spatial((2, 2 + (n - 2)), i)" in text
    assert structural_equal(tc.script.parse(text), func)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('vi, vj = T.axis.remap("SX", [i, j])', r"kind 'X' is not 'S' \(spatial\) or 'R'"),
        ('vi, vj = T.axis.remap("S", [i, j])', r"1 kinds, 2 loop variables and 2 names"),
        ('vi, vj = T.axis.remap("SS", [i, n])', r"'n' is not the variable of an enclosing loop"),
        ('vi, vj = T.axis.remap("SS", [i, j + 1])', r"'j \+ 1' is not the variable"),
        ('vi, vj = T.axis.remap("SS", i)', r"expects a list of loop variables"),
        ("vi, vj = T.axis.remap(SS, [i, j])", r"iterator kinds must be a string literal"),
    ],
)
def test_remap_errors(line: str, message: str) -> None:
    text = f"""
    @T.prim_func
    def main(A: T.Buffer((4, 4), "float32"), n: T.int32):
        for i, j in T.grid(4, 4):
            with T.block("A"):
                {line}
                A[vi, vj] = T.float32(0.0)
    """
    with pytest.raises(ScriptParseError, match=message):
        _parse(text)


def test_remap_needs_a_realized_block() -> None:
    with pytest.raises(ScriptParseError, match=r"T.axis.remap binds loop variables"):
        _parse(
            """
            @T.prim_func
            def main(A: T.Buffer((4,), "float32")):
                for i in range(4):
                    with T.block("A", realize=False):
                        vi = T.axis.remap("S", [i])
                        A[vi] = T.float32(0.0)
            """
        )

"""Hand-scheduled GPU kernels in script form, with numpy references.

Each ``make_<name>(...)`` returns ``(func, reference)``: a GPU-scheduled PrimFunc (loops bound
to blockIdx/threadIdx, shared/local buffers) and a numpy function computing its outputs from its
inputs. Sizes are parameters so the tests use small problems and the benchmark large ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tilecraft as tc
from tilecraft.ir import PrimFunc

Kernel = tuple[PrimFunc, Callable[..., np.ndarray]]


def make_matmul(m: int = 64, n: int = 64, k: int = 64) -> Kernel:
    """C = A @ B: 32x32 tiles of A and B through shared memory, a 2x2 accumulator per thread."""
    assert m % 32 == 0
    assert n % 32 == 0
    assert k % 16 == 0
    text = f"""
@T.prim_func
def matmul(A: T.Buffer(({m}, {k}), "float32"), B: T.Buffer(({k}, {n}), "float32"), C: T.Buffer(({m}, {n}), "float32")):
    with T.block("root"):
        A_sh = T.alloc_buffer(({m // 32}, 32, 16), "float32", scope="shared")
        B_sh = T.alloc_buffer(({n // 32}, 16, 32), "float32", scope="shared")
        C_loc = T.alloc_buffer(({m // 32}, {n // 32}, 16, 16, 2, 2), "float32", scope="local")
        for by in T.thread_binding({m // 32}, thread="blockIdx.y"):
            for bx in T.thread_binding({n // 32}, thread="blockIdx.x"):
                for ty in T.thread_binding(16, thread="threadIdx.y"):
                    for tx in T.thread_binding(16, thread="threadIdx.x"):
                        for ii, jj in T.grid(2, 2):
                            with T.block("C_init"):
                                vby = T.axis.spatial({m // 32}, by)
                                vbx = T.axis.spatial({n // 32}, bx)
                                vty = T.axis.spatial(16, ty)
                                vtx = T.axis.spatial(16, tx)
                                vii = T.axis.spatial(2, ii)
                                vjj = T.axis.spatial(2, jj)
                                T.reads()
                                T.writes(C_loc[vby, vbx, vty, vtx, vii, vjj])
                                C_loc[vby, vbx, vty, vtx, vii, vjj] = T.float32(0.0)
                for ko in range({k // 16}):
                    for ty in T.thread_binding(16, thread="threadIdx.y"):
                        for tx in T.thread_binding(16, thread="threadIdx.x"):
                            for r in range(2):
                                with T.block("A_load"):
                                    vby = T.axis.spatial({m // 32}, by)
                                    vi = T.axis.spatial(32, r * 16 + ty)
                                    vk = T.axis.spatial(16, tx)
                                    vko = T.axis.spatial({k // 16}, ko)
                                    T.reads(A[vby * 32 + vi, vko * 16 + vk])
                                    T.writes(A_sh[vby, vi, vk])
                                    A_sh[vby, vi, vk] = A[vby * 32 + vi, vko * 16 + vk]
                    for ty in T.thread_binding(16, thread="threadIdx.y"):
                        for tx in T.thread_binding(16, thread="threadIdx.x"):
                            for r in range(2):
                                with T.block("B_load"):
                                    vbx = T.axis.spatial({n // 32}, bx)
                                    vk = T.axis.spatial(16, ty)
                                    vj = T.axis.spatial(32, r * 16 + tx)
                                    vko = T.axis.spatial({k // 16}, ko)
                                    T.reads(B[vko * 16 + vk, vbx * 32 + vj])
                                    T.writes(B_sh[vbx, vk, vj])
                                    B_sh[vbx, vk, vj] = B[vko * 16 + vk, vbx * 32 + vj]
                    for ty in T.thread_binding(16, thread="threadIdx.y"):
                        for tx in T.thread_binding(16, thread="threadIdx.x"):
                            for ki, ii, jj in T.grid(16, 2, 2):
                                with T.block("C_update"):
                                    vby = T.axis.spatial({m // 32}, by)
                                    vbx = T.axis.spatial({n // 32}, bx)
                                    vty = T.axis.spatial(16, ty)
                                    vtx = T.axis.spatial(16, tx)
                                    vii = T.axis.spatial(2, ii)
                                    vjj = T.axis.spatial(2, jj)
                                    vk = T.axis.reduce({k}, ko * 16 + ki)
                                    T.reads(C_loc[vby, vbx, vty, vtx, vii, vjj], A_sh[vby, vty + 16 * vii, vk % 16], B_sh[vbx, vk % 16, vtx + 16 * vjj])
                                    T.writes(C_loc[vby, vbx, vty, vtx, vii, vjj])
                                    C_loc[vby, vbx, vty, vtx, vii, vjj] = C_loc[vby, vbx, vty, vtx, vii, vjj] + A_sh[vby, vty + 16 * vii, vk % 16] * B_sh[vbx, vk % 16, vtx + 16 * vjj]
                for ty in T.thread_binding(16, thread="threadIdx.y"):
                    for tx in T.thread_binding(16, thread="threadIdx.x"):
                        for ii, jj in T.grid(2, 2):
                            with T.block("C_store"):
                                vby = T.axis.spatial({m // 32}, by)
                                vbx = T.axis.spatial({n // 32}, bx)
                                vty = T.axis.spatial(16, ty)
                                vtx = T.axis.spatial(16, tx)
                                vii = T.axis.spatial(2, ii)
                                vjj = T.axis.spatial(2, jj)
                                T.reads(C_loc[vby, vbx, vty, vtx, vii, vjj])
                                T.writes(C[vby * 32 + vty + 16 * vii, vbx * 32 + vtx + 16 * vjj])
                                C[vby * 32 + vty + 16 * vii, vbx * 32 + vtx + 16 * vjj] = C_loc[vby, vbx, vty, vtx, vii, vjj]
"""  # noqa: E501
    return tc.script.parse(text), lambda a, b: a @ b


def _row_reduction_text(name: str, m: int, n: int, threads: int, body: str, allocs: str) -> str:
    return f"""
@T.prim_func
def {name}(A: T.Buffer(({m}, {n}), "float32"), B: T.Buffer(({m}, {n}), "float32")):
    with T.block("root"):
{allocs}
        for bx in T.thread_binding({m}, thread="blockIdx.x"):
{body}
"""


def _reduce_nest(block: str, threads: int, n: int, m: int, init: str, update: str,
                 reads: str, out: str) -> str:  # fmt: skip
    return f'''            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                for k0 in range({n // threads}):
                    with T.block("{block}"):
                        vi = T.axis.spatial({m}, bx)
                        vk = T.axis.reduce({n}, k0 * {threads} + tx)
                        T.reads({reads})
                        T.writes({out}[vi])
                        with T.init():
                            {out}[vi] = {init}
                        {out}[vi] = {update}'''


def make_softmax(m: int = 16, n: int = 256, threads: int = 128) -> Kernel:
    """Row softmax: max and sum as cross-thread reductions over threadIdx.x (several warps)."""
    assert n % threads == 0
    allocs = (f'        A_max = T.alloc_buffer(({m},), "float32", scope="shared")\n'
              f'        A_sum = T.alloc_buffer(({m},), "float32", scope="shared")')  # fmt: skip
    body = "\n".join([
        _reduce_nest("A_max", threads, n, m, 'T.float32("-inf")', "T.max(A_max[vi], A[vi, vk])",
                     "A[vi, vk]", "A_max"),
        _reduce_nest("A_sum", threads, n, m, "T.float32(0.0)",
                     "A_sum[vi] + T.exp(A[vi, vk] - A_max[vi])", "A[vi, vk], A_max[vi]", "A_sum"),
        f'''            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                for k0 in range({n // threads}):
                    with T.block("B"):
                        vi = T.axis.spatial({m}, bx)
                        vj = T.axis.spatial({n}, k0 * {threads} + tx)
                        T.reads(A[vi, vj], A_max[vi], A_sum[vi])
                        T.writes(B[vi, vj])
                        B[vi, vj] = T.exp(A[vi, vj] - A_max[vi]) / A_sum[vi]''',
    ])  # fmt: skip

    def ref(a: np.ndarray) -> np.ndarray:
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return tc.script.parse(_row_reduction_text("softmax", m, n, threads, body, allocs)), ref


def make_layer_norm(m: int = 16, n: int = 256, threads: int = 32, eps: float = 1e-5) -> Kernel:
    """Row layer norm (no affine): sum and sum of squares reduced across one warp."""
    assert n % threads == 0
    inv, eps_t = f"T.float32({1.0 / n!r})", f"T.float32({eps!r})"
    allocs = (f'        S1 = T.alloc_buffer(({m},), "float32", scope="local")\n'
              f'        S2 = T.alloc_buffer(({m},), "float32", scope="local")')  # fmt: skip
    body = "\n".join([
        _reduce_nest("S1", threads, n, m, "T.float32(0.0)", "S1[vi] + A[vi, vk]", "A[vi, vk]",
                     "S1"),
        _reduce_nest("S2", threads, n, m, "T.float32(0.0)", "S2[vi] + A[vi, vk] * A[vi, vk]",
                     "A[vi, vk]", "S2"),
        f'''            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                for k0 in range({n // threads}):
                    with T.block("B"):
                        vi = T.axis.spatial({m}, bx)
                        vj = T.axis.spatial({n}, k0 * {threads} + tx)
                        T.reads(A[vi, vj], S1[vi], S2[vi])
                        T.writes(B[vi, vj])
                        B[vi, vj] = (A[vi, vj] - S1[vi] * {inv}) * T.rsqrt(
                            S2[vi] * {inv} - S1[vi] * {inv} * (S1[vi] * {inv}) + {eps_t})''',
    ])  # fmt: skip

    def ref(a: np.ndarray) -> np.ndarray:
        mean = a.mean(axis=1, keepdims=True)
        var = (a * a).mean(axis=1, keepdims=True) - mean * mean
        return (a - mean) / np.sqrt(var + eps)

    return tc.script.parse(_row_reduction_text("layer_norm", m, n, threads, body, allocs)), ref


def make_transpose(n: int = 64, scope: str = "shared") -> Kernel:
    """B = A.T through a padded 32x33 shared tile; both global accesses are coalesced.

    ``scope="shared.dyn"`` puts the tile in dynamic shared memory.
    """
    assert n % 32 == 0
    t = n // 32
    text = f"""
@T.prim_func
def transpose(A: T.Buffer(({n}, {n}), "float32"), B: T.Buffer(({n}, {n}), "float32")):
    with T.block("root"):
        tile = T.alloc_buffer(({t}, {t}, 32, 33), "float32", scope="{scope}")
        for by in T.thread_binding({t}, thread="blockIdx.y"):
            for bx in T.thread_binding({t}, thread="blockIdx.x"):
                for ty in T.thread_binding(8, thread="threadIdx.y"):
                    for tx in T.thread_binding(32, thread="threadIdx.x"):
                        for r in range(4):
                            with T.block("load"):
                                vby = T.axis.spatial({t}, by)
                                vbx = T.axis.spatial({t}, bx)
                                vi = T.axis.spatial(32, r * 8 + ty)
                                vj = T.axis.spatial(32, tx)
                                T.reads(A[vby * 32 + vi, vbx * 32 + vj])
                                T.writes(tile[vby, vbx, vi, vj])
                                tile[vby, vbx, vi, vj] = A[vby * 32 + vi, vbx * 32 + vj]
                for ty in T.thread_binding(8, thread="threadIdx.y"):
                    for tx in T.thread_binding(32, thread="threadIdx.x"):
                        for r in range(4):
                            with T.block("store"):
                                vby = T.axis.spatial({t}, by)
                                vbx = T.axis.spatial({t}, bx)
                                vi = T.axis.spatial(32, r * 8 + ty)
                                vj = T.axis.spatial(32, tx)
                                T.reads(tile[vby, vbx, vj, vi])
                                T.writes(B[vbx * 32 + vi, vby * 32 + vj])
                                B[vbx * 32 + vi, vby * 32 + vj] = tile[vby, vbx, vj, vi]
"""
    return tc.script.parse(text), lambda a: np.ascontiguousarray(a.T)


def make_vector_add(n: int = 4096, threads: int = 128) -> Kernel:
    """C = A + B with float4 loads/stores: each thread handles 4 consecutive elements."""
    assert n % (threads * 4) == 0
    text = f"""
@T.prim_func
def vector_add(A: T.Buffer(({n},), "float32"), B: T.Buffer(({n},), "float32"), C: T.Buffer(({n},), "float32")):
    with T.block("root"):
        for bx in T.thread_binding({n // (threads * 4)}, thread="blockIdx.x"):
            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                for v in T.vectorized(4):
                    with T.block("C"):
                        vi = T.axis.spatial({n}, bx * {threads * 4} + tx * 4 + v)
                        T.reads(A[vi], B[vi])
                        T.writes(C[vi])
                        C[vi] = A[vi] + B[vi]
"""  # noqa: E501
    return tc.script.parse(text), lambda a, b: a + b


def make_scale_symbolic(threads: int = 256) -> Kernel:
    """B = 2 * A + 1 on a vector of symbolic length n; the grid extent is ceil(n / threads)."""
    text = f"""
@T.prim_func
def scale(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
    n = T.int32()
    with T.block("root"):
        for bx in T.thread_binding((n + {threads - 1}) // {threads}, thread="blockIdx.x"):
            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(n, bx * {threads} + tx)
                    T.where(bx * {threads} + tx < n)
                    T.reads(A[vi])
                    T.writes(B[vi])
                    B[vi] = A[vi] * T.float32(2.0) + T.float32(1.0)
"""
    return tc.script.parse(text), lambda a: a * np.float32(2.0) + np.float32(1.0)


ALL: dict[str, Callable[[], Kernel]] = {
    "matmul": make_matmul,
    "softmax": make_softmax,
    "layer_norm": make_layer_norm,
    "transpose": make_transpose,
    "vector_add": make_vector_add,
    "scale_symbolic": make_scale_symbolic,
}

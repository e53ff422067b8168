"""Built-in CUDA tensor intrinsics: ``mma.sync`` m16n8k16 (and m16n8k32 for int8) with
``ldmatrix`` (sm_80+) and WMMA 16x16x16 (sm_70+; int8 sm_72+).

Every intrinsic works on one warp's tiles. ``mma.sync`` m16n8k16 (fp16 or bf16 in, fp32
accumulate; or fp16 in and accumulate): operand A is a 16x16 ``m16n8k16.matrixA`` tile
(m x k), B a 16x8 ``m16n8k16.matrixB`` tile (k x n), the accumulator a 16x8
``m16n8k16.accumulator`` tile. A and
B are loaded from row-major shared-memory tiles (``ldmatrix`` x4; B with ``.trans`` from a
k x n tile, without from an n x k one (an ``(out, in)`` weight), one or two n8 tiles at
once); the accumulator is filled with a constant and stored to global or shared memory. WMMA
works on 16x16 tiles of the ``wmma.*`` scopes, fp16 in and fp32 accumulate, row-major operands,
or B column-major (``wmma.matrix_b_col``: loaded from an n x k tile, an ``(out, in)`` weight).

Names (the ``{dt}`` part is ``f16`` or ``bf16``):

==============================  ==========================================================
``mma_m16n8k16_{dt}{dt}f32``    C[16x8] += A[16x16] @ B[16x8]
``mma_load_a_16x16_{dt}``       matrixA tile <- shared tile (``ldmatrix.x4``)
``mma_load_b_16x8_{dt}``        matrixB tile <- shared tile (``ldmatrix.x2.trans``)
``mma_load_b_16x16_{dt}``       two matrixB tiles <- shared k x n tile (``ldmatrix.x4.trans``)
``mma_load_b_nk_16x8_{dt}``     matrixB tile <- shared n x k tile (``ldmatrix.x2``)
``mma_load_b_nk_16x16_{dt}``    two matrixB tiles <- shared n x k tile (``ldmatrix.x4``)
``mma_fill_16x8_f32``           accumulator tile <- 0
``mma_store_16x8_f32_{scope}``  global / shared tile <- accumulator tile
``mma_m16n8k16_f16f16f16``      C[16x8] += A[16x16] @ B[16x8], an fp16 accumulator
``mma_fill_16x8_f16``           fp16 accumulator tile <- 0
``mma_store_16x8_f16_{scope}``  global / shared tile <- fp16 accumulator tile
``mma_m16n8k32_s8s8s32``        C[16x8] += A[16x32] @ B[32x8], int8 in, int32 accumulate
``mma_load_a_16x32_s8``         int8 matrixA tile <- shared tile (``ldmatrix.x4``)
``mma_load_b_nk_32x8_s8``       int8 matrixB tile <- shared n x k tile (``ldmatrix.x2``)
``mma_load_b_nk_32x16_s8``      two int8 matrixB tiles <- shared n x k tile (``ldmatrix.x4``)
``mma_fill_16x8_s32``           int32 accumulator tile <- 0
``mma_store_16x8_s32_{scope}``  global / shared tile <- int32 accumulator tile
``wmma_load_a_16x16_f16``       matrix_a tile <- shared tile
``wmma_load_b_16x16_f16``       matrix_b tile <- shared tile
``wmma_16x16x16_f16f16f32``     C[16x16] += A[16x16] @ B[16x16]
``wmma_load_b_nk_16x16_f16``    matrix_b_col tile <- shared n x k tile (``col_major``)
``wmma_16x16x16_f16f16f32_bcol``  as above, B a ``wmma.matrix_b_col`` tile
``wmma_fill_16x16_f32``         accumulator tile <- 0
``wmma_store_16x16_f32_{scope}``  global / shared tile <- accumulator tile
``wmma_16x16x16_s8s8s32[_bcol]``  C[16x16] += A[16x16] @ B[16x16], int8 in, int32 accumulate
``wmma_load_{a,b,b_nk}_16x16_s8``  int8 matrix_a / matrix_b / matrix_b_col tile <- shared tile
``wmma_fill_16x16_s32``         int32 accumulator tile <- 0
``wmma_store_16x16_s32_{scope}``  global / shared tile <- int32 accumulator tile
==============================  ==========================================================
"""

from __future__ import annotations

from ..ir import PrimFunc
from ..script import parse
from .tensor_intrin import register_tensor_intrin

MMA_DTYPES = {"f16": "float16", "bf16": "bfloat16"}


def _func(params: str, reads: str, writes: str, body: str) -> PrimFunc:
    text = (
        f"@T.prim_func\ndef intrin({params}):\n"
        f'    with T.block("root"):\n'
        f"        T.reads({reads})\n"
        f"        T.writes({writes})\n"
        + "".join(f"        {line}\n" for line in body.strip("\n").splitlines())
    )
    out = parse(text)
    assert isinstance(out, PrimFunc)
    return out


def _buf(name: str, shape: tuple[int, int], dt: str, scope: str) -> str:
    return f'{name}: T.Buffer({shape}, "{dt}", scope="{scope}")'


def _whole(name: str, shape: tuple[int, int]) -> str:
    return f"{name}[0:{shape[0]}, 0:{shape[1]}]"


def _matmul(
    prefix: str, a: tuple[int, int], b: tuple[int, int], dt: str, intrin_op: str,
    acc: str = "float32", b_col: bool = False,
) -> None:  # fmt: skip
    """Register ``C[m x n] += A[m x k] @ B[k x n]`` (``prefix`` scopes, ``acc`` accumulate:
    fp32 with casts of the operands, or the operands' own dtype without; ``b_col``: B a
    ``wmma.matrix_b_col`` fragment)."""
    m, k = a
    n = b[1]
    product = (
        "A[vi, vk] * B[vk, vj]" if acc == dt
        else f'T.Cast("{acc}", A[vi, vk]) * T.Cast("{acc}", B[vk, vj])'
    )  # fmt: skip
    scopes = {
        "mma": ("m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k16.accumulator"),
        "mma_s8": ("m16n8k32.matrixA", "m16n8k32.matrixB", "m16n8k32.accumulator"),
        "wmma": ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator"),
    }[prefix]
    if b_col:
        scopes = (scopes[0], "wmma.matrix_b_col", scopes[2])
    params = ", ".join(
        (
            _buf("A", a, dt, scopes[0]),
            _buf("B", b, dt, scopes[1]),
            _buf("C", (m, n), acc, scopes[2]),
        )
    )
    reads = ", ".join((_whole("C", (m, n)), _whole("A", a), _whole("B", b)))
    desc = _func(
        params,
        reads,
        _whole("C", (m, n)),
        f"""
for i, j, k in T.grid({m}, {n}, {k}):
    with T.block("update"):
        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
        T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
        T.writes(C[vi, vj])
        C[vi, vj] = C[vi, vj] + {product}
""",
    )
    impl = _func(
        params, reads, _whole("C", (m, n)), f"T.evaluate(T.{intrin_op}(C[0, 0], A[0, 0], B[0, 0]))"
    )
    short = {"float16": "f16", "bfloat16": "bf16", "int8": "s8"}[dt]
    out = {"float32": "f32", "float16": "f16", "int32": "s32"}[acc]
    name = {
        "mma": f"mma_m16n8k16_{short}{short}{out}",
        "mma_s8": f"mma_m16n8k32_{short}{short}{out}",
        "wmma": f"wmma_16x16x16_{short}{short}{out}{'_bcol' if b_col else ''}",
    }[prefix]
    register_tensor_intrin(name, desc, impl)


def _copy(name: str, shape: tuple[int, int], dt: str, src: str, dst: str, op: str) -> None:
    """Register ``dst[tile] = src[tile]`` implemented by ``op(dst, src)``."""
    params = f"{_buf('S', shape, dt, src)}, {_buf('D', shape, dt, dst)}"
    desc = _func(
        params,
        _whole("S", shape),
        _whole("D", shape),
        f"""
for i, j in T.grid({shape[0]}, {shape[1]}):
    with T.block("copy"):
        vi, vj = T.axis.remap("SS", [i, j])
        T.reads(S[vi, vj])
        T.writes(D[vi, vj])
        D[vi, vj] = S[vi, vj]
""",
    )
    impl = _func(
        params, _whole("S", shape), _whole("D", shape), f"T.evaluate(T.{op}(D[0, 0], S[0, 0]))"
    )
    register_tensor_intrin(name, desc, impl)


def _load_b(
    name: str, tiles: int, dt: str, nk: bool, k: int = 16, scope: str = "m16n8k16.matrixB"
) -> None:
    """Register ``tiles`` matrixB tiles ``D[k x 8 tiles] (k x n)`` loaded from a shared tile
    stored k x n, or n x k (``nk``: ``D[k, n] = S[n, k]``, iterated over the source's
    ``(n, k)``, as a cache of an ``(n, k)`` operand iterates)."""
    shape = (k, 8 * tiles)
    src = (shape[1], shape[0]) if nk else shape
    params = f"{_buf('S', src, dt, 'shared')}, {_buf('D', shape, dt, scope)}"
    dst = "D[vj, vi]" if nk else "D[vi, vj]"
    desc = _func(
        params,
        _whole("S", src),
        _whole("D", shape),
        f"""
for i, j in T.grid({src[0]}, {src[1]}):
    with T.block("copy"):
        vi, vj = T.axis.remap("SS", [i, j])
        T.reads(S[vi, vj])
        T.writes({dst})
        {dst} = S[vi, vj]
""",
    )
    call = f"T.mma_load_matrix_b(D[0, 0], S[0, 0], {int(nk)}, {tiles})"
    impl = _func(params, _whole("S", src), _whole("D", shape), f"T.evaluate({call})")
    register_tensor_intrin(name, desc, impl)


def _load_b_col(name: str, dt: str = "float16") -> None:
    """Register a ``wmma.matrix_b_col`` tile ``D[k, n] = S[n, k]`` of ``dt`` (iterated over the
    source's ``(n, k)``, as a cache of an ``(n, k)`` operand iterates) from a shared tile
    stored ``n x k``: ``load_matrix_sync`` into a ``col_major`` fragment, no transpose."""
    params = f"{_buf('S', (16, 16), dt, 'shared')}, "
    params += _buf("D", (16, 16), dt, "wmma.matrix_b_col")
    desc = _func(
        params,
        _whole("S", (16, 16)),
        _whole("D", (16, 16)),
        """
for i, j in T.grid(16, 16):
    with T.block("copy"):
        vi, vj = T.axis.remap("SS", [i, j])
        T.reads(S[vi, vj])
        T.writes(D[vj, vi])
        D[vj, vi] = S[vi, vj]
""",
    )
    impl = _func(params, _whole("S", (16, 16)), _whole("D", (16, 16)),
                 "T.evaluate(T.wmma_load_matrix(D[0, 0], S[0, 0]))")  # fmt: skip
    register_tensor_intrin(name, desc, impl)


def _fill(name: str, shape: tuple[int, int], scope: str, op: str, dt: str = "float32") -> None:
    """Register ``C[tile] = 0`` (of ``dt``) implemented by ``op(C, 0)``."""
    zero = "0" if dt.startswith("int") else "0.0"
    params = _buf("C", shape, dt, scope)
    desc = _func(
        params,
        "",
        _whole("C", shape),
        f"""
for i, j in T.grid({shape[0]}, {shape[1]}):
    with T.block("fill"):
        vi, vj = T.axis.remap("SS", [i, j])
        T.reads()
        T.writes(C[vi, vj])
        C[vi, vj] = T.{dt}({zero})
""",
    )
    impl = _func(params, "", _whole("C", shape), f"T.evaluate(T.{op}(C[0, 0], T.float32(0.0)))")
    register_tensor_intrin(name, desc, impl)


def _register_int8() -> None:
    """The int8 ``mma.sync`` m16n8k32 intrinsics (int32 accumulator)."""
    acc = "m16n8k32.accumulator"
    _matmul("mma_s8", (16, 32), (32, 8), "int8", "mma_sync_m16n8k32", acc="int32")
    _copy("mma_load_a_16x32_s8", (16, 32), "int8", "shared", "m16n8k32.matrixA",
          "mma_load_matrix")  # fmt: skip
    for tiles in (1, 2):
        _load_b(f"mma_load_b_nk_32x{8 * tiles}_s8", tiles, "int8", True, 32, "m16n8k32.matrixB")
    _fill("mma_fill_16x8_s32", (16, 8), acc, "mma_fill", "int32")
    for scope in ("global", "shared"):
        _copy(f"mma_store_16x8_s32_{scope}", (16, 8), "int32", acc, scope, "mma_store")


def _register_int8_wmma() -> None:
    """The int8 WMMA 16x16x16 intrinsics (int32 accumulator; sm_72+)."""
    for b_col in (False, True):
        _matmul("wmma", (16, 16), (16, 16), "int8", "wmma_sync", acc="int32", b_col=b_col)
    for use in ("a", "b"):
        _copy(f"wmma_load_{use}_16x16_s8", (16, 16), "int8", "shared", f"wmma.matrix_{use}",
              "wmma_load_matrix")  # fmt: skip
    _load_b_col("wmma_load_b_nk_16x16_s8", "int8")
    _fill("wmma_fill_16x16_s32", (16, 16), "wmma.accumulator", "wmma_fill", "int32")
    for scope in ("global", "shared"):
        _copy(f"wmma_store_16x16_s32_{scope}", (16, 16), "int32", "wmma.accumulator", scope,
              "wmma_store")  # fmt: skip


def register_cuda_intrinsics() -> None:
    """Register every built-in CUDA tensor intrinsic (see the module docstring)."""
    for short, dt in MMA_DTYPES.items():
        _matmul("mma", (16, 16), (16, 8), dt, "mma_sync_m16n8k16")
        _copy(
            f"mma_load_a_16x16_{short}",
            (16, 16),
            dt,
            "shared",
            "m16n8k16.matrixA",
            "mma_load_matrix",
        )
        _copy(
            f"mma_load_b_16x8_{short}", (16, 8), dt, "shared", "m16n8k16.matrixB", "mma_load_matrix"
        )
        _load_b(f"mma_load_b_16x16_{short}", 2, dt, nk=False)
        _load_b(f"mma_load_b_nk_16x8_{short}", 1, dt, nk=True)
        _load_b(f"mma_load_b_nk_16x16_{short}", 2, dt, nk=True)
    _fill("mma_fill_16x8_f32", (16, 8), "m16n8k16.accumulator", "mma_fill")
    _matmul("mma", (16, 16), (16, 8), "float16", "mma_sync_m16n8k16", acc="float16")
    _fill("mma_fill_16x8_f16", (16, 8), "m16n8k16.accumulator", "mma_fill", "float16")
    _register_int8()
    _matmul("wmma", (16, 16), (16, 16), "float16", "wmma_sync")
    _copy(
        "wmma_load_a_16x16_f16", (16, 16), "float16", "shared", "wmma.matrix_a", "wmma_load_matrix"
    )
    _copy(
        "wmma_load_b_16x16_f16", (16, 16), "float16", "shared", "wmma.matrix_b", "wmma_load_matrix"
    )
    _matmul("wmma", (16, 16), (16, 16), "float16", "wmma_sync", b_col=True)
    _load_b_col("wmma_load_b_nk_16x16_f16")
    _fill("wmma_fill_16x16_f32", (16, 16), "wmma.accumulator", "wmma_fill")
    _register_int8_wmma()
    for scope in ("global", "shared"):
        _copy(
            f"mma_store_16x8_f32_{scope}",
            (16, 8),
            "float32",
            "m16n8k16.accumulator",
            scope,
            "mma_store",
        )
        _copy(
            f"mma_store_16x8_f16_{scope}",
            (16, 8),
            "float16",
            "m16n8k16.accumulator",
            scope,
            "mma_store",
        )
        _copy(
            f"wmma_store_16x16_f32_{scope}",
            (16, 16),
            "float32",
            "wmma.accumulator",
            scope,
            "wmma_store",
        )


register_cuda_intrinsics()

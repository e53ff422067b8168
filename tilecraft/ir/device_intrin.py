"""Device intrinsics: the GPU operations tensor-core code is made of, and their helpers.

A device intrinsic is a :class:`~tilecraft.ir.Call` evaluated for its effect
(``T.evaluate(T.mma_sync_m16n8k16(C[0, 0], A[0, 0], B[0, 0]))``); its arguments are element
addresses (a buffer load naming the first element the operation touches), integers and floats
(see :class:`~tilecraft.ir.expr.DeviceIntrinsic`). There are two families:

*Warp tile operations* appear in scheduled functions, in the implementation of a tensor
intrinsic (:mod:`tilecraft.schedule.tensor_intrin`). One call is executed by a whole warp and
works on *logical tiles*: the address names the first element of a tile whose shape the
operation and the fragment scope fix (``m16n8k16.matrixA``: 16x16, ``m16n8k16.matrixB``:
16x8 (k x n), ``m16n8k16.accumulator``: 16x8, ``wmma.*``: 16x16). Their meaning is the loop
nest a description PrimFunc states; :class:`tilecraft.lower.LowerWarpFragments` rewrites them
into the second family.

*Hardware operations* appear only in lowered GPU code and are emitted by CUDA codegen. Each
lane of a warp passes its own operands (the elements of its fragment registers, the address of
the row it contributes); the C reference semantics over a warp's 32 lanes live in
:mod:`tilecraft.codegen.emulate.tensor_core_semantics`.
"""

from __future__ import annotations

from .dtype import int32
from .expr import DEVICE_INTRINSICS, Call, DeviceIntrinsic, ExprLike, as_expr

_TILE_OPS = {
    "mma_sync_m16n8k16": (
        "aaa",
        "C[16x8] += A[16x16] @ B[16x8] on m16n8k16 fragment tiles (accumulator, matrixA, "
        "matrixB), products and sums in the accumulator's dtype",
    ),
    "mma_sync_m16n8k32": (
        "aaa",
        "C[16x8] += A[16x32] @ B[32x8] on m16n8k32 fragment tiles (int32 accumulator, int8 "
        "matrixA, int8 matrixB), products and sums in int32",
    ),
    "mma_load_matrix": (
        "aa",
        "dst = src: a m16n8k16 matrixA (16x16) or matrixB (16x8) tile loaded from a "
        "row-major shared-memory tile of the same shape (ldmatrix)",
    ),
    "mma_load_matrix_b": (
        "aaii",
        "dst = src: ``tiles`` (1 or 2) m16n8k16 matrixB tiles side by side (16 x 8 tiles) "
        "loaded from a row-major shared-memory tile, k x n (``nk`` = 0: ldmatrix .trans) or "
        "n x k (``nk`` = 1: dst[k, n] = src[n, k], ldmatrix without .trans); two tiles take "
        "one ldmatrix.x4",
    ),
    "mma_fill": ("af", "C[16x8] = value on a m16n8k16 accumulator tile"),
    "mma_store": ("aa", "dst[16x8] = C[16x8]: an accumulator tile stored to memory"),
    "wmma_load_matrix": (
        "aa",
        "dst = src: a wmma matrix_a / matrix_b 16x16 tile loaded from a row-major tile; "
        "dst[k, n] = src[n, k] for a wmma.matrix_b_col dst (loaded column-major)",
    ),
    "wmma_sync": ("aaa", "C[16x16] += A[16x16] @ B[16x16] on wmma fragment tiles"),
    "wmma_fill": ("af", "C[16x16] = value on a wmma accumulator tile"),
    "wmma_store": ("aa", "dst[16x16] = C[16x16]: a wmma accumulator tile stored to memory"),
}
_HW_OPS = {
    "ptx_ldmatrix_x1": (
        "iaa" + "a" * 2,
        "ldmatrix.sync.aligned.m8n8.x1[.trans].shared.b16: (trans, first, last element of "
        "the 8 this lane's address names, the lane's 2 destination elements)",
    ),
    "ptx_ldmatrix_x2": ("iaa" + "a" * 4, "ldmatrix ... .x2: as x1 with 4 destination elements"),
    "ptx_ldmatrix_x4": ("iaa" + "a" * 8, "ldmatrix ... .x4: as x1 with 8 destination elements"),
    "ptx_mma_m16n8k16": (
        "a" * 16,
        "mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: this lane's c0..c3 (read and "
        "written), a0..a7, b0..b3",
    ),
    "ptx_ldmatrix_b8_x2": (
        "aa" + "a" * 8,
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16 on int8 rows (8 rows of 16 int8 per "
        "matrix): (first, last element of the 16 this lane's address names, the lane's 8 "
        "destination elements, 4 per register)",
    ),
    "ptx_ldmatrix_b8_x4": ("aa" + "a" * 16, "as ptx_ldmatrix_b8_x2 with 16 destination elements"),
    "ptx_mma_m16n8k32": (
        "a" * 28,
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32: this lane's c0..c3 (int32, read and "
        "written), a0..a15, b0..b7 (int8)",
    ),
    "ptx_cp_async_commit": ("", "cp.async.commit_group"),
    "ptx_cp_async_wait": ("i", "cp.async.wait_group n: all but the n newest groups complete"),
    "wmma_load_sync": (
        "aaaa",
        "nvcuda::wmma::load_matrix_sync(frag, first, ldm): (fragment, first and last element "
        "of the memory tile, first element of its second row: ldm = next_row - first)",
    ),
    "wmma_mma_sync": ("aaaa", "nvcuda::wmma::mma_sync(d, a, b, c)"),
    "wmma_fill_fragment": ("af", "nvcuda::wmma::fill_fragment(frag, value)"),
    "wmma_store_sync": (
        "aaaa",
        "nvcuda::wmma::store_matrix_sync(first, frag, ldm, row major): (first, last, next-row "
        "element of the memory tile, fragment)",
    ),
}

TILE_OPS = frozenset(_TILE_OPS)
"""Names of the warp tile operations (scheduled code)."""
HARDWARE_OPS = frozenset(_HW_OPS)
"""Names of the hardware operations (lowered GPU code)."""


def register_device_intrinsic(name: str, signature: str, doc: str = "") -> DeviceIntrinsic:
    """Register device intrinsic ``name`` (see :class:`DeviceIntrinsic` for ``signature``)."""
    intr = DeviceIntrinsic(name, signature, doc)
    DEVICE_INTRINSICS[name] = intr
    return intr


for _name, (_sig, _doc) in {**_TILE_OPS, **_HW_OPS}.items():
    register_device_intrinsic(_name, _sig, _doc)


def call_device(op: str, *args: ExprLike) -> Call:
    """A call of device intrinsic ``op``; Python ints and floats become int32 / float32."""
    return Call(int32, op, tuple(as_expr(a) for a in args))

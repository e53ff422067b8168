"""A lockstep SIMT interpreter of lowered GPU programs (a test helper for tensor-core kernels).

It runs the kernels of :func:`tilecraft.lower.gpu_pipeline.lower_gpu` — the same IR CUDA
codegen emits — block by block; inside a block every statement is executed by all threads at
once, as numpy arrays over the threads (per-thread ``local`` storage, one copy of ``shared``
storage per block). Warp-collective intrinsics (``ldmatrix``, ``mma.sync``, WMMA) call the C
reference semantics of :mod:`tilecraft.codegen.emulate.tensor_core_semantics` with the operands of a
warp's 32 lanes. Barriers are no-ops (lockstep order satisfies every barrier), ``cp.async``
copies complete immediately (one legal timing) and their waits are no-ops.

What it proves: the numerical result of the lowered program under those semantics. What it
does not: race freedom and the placement of barriers and waits (lockstep order hides races),
the CUDA text, or that the C reference matches the hardware.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tensor_core_reference import _ptr, library

from tilecraft.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    Allocate,
    And,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Div,
    Evaluate,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    LetStmt,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    SeqStmt,
    Stmt,
    Sub,
    Var,
)
from tilecraft.lower.gpu_nodes import ThreadSync
from tilecraft.lower.gpu_split_host_device import GPUProgram, Kernel

_NP = {"float16": np.float16, "float32": np.float32, "float64": np.float64,
       "int32": np.int64, "int64": np.int64, "bool": np.bool_, "bfloat16": np.float32}  # fmt: skip
_BIN = {Add: np.add, Sub: np.subtract, Mul: np.multiply, Min: np.minimum, Max: np.maximum,
        LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal, EQ: np.equal,
        NE: np.not_equal, And: np.logical_and, Or: np.logical_or}  # fmt: skip


class LockstepError(Exception):
    """The program does something the interpreter does not model."""


def _bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded (to nearest even) to bfloat16 precision, kept as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


@dataclass
class _Block:
    """State of one thread block."""

    tid: dict[str, np.ndarray]
    n: int
    env: dict[int, Any] = field(default_factory=dict)
    storage: dict[int, np.ndarray] = field(default_factory=dict)


class Interpreter:
    """Run the kernels of a lowered program on numpy arrays (see the module docstring)."""

    def __init__(self, program: GPUProgram, args: Mapping[str, np.ndarray]) -> None:
        self.program = program
        self.globals: dict[int, np.ndarray] = {}
        for p in program.func.params:
            if isinstance(p, Buffer):
                self.globals[id(p)] = args[p.name].reshape(-1)
        self.b: _Block

    # driving ------------------------------------------------------------------------------
    def run(self) -> None:
        for k in self.program.kernels:
            self.kernel(k)

    def kernel(self, k: Kernel) -> None:
        for p in k.params:
            if isinstance(p, Buffer) and id(p) not in self.globals:
                match = [
                    b
                    for b in self.program.func.params
                    if isinstance(b, Buffer) and b.name == p.name
                ]
                self.globals[id(p)] = self.globals[id(match[0])]
        dims = [int(e.value) for e in k.block]  # type: ignore[attr-defined]
        grid = [int(e.value) for e in k.grid]  # type: ignore[attr-defined]
        n = dims[0] * dims[1] * dims[2]
        lin = np.arange(n)
        tid = {"threadIdx.x": lin % dims[0], "threadIdx.y": lin // dims[0] % dims[1],
               "threadIdx.z": lin // (dims[0] * dims[1])}  # fmt: skip
        if dims[0] % 32 and n > 32:
            raise LockstepError("warps need blockDim.x to be a multiple of 32 here")
        self.lane, self.warp = lin % 32, lin // 32
        for bz in range(grid[2]):
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    bid = {"blockIdx.x": bx, "blockIdx.y": by, "blockIdx.z": bz}
                    self.b = _Block({**tid, **bid}, n)
                    self.stmt(k.body, np.ones(n, bool))

    # statements ---------------------------------------------------------------------------
    def stmt(self, s: Stmt, mask: np.ndarray) -> None:
        if not mask.any():
            return
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.stmt(c, mask)
        elif isinstance(s, For):
            self.loop(s, mask)
        elif isinstance(s, BufferStore):
            self.store(s.buffer, self.expr(s.indices[0]), self.expr(s.value), mask)
        elif isinstance(s, Allocate):
            self.allocate(s.buffer)
            self.stmt(s.body, mask)
        elif isinstance(s, IfThenElse):
            cond = np.broadcast_to(self.expr(s.condition), mask.shape).astype(bool)
            self.stmt(s.then_case, mask & cond)
            if s.else_case is not None:
                self.stmt(s.else_case, mask & ~cond)
        elif isinstance(s, LetStmt):
            self.b.env[id(s.var)] = self.expr(s.value)
            self.stmt(s.body, mask)
        elif isinstance(s, Evaluate) and isinstance(s.value, Call):
            self.device_call(s.value, mask)
        elif not isinstance(s, ThreadSync):
            raise LockstepError(f"cannot run {type(s).__name__}")

    def loop(self, s: For, mask: np.ndarray) -> None:
        lo = self.expr(s.min)
        if s.kind is ForKind.THREAD_BINDING:
            hw = self.b.tid[s.thread or ""]
            self.b.env[id(s.loop_var)] = lo + hw
            ext = self.uniform(self.expr(s.extent), mask)
            self.stmt(s.body, mask & (np.broadcast_to(hw, mask.shape) < ext))
            return
        lo, ext = self.uniform(lo, mask), self.uniform(self.expr(s.extent), mask)
        for i in range(lo, lo + ext):
            self.b.env[id(s.loop_var)] = i
            self.stmt(s.body, mask)

    def uniform(self, v: Any, mask: np.ndarray) -> int:
        arr = np.broadcast_to(np.asarray(v), mask.shape)[mask]
        if (arr != arr[0]).any():
            raise LockstepError("a loop bound differs between threads")
        return int(arr[0])

    def allocate(self, buf: Buffer) -> None:
        size = int(buf.shape[0].value)  # type: ignore[attr-defined]
        dt = _NP[str(buf.dtype)]
        fill = np.nan if np.issubdtype(dt, np.floating) else 0
        if buf.scope == "local":
            self.b.storage[id(buf)] = np.full((self.b.n, size), fill, dt)
        elif buf.scope.startswith("wmma."):
            self.b.storage[id(buf)] = np.full((self.b.n // 32, size, 16, 16), np.nan, np.float32)
        else:
            self.b.storage[id(buf)] = np.full(size, fill, dt)

    def array(self, buf: Buffer) -> np.ndarray:
        got = self.b.storage.get(id(buf))
        return got if got is not None else self.globals[id(buf)]

    def store(self, buf: Buffer, idx: Any, value: Any, mask: np.ndarray) -> None:
        arr = self.array(buf)
        idx = np.broadcast_to(idx, mask.shape)[mask]
        val = np.broadcast_to(np.asarray(value), mask.shape)[mask]
        if str(buf.dtype) == "bfloat16":
            val = _bf16_round(val)
        if buf.scope == "local":
            arr[np.nonzero(mask)[0], idx] = val
        else:
            arr[idx] = val

    # expressions --------------------------------------------------------------------------
    def expr(self, e: Expr) -> Any:
        if isinstance(e, IntImm):
            return e.value
        if isinstance(e, FloatImm):
            return _NP[str(e.dtype)](e.value)
        if isinstance(e, Var):
            return self.b.env[id(e)]
        if isinstance(e, BufferLoad):
            return self.load(e)
        if isinstance(e, Cast):
            v = np.asarray(self.expr(e.value)).astype(_NP[str(e.dtype)])
            return _bf16_round(v) if str(e.dtype) == "bfloat16" else v
        if isinstance(e, FloorDiv | FloorMod | Div):
            a, b = self.expr(e.a), self.expr(e.b)
            if e.dtype.is_float:
                return np.divide(a, b)
            return (
                np.floor_divide(a, b)
                if isinstance(e, FloorDiv)
                else np.mod(a, b)
                if isinstance(e, FloorMod)
                else np.trunc(np.divide(a, b)).astype(np.int64)
            )
        fn = _BIN.get(type(e))
        if fn is not None:
            return fn(self.expr(e.a), self.expr(e.b))  # type: ignore[attr-defined]
        if isinstance(e, Not):
            return np.logical_not(self.expr(e.a))
        if isinstance(e, Select):
            return np.where(
                self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
            )
        raise LockstepError(f"cannot evaluate {type(e).__name__}")

    def load(self, e: BufferLoad) -> Any:
        arr = self.array(e.buffer)
        idx = np.asarray(self.expr(e.indices[0]))
        if e.buffer.scope == "local":
            idx = np.broadcast_to(idx, (self.b.n,))
            out = arr[np.arange(self.b.n), np.clip(idx, 0, arr.shape[1] - 1)]
        else:
            out = arr[np.clip(idx, 0, arr.shape[0] - 1)]
        if str(e.buffer.dtype) == "float16":
            out = out.astype(np.float32)
        return out

    # warp intrinsics ----------------------------------------------------------------------
    def warps(self, mask: np.ndarray) -> list[np.ndarray]:
        out = []
        for w in np.unique(self.warp[mask]):
            lanes = np.nonzero(self.warp == w)[0]
            if not mask[lanes].all():
                raise LockstepError(f"warp {w} is partly inactive at a warp-collective op")
            out.append(lanes)
        return out

    def element_index(self, a: Expr) -> np.ndarray:
        assert isinstance(a, BufferLoad)
        return np.broadcast_to(np.asarray(self.expr(a.indices[0])), (self.b.n,))

    def gather(self, args: tuple[Expr, ...]) -> np.ndarray:
        """``[threads, len(args)]`` values of local element operands."""
        cols = []
        for a in args:
            assert isinstance(a, BufferLoad)
            cols.append(self.array(a.buffer)[np.arange(self.b.n), self.element_index(a)])
        return np.stack(cols, axis=1)

    def scatter(self, args: tuple[Expr, ...], values: np.ndarray, threads: np.ndarray) -> None:
        for k, a in enumerate(args):
            assert isinstance(a, BufferLoad)
            self.array(a.buffer)[threads, self.element_index(a)[threads]] = values[:, k]

    def device_call(self, call: Call, mask: np.ndarray) -> None:
        op, args = call.op, call.args
        if op in ("ptx_cp_async_commit", "ptx_cp_async_wait"):
            return
        if op.startswith("ptx_ldmatrix_x"):
            num = int(op[-1])
            trans = int(args[0].value)  # type: ignore[attr-defined]
            base = self.array(args[1].buffer)  # type: ignore[attr-defined]
            bf16 = base.dtype == np.float32  # bfloat16 values are kept as float32
            bits = (base.view(np.uint32) >> 16).astype(np.uint16) if bf16 else base.view(np.uint16)
            offs = self.element_index(args[1])
            for lanes in self.warps(mask):
                dst = np.zeros((32, 8), np.uint16)
                library().tc_emu_ldmatrix(
                    num,
                    trans,
                    _ptr(np.ascontiguousarray(bits)),
                    _ptr(np.ascontiguousarray(offs[lanes], np.int64)),
                    _ptr(dst),
                )
                got = dst[:, : 2 * num]
                vals = (
                    (got.astype(np.uint32) << 16).view(np.float32) if bf16 else got.view(np.float16)
                )
                self.scatter(args[3:], vals, lanes)
            return
        if op == "ptx_mma_m16n8k16":
            vals = self.gather(args)
            bf16 = str(args[4].dtype) == "bfloat16"
            for lanes in self.warps(mask):
                v = vals[lanes]
                if bf16:
                    a = (v[:, 4:12].astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
                    b = (v[:, 12:16].astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
                else:
                    a = v[:, 4:12].astype(np.float16).view(np.uint16)
                    b = v[:, 12:16].astype(np.float16).view(np.uint16)
                c = np.ascontiguousarray(v[:, 0:4], np.float32)
                library().tc_emu_mma_m16n8k16(
                    int(bf16), _ptr(np.ascontiguousarray(a)), _ptr(np.ascontiguousarray(b)), _ptr(c)
                )
                self.scatter(args[0:4], c, lanes)
            return
        self.wmma(call, mask)

    def wmma(self, call: Call, mask: np.ndarray) -> None:
        for lanes in self.warps(mask):
            self.wmma_warp(call, int(self.warp[lanes[0]]), int(lanes[0]))

    def tile(self, a: Expr, warp: int, first: int) -> np.ndarray:
        """The 16x16 tile of wmma fragment element ``a`` of ``warp``."""
        assert isinstance(a, BufferLoad)
        return self.array(a.buffer)[warp, int(self.element_index(a)[first])]

    def address(self, a: Expr, first: int) -> tuple[np.ndarray, int]:
        assert isinstance(a, BufferLoad)
        return self.array(a.buffer), int(self.element_index(a)[first])

    def wmma_warp(self, call: Call, w: int, first: int) -> None:
        op, args, lib = call.op, call.args, library()
        if op == "wmma_fill_fragment":
            value = ctypes.c_float(float(self.expr(args[1])))
            lib.tc_emu_wmma_fill(_ptr(self.tile(args[0], w, first)), value)
        elif op == "wmma_mma_sync":
            d, a, b, c = (_ptr(self.tile(x, w, first)) for x in args)
            lib.tc_emu_wmma_mma(d, a, b, c)
        elif op == "wmma_load_sync":
            arr, off = self.address(args[1], first)
            ldm = ctypes.c_int64(self.address(args[3], first)[1] - off)
            src = ctypes.c_void_p(arr.view(np.uint16)[off:].ctypes.data)
            lib.tc_emu_wmma_load_f16(_ptr(self.tile(args[0], w, first)), src, ldm)
        elif op == "wmma_store_sync":
            arr, off = self.address(args[0], first)
            ldm = ctypes.c_int64(self.address(args[2], first)[1] - off)
            dst = ctypes.c_void_p(arr[off:].ctypes.data)
            lib.tc_emu_wmma_store_f32(dst, ldm, _ptr(self.tile(args[3], w, first)))
        else:
            raise LockstepError(f"no lockstep semantics for {op}")


def run_lockstep(program: GPUProgram, args: Mapping[str, np.ndarray]) -> None:
    """Run ``program`` on ``args`` (name -> array; outputs are written in place)."""
    Interpreter(program, args).run()

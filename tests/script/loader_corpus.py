"""Valid documents for the loader fuzz campaigns (see loader_fuzz.py), from several workloads.

PrimFuncs: the reference kernels, te/topi stages (matmul, softmax with a symbolic row count, an
RMS-style normalization, conv2d, int8 arithmetic), a scheduled matmul, a hand-written function
using lets, allocations, selects, casts and attributes, and a module; graph functions and
modules before and after the "zero" pipeline; and their JSON documents.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import tilecraft as tc

ODD_NAMES = ["𝑥", "ñ", "ﬁ", "x\u0301", "Ω", "ª", "_", "__", "lambda_", "T_1", "float",
              "print", "int32", "exp", "max", "Buffer", "cls", "Module", "R_", "v0", "i_1",
              "match", "type", "K", "ⅰ", "丁"]  # fmt: skip


# corpus -------------------------------------------------------------------------------------
def _te_funcs() -> list[Any]:
    te, topi = tc.te, tc.topi
    out = []
    a = te.placeholder((8, 16), "float32", name="A")
    b = te.placeholder((16, 4), "float32", name="B")
    out.append(te.create_prim_func([a, b, topi.matmul(a, b)]))
    n = te.size_var("n") if hasattr(te, "size_var") else tc.ir.Var("n")
    x = te.placeholder((n, 32), "float32", name="x")
    out.append(te.create_prim_func([x, topi.softmax(x)]))
    k = te.reduce_axis((0, 32), name="k")
    s = te.compute((n,), lambda i: te.sum(x[i, k] * x[i, k], axis=k), name="S")
    y = te.compute((n, 32), lambda i, j: x[i, j] / tc.ir.op.sqrt(s[i] + 1e-5), name="Y")
    out.append(te.create_prim_func([x, y]))
    img = te.placeholder((1, 4, 10, 10), "float32", name="img")
    w = te.placeholder((8, 4, 3, 3), "float32", name="w")
    out.append(te.create_prim_func([img, w, topi.conv2d(img, w, stride=1, padding=1)]))
    i8 = te.placeholder((64,), "int8", name="q")
    c = te.compute((64,), lambda i: tc.ir.Cast("int32", i8[i]) * 3 - 7, name="C")
    out.append(te.create_prim_func([i8, c]))
    return out


def _scheduled(func: Any) -> Any:
    sch = tc.Schedule(func, seed=0)
    blk = sch.get_block("matmul") if "matmul" in func.script() else None
    if blk is None:
        return None
    i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, factors=[None, 4])
    sch.reorder(io, j, ii)
    sch.parallel(io)
    sch.decompose_reduction(blk, k) if hasattr(sch, "decompose_reduction") else None
    return sch.func


def _prim_funcs() -> list[Any]:
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from reference_kernels import ALL

    funcs = [tc.script.parse(t) for t in ALL.values()]
    funcs += _te_funcs()
    scheduled = _scheduled(funcs[3])
    if scheduled is not None:
        funcs.append(scheduled)
    funcs.append(tc.script.parse(_HAND_WRITTEN))
    return funcs


_HAND_WRITTEN = """
@T.prim_func
def misc(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "int64"), n: T.int32):
    T.func_attr({"note": "x", "inf": float("inf"), "list": [1, 2.5, None, True]})
    for i in T.serial(16, annotations={"pragma_unroll": 4}):
        x: T.int32 = i * 2 + n
        with T.allocate((4,), "float32", scope="local") as L:
            L[i % 4] = T.Select(i < 8, A[i], T.float32("nan"))
            if x >= 3 and not i == 5:
                A[i] = T.exp(L[i % 4]) + T.Cast("float32", B[i])
            else:
                B[i] = T.int64(-9223372036854775808) + T.Cast("int64", x // 3 % 5)
    with T.seq():
        T.evaluate(T.max(n, 0))
"""


def _graph_module() -> tuple[Any, Any]:
    from tilecraft.graph import GraphBuilder, get_pipeline

    bb = GraphBuilder()
    x = bb.param("x", ("n", 16), "float32")
    w = bb.param("w", (8, 16), "float32")
    h = bb.emit("matmul", [x, bb.emit("permute_dims", [w])])
    h = bb.emit("reshape", [h], {"shape": ("n", 2, 4)})
    out = bb.emit("softmax", [bb.emit("relu", [h])], {"axis": -1})
    mod = tc.IRModule({"main": bb.finish(out, "main", {"num_input": 1})})
    with tc.Target("cpu"):
        return mod, get_pipeline("zero")(mod)


@functools.cache
def corpus(loader: str) -> list[str]:
    """Valid documents for ``loader``, from several workloads (built once per process)."""
    from tilecraft.graph import script as gscript

    if loader == "script":
        return [f.script() for f in _prim_funcs()] + [
            tc.IRModule({f"f{k}": f for k, f in enumerate(_prim_funcs()[:2])}).script()
        ]
    mod, fused = _graph_module()
    if loader == "graph":
        return [gscript.to_script(mod["main"]), gscript.to_script(mod), gscript.to_script(fused)]
    docs = [tc.ir.to_json(f) for f in _prim_funcs()]
    docs += [tc.ir.to_json(fused), tc.ir.to_json(mod), tc.ir.to_json(tc.ir.Var("n") * 4 + 1)]
    return docs

"""AnnotateOpPattern: classify every PrimFunc by analysing its blocks.

After: each PrimFunc has ``attrs["op_pattern"]``, an :class:`OpPattern` value that FuseOps
reads. Classification (per block, then combined):

* elementwise: every load uses exactly the store's indices on a same-shaped buffer;
* broadcast: every load index is a store index or the constant 0, in the store's order;
* injective: any other block without reduction iterators;
* output-fusable: exactly one reduction block, a multiply-accumulate of two loads
  (matmul, conv2d), every other block injective;
* reduction: any other function with reduction blocks (softmax, layer_norm);
* opaque: no blocks, or blocks whose body is not a single store.
"""

from __future__ import annotations

import enum

from ...ir import (
    Add,
    Block,
    BufferLoad,
    BufferStore,
    Cast,
    Expr,
    IntImm,
    IRModule,
    IterKind,
    Mul,
    PrimFunc,
    Var,
    post_order_visit,
)
from ...ir.transform import ModulePass


class OpPattern(enum.IntEnum):
    """How a kernel's outputs depend on its inputs (smaller fuses more freely)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_EWISE_FUSABLE = 4
    OPAQUE = 8


def _loads(e: Expr) -> list[BufferLoad]:
    out: list[BufferLoad] = []
    post_order_visit(e, lambda n: out.append(n) if isinstance(n, BufferLoad) else None)
    return out


def _is_mac(block: Block) -> bool:
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return False
    a, b = store.value.a, store.value.b
    if isinstance(b, BufferLoad) and b.buffer is store.buffer:
        a, b = b, a
    if not (isinstance(a, BufferLoad) and a.buffer is store.buffer):
        return False
    while isinstance(b, Cast):
        b = b.value
    if not isinstance(b, Mul):
        return False
    loads = _loads(b)
    # two different operands (A[i, k] * B[k, j]); x * x is a plain reduction such as rms_norm
    return len(loads) == 2 and loads[0].buffer is not loads[1].buffer


def _spatial_pattern(store: BufferStore) -> OpPattern:
    idx = store.indices
    if not all(isinstance(i, Var) for i in idx):
        return OpPattern.INJECTIVE
    pattern = OpPattern.ELEMWISE
    for load in _loads(store.value):
        same = len(load.indices) == len(idx) and all(
            a is b for a, b in zip(load.indices, idx, strict=False)
        )
        if same and len(load.buffer.shape) == len(store.buffer.shape):
            continue
        pos = -1
        for i in load.indices:
            if isinstance(i, IntImm) and i.value == 0:
                continue
            found = next((k for k, v in enumerate(idx) if v is i), None)
            if found is None or found <= pos:
                return OpPattern.INJECTIVE
            pos = found
        pattern = OpPattern.BROADCAST
    return pattern


def analyze_op_pattern(func: PrimFunc) -> OpPattern:
    """Classify ``func`` (see the module docstring)."""
    blocks: list[Block] = []
    post_order_visit(func.body, lambda n: blocks.append(n) if isinstance(n, Block) else None)
    blocks = [b for b in blocks if b.iter_vars or b.name != "root"]
    if not blocks:
        return OpPattern.OPAQUE
    reductions = []
    spatial = OpPattern.ELEMWISE
    for b in blocks:
        if not isinstance(b.body, BufferStore):
            return OpPattern.OPAQUE
        if any(iv.kind is IterKind.REDUCE for iv in b.iter_vars):
            reductions.append(b)
        else:
            spatial = max(spatial, _spatial_pattern(b.body))
    if not reductions:
        return spatial
    if len(reductions) == 1 and _is_mac(reductions[0]):
        return OpPattern.OUT_EWISE_FUSABLE
    return OpPattern.COMM_REDUCE


def op_pattern_of(func: PrimFunc) -> OpPattern:
    """The annotated pattern of ``func``, analysing it when unannotated."""
    value = func.attrs.get("op_pattern")
    return OpPattern(value) if isinstance(value, int) else analyze_op_pattern(func)


class AnnotateOpPattern(ModulePass):
    """Set ``attrs["op_pattern"]`` on every PrimFunc that lacks it."""

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        funcs = {}
        for name, f in mod.items():
            if isinstance(f, PrimFunc) and "op_pattern" not in f.attrs:
                f = f.with_attr("op_pattern", int(analyze_op_pattern(f)))
            funcs[name] = f
        return IRModule(funcs, mod.attrs)

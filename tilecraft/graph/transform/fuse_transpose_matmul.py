"""FuseTransposeMatmul: let a matmul read a transposed operand in its stored layout.

Before: ``t = permute_dims(w)`` swapping the last two axes of ``w``, then ``y = matmul(x, t)``
(how ``nn.Linear`` traces ``x @ weight.T`` with ``weight`` stored (out, in)). After:
``y = matmul(x, w, transpose_b=True)``, which legalizes to one PrimFunc whose reduction block
is ``C[.., i, j] += A[.., i, k] * B[.., j, k]`` — no transpose kernel, no transposed copy of
the weight. A ``permute_dims`` left without uses is removed. Operator calls only: run it
before ``Legalize``.

Except for a bound weight (a ``Constant``, see :class:`~tilecraft.graph.BindParams`) of
rows shorter than :data:`LONG_ROWS` read by a matmul of more than one row: there the
transpose stays, and ``FoldConstants`` computes the transposed weight once, at compile time.
The CPU Matmul rule packs the weight into panels of the output's columns on every call:
from ``(in, out)`` a copy of contiguous rows, from ``(out, in)`` a transpose. For short rows
the ``(in, out)`` copy is the cheaper one (the tutorial model at batch 64, rows of 768:
0.59 ms against 0.65 ms). For long rows the ``(in, out)`` panels (the whole reduction times
the panel's width) no longer stay in the L2 and the ``(out, in)`` weight, transposed by
cache lines (:mod:`tilecraft.rules.cpu._matmul_copies`), wins: one thread, AVX-512, the
TinyLlama prefill layer at 128 tokens 130 ms with every weight transposed at compile time,
78 ms with the weights of 2048- and 5632-long rows read as stored; the BERT-base layer 16.7
and 13.9 ms; the ViT block 22.6 and 22.3 ms. One row (a GEMV: batch 1, decode) reads
``(out, in)`` rows contiguously along the reduction, the layout the GEMV rule prefers, and
is fused whatever its length.
"""

from __future__ import annotations

from ...ir import IntImm, IRModule
from ...ir.transform import ModulePass
from ..ir import Binding, Constant, Function, OpCall, TensorVar, graph_functions, rebuild
from ..op_types import permutation, transpose_b


def _swaps_last_two(call: OpCall, ndim: int) -> bool:
    if ndim < 2:
        return False
    want = (*range(ndim - 2), ndim - 1, ndim - 2)
    return permutation(call.op, call.attrs, ndim) == want


def _one_row(x: TensorVar) -> bool:
    """Whether the matmul operand ``x`` has one row: every extent but the last is 1."""
    return all(isinstance(d, IntImm) and d.value == 1 for d in x.type.shape[:-1])


LONG_ROWS = 1024
"""Reduction length from which a bound ``(out, in)`` weight is read as it is stored (module
docstring)."""


def _long_rows(weight: TensorVar) -> bool:
    """Whether the ``(.., out, in)`` weight's rows (the reduction) reach :data:`LONG_ROWS`."""
    k = weight.type.shape[-1] if weight.type.shape else None
    return isinstance(k, IntImm) and k.value >= LONG_ROWS


def fuse_function(func: Function) -> Function:
    """``func`` with every matmul of a last-two-axes transpose reading its source instead."""
    transposes: dict[int, TensorVar] = {}  # id(t) -> w for t = permute_dims(w)
    constants = {id(b.var) for b in func.bindings if isinstance(b.value, Constant)}
    bindings: list[Binding] = []
    changed = False
    for b in func.bindings:
        v = b.value
        if isinstance(v, OpCall) and v.op == "permute_dims":
            if _swaps_last_two(v, v.args[0].type.ndim):
                transposes[id(b.var)] = v.args[0]
        elif isinstance(v, OpCall) and v.op == "matmul" and not transpose_b(v.op, v.attrs):
            weight = transposes.get(id(v.args[1]))
            if (
                weight is not None
                and id(weight) in constants
                and not _one_row(v.args[0])
                and not _long_rows(weight)
            ):
                weight = None  # folded at compile time instead (module docstring)
            if weight is not None:
                attrs = v.attrs.with_item("transpose_b", True)
                b = Binding(b.var, OpCall("matmul", (v.args[0], weight), attrs))
                changed = True
        bindings.append(b)
    if not changed:
        return func
    used = {id(a) for b in bindings for a in b.value.args} | {id(r) for r in func.rets}
    kept = [b for b in bindings if id(b.var) not in transposes or id(b.var) in used]
    return rebuild(func, kept)


class FuseTransposeMatmul(ModulePass):
    """Fold last-two-axes ``permute_dims`` into the matmuls reading them (see the module)."""

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        funcs = dict(mod.functions)
        for name, func in graph_functions(mod):
            funcs[name] = fuse_function(func)
        return IRModule(funcs, mod.attrs)

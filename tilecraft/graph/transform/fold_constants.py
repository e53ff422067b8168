"""FoldConstants: compute every binding whose inputs are all constants, once, at compile time.

Before: graph functions may hold bindings (operator calls or ``call_tir``s) that read only
``Constant`` values — parameter-only work once :class:`BindParams` has bound
the weights (a transpose, a re-layout of an operand). After: each such binding is a
``Constant`` holding its value; bindings reading it may fold in turn, in order. The values
are computed by building the PrimFuncs involved for the host CPU (one compilation for the
whole module; operator calls are legalized on the fly) and running them once; a transpose or
reshape operator call is pure data movement and is computed by numpy instead. Constants and
PrimFuncs nothing uses any more are left to :class:`DeadCodeElimination`. Calls of fused
groups are not folded: run it before ``FuseOps``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ...ir import BaseFunc, IRModule, PrimFunc
from ...ir.transform import ModulePass
from ...runtime import build
from ..ir import (
    Binding,
    CallTIR,
    Constant,
    Function,
    OpCall,
    TensorVar,
    graph_functions,
    rebuild,
)
from ..op import GraphError
from ..op_types import permutation
from .legalize import legalize_call
from .names import fresh_name

Move = Callable[[np.ndarray], np.ndarray]


@dataclass
class _Fold:
    """One binding to fold: the kernels computing it, as (PrimFunc name, args, output), or
    the numpy function moving its one argument's data (``move``)."""

    binding: Binding
    calls: list[tuple[str, tuple[TensorVar, ...], TensorVar]]
    move: Move | None = None


def _data_movement(call: OpCall, out: TensorVar) -> Move | None:
    """numpy's exact equivalent of a pure data-movement operator call, else None.

    A weight transpose or reshape of a large model computed by an unscheduled kernel costs a
    compilation and a slow naive loop nest (the TinyLlama layer's transposes: about 2 s).
    """
    shape = out.type.static_shape()
    if call.op == "permute_dims" and shape is not None:
        perm = permutation(call.op, call.attrs, call.args[0].type.ndim)
        return lambda a: np.transpose(a, perm)
    if call.op == "reshape" and shape is not None:
        return lambda a: np.reshape(a, shape)
    return None


class _Planner:
    """Find the foldable bindings of a module and the PrimFuncs they need."""

    def __init__(self, funcs: Mapping[str, BaseFunc]) -> None:
        self.funcs = funcs
        self.needed: dict[str, PrimFunc] = {}

    def _prim(self, name: str, where: str) -> PrimFunc:
        f = self.funcs.get(name)
        if not isinstance(f, PrimFunc):
            raise GraphError(f"FoldConstants: {where} calls {name!r}, which is not a PrimFunc")
        self.needed[name] = f
        return f

    def calls_of(self, b: Binding) -> list[tuple[str, tuple[TensorVar, ...], TensorVar]]:
        """The kernel calls computing ``b`` (operator calls legalized into fresh PrimFuncs)."""
        v = b.value
        if isinstance(v, CallTIR):
            self._prim(v.func, b.var.name)
            return [(v.func, v.args, b.var)]
        if isinstance(v, OpCall):
            prim, args = legalize_call(v, b.var)
            name = fresh_name({*self.needed, *self.funcs}, f"fold_{prim.name}")
            self.needed[name] = prim.update(name=name)
            return [(name, args, b.var)]
        raise GraphError(f"FoldConstants: cannot fold {type(v).__name__} at {b.var.name}")

    def plan(self, func: Function) -> list[_Fold]:
        """The foldable bindings of ``func``, in order."""
        constant: set[int] = set()
        folds: list[_Fold] = []
        for b in func.bindings:
            if isinstance(b.value, Constant):
                constant.add(id(b.var))
            elif (
                isinstance(b.value, (CallTIR, OpCall))
                and all(id(a) in constant for a in b.value.args)
                and b.var.type.static_shape() is not None
            ):
                constant.add(id(b.var))
                move = _data_movement(b.value, b.var) if isinstance(b.value, OpCall) else None
                folds.append(_Fold(b, [] if move else self.calls_of(b), move))
        return folds


def _evaluate(func: Function, folds: list[_Fold], lib: object) -> Function:
    values: dict[int, np.ndarray] = {
        id(b.var): b.value.data for b in func.bindings if isinstance(b.value, Constant)
    }
    replaced: dict[int, Binding] = {}
    for fold in folds:
        if fold.move is not None:  # a view: the Constant below makes the one contiguous copy
            (arg,) = fold.binding.value.args
            values[id(fold.binding.var)] = fold.move(values[id(arg)])
        for name, args, out in fold.calls:
            shape = out.type.static_shape()
            assert shape is not None
            result = np.empty(shape, np.dtype(out.type.dtype.numpy_name()))
            lib[name](*(values[id(a)] for a in args), result)  # type: ignore[index]
            values[id(out)] = result
        var = fold.binding.var
        constant = Constant(var.type, values[id(var)])
        values[id(var)] = constant.data  # C-contiguous, for the kernels of later folds
        replaced[id(fold.binding)] = Binding(var, constant)
    return rebuild(func, [replaced.get(id(b), b) for b in func.bindings])


class FoldConstants(ModulePass):
    """Replace bindings of constants-only inputs by their values (see the module docstring)."""

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        planner = _Planner(mod.functions)
        todo = []
        for name, func in graph_functions(mod):
            if func.attrs.get("primitive"):
                continue
            folds = planner.plan(func)
            if folds:
                todo.append((name, func, folds))
        if not todo:
            return mod
        lib = build(IRModule(dict(planner.needed)), "cpu") if planner.needed else None
        funcs = dict(mod.functions)
        for name, func, folds in todo:
            funcs[name] = _evaluate(func, folds, lib)
        return IRModule(funcs, mod.attrs)

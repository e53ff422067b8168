"""BindParams: turn given parameters of graph functions into constants.

Before: ``forward(x, fc1_weight, ...)`` takes its weights as parameters. After: each bound
parameter is no longer a parameter; the function starts with ``fc1_weight = R.const(...)``
holding a private copy of the array, so the executable takes only the remaining parameters
(``exe["forward"](x)``). ``attrs["num_input"]`` is kept consistent. Keys name parameters
either exactly (``fc1_weight``) or as the dotted names :meth:`nn.Module.export` returns
(``fc1.weight``, whose parameter is ``fc1_weight``). Arrays must match the parameter's dtype
and static shape; binding a parameter whose shape is symbolic is not supported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...ir import IRModule
from ...ir.transform import ModulePass
from ...runtime.arguments import ArgumentError, to_array
from ..ir import Binding, Constant, Function, TensorVar, graph_functions
from ..op import GraphError


def _param_for(key: str, params: Sequence[TensorVar]) -> TensorVar | None:
    by_name = {p.name: p for p in params}
    return by_name.get(key) or by_name.get(key.replace(".", "_"))


def _constant(p: TensorVar, value: Any, where: str) -> Constant:
    try:
        arr = to_array(value, where)
    except ArgumentError as e:
        raise GraphError(str(e)) from None
    shape = p.type.static_shape()
    if shape is None:
        raise GraphError(
            f"{where}: parameter {p.name} has the symbolic shape {p.type.describe()}; only "
            "parameters of static shape can be bound"
        )
    want = np.dtype(p.type.dtype.numpy_name())
    if arr.dtype != want or arr.shape != shape:
        raise GraphError(
            f"{where}: parameter {p.name} is {p.type.describe()}, got an array of dtype "
            f"{arr.dtype} and shape {arr.shape}"
        )
    return Constant(p.type, arr)


def bind_function(func: Function, params: Mapping[str, Any]) -> tuple[Function, set[str]]:
    """``func`` with the parameters named in ``params`` bound; also the keys it used."""
    chosen: dict[int, tuple[str, TensorVar]] = {}
    for key in params:
        p = _param_for(key, func.params)
        if p is None:
            continue
        if id(p) in chosen:
            raise GraphError(
                f"BindParams: {key!r} and {chosen[id(p)][0]!r} both name parameter {p.name} "
                f"of {func.name}"
            )
        chosen[id(p)] = (key, p)
    if not chosen:
        return func, set()
    where = f"BindParams: {func.name}"
    consts = [
        Binding(p, _constant(p, params[key], f"{where}: {key!r}")) for key, p in chosen.values()
    ]
    kept = tuple(p for p in func.params if id(p) not in chosen)
    attrs = func.attrs
    num_input = attrs.get("num_input")
    if isinstance(num_input, int) and not isinstance(num_input, bool):
        inputs = sum(1 for p in func.params[:num_input] if id(p) not in chosen)
        attrs = attrs.with_item("num_input", inputs)
    new = Function(kept, (*consts, *func.bindings), func.ret, attrs, func.name)
    return new, {key for key, _ in chosen.values()}


class BindParams(ModulePass):
    """Bind parameters of graph functions to constant arrays (see the module docstring).

    Parameters
    ----------
    params
        Parameter name (or dotted export name) -> numpy array or DLPack CPU tensor.
    func_names
        The graph functions to bind in; default: every non-primitive graph function.
    """

    def __init__(self, params: Mapping[str, Any], func_names: Sequence[str] | None = None) -> None:
        self.params = dict(params)
        self.func_names = tuple(func_names) if func_names is not None else None

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        graphs = {n: f for n, f in graph_functions(mod) if not f.attrs.get("primitive")}
        names = self.func_names if self.func_names is not None else tuple(graphs)
        for n in names:
            if n not in graphs:
                raise GraphError(
                    f"BindParams: the module has no graph function {n!r}; it has {sorted(graphs)}"
                )
        funcs = dict(mod.functions)
        used: set[str] = set()
        for n in names:
            funcs[n], keys = bind_function(graphs[n], self.params)
            used |= keys
        unknown = sorted(set(self.params) - used)
        if unknown:
            params = sorted({p.name for n in names for p in graphs[n].params})
            raise GraphError(
                f"BindParams: no parameter named {unknown} in {list(names)}; parameters: {params}"
            )
        return IRModule(funcs, mod.attrs)

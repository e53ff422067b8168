"""``from_exported_program``: a ``torch.export`` program as a tilecraft graph module.

The program is first decomposed to the Core ATen opset (``ep.run_decompositions()``). User
inputs become the graph function's leading parameters, then one parameter per parameter,
buffer and constant tensor (named after its state-dict key, ``fc1.weight`` -> ``fc1_weight``),
whose values are returned as numpy arrays. Symbolic dimensions become shape variables named
as torch names them (``s77``); ``ep.range_constraints`` are kept on the function as
``attrs["tc.shape_bounds"] = {"s77": (min, max)}`` (max ``-1``: unbounded). A program with
several outputs becomes one graph function returning their tuple (work they share is
computed once). Complex tensors are real pairs ``(..., 2)`` (see :mod:`._complex`): a complex
input, parameter or output is its ``torch.view_as_real``, and the function's
``attrs["tc.complex_inputs"]`` / ``["tc.complex_outputs"]`` list their positions.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ...graph import Function, TensorVar
from ...ir import IRModule, PrimFunc, Var
from ...ir import dtype as to_dtype
from . import (  # noqa: F401  (the converters)
    _ops_complex,
    _ops_dynamic,
    _ops_fft,
    _ops_math,
    _ops_more,
    _ops_nn,
    _ops_noncore,
    _ops_noncore2,
    _ops_scatter,
    _ops_tensor,
    _ops_window,
)
from ._complex import (
    COMPLEX,
    ComplexValue,
    complex_param,
    convert_complex,
    involves_complex,
    real_view,
)
from ._context import Context, UnsupportedNodeError, torch_dtype_name
from ._errors import TorchFrontendError, UnsupportedOpsError, import_torch
from ._ops_dynamic import DATA_DEPENDENT
from ._registry import HANDLERS

# ATen calls on shape symbols and Python operators on them: values are read from meta
_SYMBOLIC = {"aten::sym_size.int", "aten::sym_numel", "aten::sym_stride.int",
             "aten::sym_is_contiguous",
             "aten::sym_storage_offset"}  # fmt: skip
_ASSERTS = {"aten::_assert_scalar", "aten::sym_constrain_range_for_size",
            "aten::_assert_tensor_metadata", "aten::sym_constrain_range",
            "aten::_assert_async.msg"}  # fmt: skip


def op_name(target: Any) -> str:
    """``aten::add.Tensor`` for an OpOverload; the Python name for other callables."""
    name = getattr(target, "name", None)
    if callable(name):
        return str(name())
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', target)}"


def location(node: Any) -> str:
    """The node's name and, when torch kept it, the user's source line."""
    trace = node.meta.get("stack_trace") or ""
    frames = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith("File ")]
    return f"{node.name} ({frames[-1]})" if frames else node.name


def from_exported_program(
    ep: Any, *, decompose: bool = True, name: str = "main"
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Import a ``torch.export.ExportedProgram``.

    Parameters
    ----------
    ep
        ``torch.export.export(model, args, dynamic_shapes=...)``.
    decompose
        Run torch's default decompositions to the Core ATen opset first (default).
    name
        Name of the graph function. A program with several outputs gives one function
        returning their tuple (``exe[name](x)`` returns a tuple of arrays); one output gives
        a function returning that tensor.

    Returns
    -------
    (IRModule, dict)
        The module, and parameters / buffers / constants by state-dict key in parameter order.

    Raises
    ------
    UnsupportedOpsError
        Listing every operator of the program without a converter, with its source lines.
    TorchFrontendError
        For programs outside what the importer takes (mutated buffers, non-tensor inputs).
    """
    torch = import_torch()
    if not isinstance(ep, torch.export.ExportedProgram):
        raise TorchFrontendError(
            f"from_exported_program: expected a torch.export.ExportedProgram, got "
            f"{type(ep).__name__}"
        )
    if decompose:
        ep = ep.run_decompositions()
    _check_supported(ep)
    inputs, params = _inputs(ep)
    outputs = _outputs(ep)
    func, prims = _convert(ep, inputs, outputs, name)
    return IRModule({name: func, **prims}), params


def _check_supported(ep: Any) -> None:
    missing: dict[str, list[str]] = {}
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        n = op_name(node.target)
        if n in HANDLERS or n in COMPLEX or n in _SYMBOLIC or n in _ASSERTS:
            continue
        if node.target is operator.getitem:
            continue
        if _is_sym_value(node.meta.get("val")):
            continue
        missing.setdefault(n, []).append(location(node))
    if missing:
        raise UnsupportedOpsError(missing)


def _is_sym_value(v: Any) -> bool:
    return (
        v is not None and not hasattr(v, "shape") and isinstance(v, (int, float, bool))
    ) or type(v).__name__ in ("SymInt", "SymFloat", "SymBool")


def _inputs(ep: Any) -> tuple[list[tuple[str, str, Any]], dict[str, np.ndarray]]:
    """(placeholder name, graph name, user/state key) in order, and the state arrays."""
    sig = ep.graph_signature
    users: list[tuple[str, str, Any]] = []
    states: list[tuple[str, str, Any]] = []
    params: dict[str, np.ndarray] = {}
    for spec in sig.input_specs:
        kind = spec.kind.name
        pname = spec.arg.name
        if kind == "USER_INPUT":
            users.append((pname, pname, None))
            continue
        if kind not in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            raise TorchFrontendError(f"from_exported_program: input kind {kind} is not supported")
        value = (
            ep.state_dict[spec.target]
            if spec.target in ep.state_dict
            else ep.constants[spec.target]
        )
        params[spec.target] = real_view(value)
        states.append((pname, spec.target.replace(".", "_"), spec.target))
    return users + states, params


def _outputs(ep: Any) -> list[str]:
    outs: list[str] = []
    for spec in ep.graph_signature.output_specs:
        if spec.kind.name != "USER_OUTPUT":
            raise TorchFrontendError(
                f"from_exported_program: output kind {spec.kind.name} (state mutated in "
                "place) is not supported; export the model in eval mode"
            )
        if not hasattr(spec.arg, "name"):
            raise TorchFrontendError("from_exported_program: only tensor outputs are supported")
        outs.append(spec.arg.name)
    return outs


def _shape_vars(ep: Any) -> tuple[dict[str, Var], dict[str, tuple[int, int]]]:
    syms: dict[str, Var] = {}
    bounds: dict[str, tuple[int, int]] = {}
    for sym, vr in ep.range_constraints.items():
        if not vr.lower.is_Integer:  # an .item() unbounded below, or a float: not an extent
            continue
        syms[sym.name] = Var(sym.name, to_dtype("int32"))
        hi = vr.upper
        bounds[sym.name] = (int(vr.lower), int(hi) if hi.is_Integer else -1)
    return syms, bounds


def _convert(
    ep: Any, inputs: list[tuple[str, str, Any]], outputs: list[str], fname: str
) -> tuple[Function, dict[str, PrimFunc]]:
    syms, bounds = _shape_vars(ep)
    ctx = Context(syms)
    nodes = {n.name: n for n in ep.graph.nodes}
    for pname, gname, _ in inputs:
        node = nodes[pname]
        val = node.meta.get("val")
        if not hasattr(val, "shape"):
            raise TorchFrontendError(f"from_exported_program: input {pname} is not a tensor")
        shape = ctx.out_shape(node)
        if val.is_complex():
            ctx.env[node] = complex_param(ctx, gname, shape, val.dtype)
            var = ctx.env[node].data
        else:
            var = ctx.env[node] = ctx.bb.param(gname, shape, torch_dtype_name(val.dtype))
        for d in var.type.shape:
            if isinstance(d, Var):
                ctx.carriers.setdefault(d.name, var)
    failures: dict[str, list[str]] = {}
    for node in ep.graph.nodes:
        if node.op == "call_function":
            _convert_node(ctx, node, failures)
    if failures:
        raise UnsupportedOpsError(failures)
    rets = []
    for output in outputs:
        ret = ctx.env[nodes[output]]
        if isinstance(ret, ComplexValue):
            ret = ret.data
        if not isinstance(ret, TensorVar):
            raise TorchFrontendError(f"from_exported_program: output {output} is not a tensor")
        rets.append(ret)
    attrs = {"num_input": sum(1 for i in inputs if i[2] is None), "tc.shape_bounds": bounds}
    attrs.update(_complex_attrs(ctx, [nodes[p] for p, _, _ in inputs], [nodes[o] for o in outputs]))
    if len(rets) > 1:  # the executor returns inputs and repeats in a tuple as copies
        return ctx.bb.finish(rets, name=fname, attrs=attrs), ctx.prims
    ret = rets[0]
    if not any(b.var is ret for b in ctx.bb.bindings):  # an input returned as is
        ret = ctx.emit("reshape", [ret], {"shape": ctx.shape_attr(ret.type.shape)})
    return ctx.bb.finish(ret, name=fname, attrs=attrs), ctx.prims


def _convert_node(ctx: Context, node: Any, failures: dict[str, list[str]]) -> None:
    n = op_name(node.target)
    if node.target is operator.getitem:
        src = ctx.env.get(node.args[0], _MISSING)
        ctx.env[node] = _MISSING if src is _MISSING else src[node.args[1]]
        return
    data_dependent = n in DATA_DEPENDENT  # a symbol's value read from a tensor: bound here
    if not data_dependent and (
        n in _SYMBOLIC or n in _ASSERTS or _is_sym_value(node.meta.get("val"))
    ):
        ctx.env[node] = node.meta.get("val")
        return
    if any(ctx.env.get(a, None) is _MISSING for a in node.all_input_nodes):
        ctx.env[node] = _MISSING
        return
    try:
        if involves_complex(ctx, node) or n not in HANDLERS:  # angle, resolve_conj...
            ctx.env[node] = convert_complex(ctx, node, n)
        else:
            ctx.env[node] = HANDLERS[n](ctx, node)
    except (UnsupportedNodeError, _data_dependent_error()) as e:
        why = e if isinstance(e, UnsupportedNodeError) else "a data-dependent value it cannot take"
        failures.setdefault(f"{n}: {why}", []).append(location(node))
        ctx.env[node] = _MISSING


def _data_dependent_error() -> type[Exception]:
    """torch's error for a converter that asked a value only known at run time."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return GuardOnDataDependentSymNode


def _complex_attrs(ctx: Context, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
    """Positions of the complex inputs and outputs, passed as their real views."""
    cin = [i for i, n in enumerate(inputs) if isinstance(ctx.env.get(n), ComplexValue)]
    cout = [i for i, n in enumerate(outputs) if isinstance(ctx.env.get(n), ComplexValue)]
    attrs: dict[str, Any] = {}
    if cin:
        attrs["tc.complex_inputs"] = tuple(cin)
    if cout:
        attrs["tc.complex_outputs"] = tuple(cout)
    return attrs


_MISSING = object()

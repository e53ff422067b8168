"""``from_onnx``: an ONNX model (opset 13 and later) as a graph module and its weights.

How values are mapped:

- graph inputs become the leading parameters of the graph function ``forward``, which returns
  the model's output, or the tuple of its outputs when it has several
  (``attrs["num_input"]`` counts them); a ``dim_param`` dimension becomes a symbolic extent
  of that name (shared by every input naming it), a dimension with neither value nor name
  gets one (``<input>_dim<i>``), and ``shapes=`` overrides any input's shape;
- initializers holding more than one element become the following parameters (weights) and
  are returned in the params dict, keyed by the ONNX name when it maps to the parameter's
  name the way :class:`~tilecraft.graph.BindParams` expects (``fc1.weight`` ->
  ``fc1_weight``), else by the parameter name; ``tc.compile(mod, params=params)`` binds them
  as constants (and computes weight-only work such as batch-norm folding once), without
  ``params`` the executable takes them after the inputs. One-element initializers, ``Constant``
  nodes and values computed at import are constants of the graph;
- nodes whose inputs are all known at import are evaluated then (shape subgraphs included,
  with symbolic extents carried as expressions); the others become graph operators.

Every unsupported operator of a model is reported at once in an
:class:`UnsupportedOpsError` (op type, count, node names); a malformed model raises
:class:`ONNXImportError`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...graph import GraphBuilder, TensorVar
from ...graph._shape_text import extent_text
from ...ir import BaseFunc, IRModule
from ._context import Context, Node, ONNXImportError, Value
from ._fold import FOLDS
from ._ops_math import CONVERTERS as MATH
from ._ops_nn import CONVERTERS as NN
from ._ops_shape import CONVERTERS as SHAPE

CONVERTERS = {**SHAPE, **MATH, **NN}
_DEFAULT_DOMAINS = ("", "ai.onnx")
_CONTRIB = {"com.microsoft": {"SimplifiedLayerNormalization"}}
MIN_OPSET = 13


class UnsupportedOpsError(ONNXImportError):
    """The model uses operators the importer does not convert; ``missing`` lists them as
    ``(domain-qualified op type, [node names])``."""

    def __init__(self, missing: Sequence[tuple[str, list[str]]]) -> None:
        self.missing = list(missing)
        lines = []
        for op, names in self.missing:
            shown = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
            lines.append(f"  {op} x{len(names)} (nodes: {shown})")
        count = sum(len(n) for _, n in self.missing)
        super().__init__(
            f"from_onnx: {len(self.missing)} unsupported operator type(s) in {count} node(s):\n"
            + "\n".join(lines)
        )


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise ONNXImportError(
            "from_onnx needs the onnx package: pip install 'tilecraft[onnx]'"
        ) from None
    return onnx


def _load(onnx: Any, model: Any) -> Any:
    if isinstance(model, (str, os.PathLike)):
        try:
            return onnx.load(os.fspath(model))
        except (OSError, ValueError) as e:
            raise ONNXImportError(f"from_onnx: cannot load {model!s}: {e}") from None
        except onnx.onnx_cpp2py_export.checker.ValidationError as e:  # pragma: no cover
            raise ONNXImportError(f"from_onnx: cannot load {model!s}: {e}") from None
    if isinstance(model, bytes):
        try:
            return onnx.load_from_string(model)
        except Exception as e:  # noqa: BLE001  protobuf's DecodeError has no public base
            raise ONNXImportError(f"from_onnx: bytes are not an ONNX model: {e}") from None
    if not isinstance(model, onnx.ModelProto):
        raise ONNXImportError(
            f"from_onnx: expected an onnx.ModelProto, a path or bytes, got {type(model).__name__}"
        )
    return model


def _check(onnx: Any, model: Any) -> int:
    """Validate ``model``; its default-domain opset."""
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise ONNXImportError(f"from_onnx: the model is malformed: {e}") from None
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        raise ONNXImportError("from_onnx: the model imports no default-domain opset")
    if versions[0] < MIN_OPSET:
        raise ONNXImportError(
            f"from_onnx: opset {versions[0]} is older than {MIN_OPSET}; convert it first "
            "(onnx.version_converter.convert_version(model, 13))"
        )
    return int(versions[0])


def _supported(node: Any) -> bool:
    if node.domain in _DEFAULT_DOMAINS:
        return node.op_type in CONVERTERS
    return node.op_type in _CONTRIB.get(node.domain, set())


def check_supported(nodes: Sequence[Any]) -> None:
    """Raise UnsupportedOpsError naming every node no converter handles."""
    missing: dict[str, list[str]] = {}
    for i, node in enumerate(nodes):
        if not _supported(node):
            key = (
                node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
            )
            missing.setdefault(key, []).append(node.name or f"#{i}")
    if missing:
        raise UnsupportedOpsError(sorted(missing.items()))


def _ident(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "d"
    return out if out[0].isalpha() or out[0] == "_" else f"d_{out}"


def _input_shape(inp: Any, shapes: Mapping[str, Sequence[int | str]]) -> list[int | str]:
    if inp.name in shapes:
        dims = list(shapes[inp.name])
        for d in dims:
            if (
                isinstance(d, bool)
                or not isinstance(d, (int, str))
                or (isinstance(d, int) and d < 0)
            ):
                raise ONNXImportError(f"from_onnx: shapes[{inp.name!r}]: bad extent {d!r}")
        return [d if isinstance(d, int) else _ident(d) for d in dims]
    out: list[int | str] = []
    for i, d in enumerate(inp.type.tensor_type.shape.dim):
        if d.HasField("dim_value"):
            out.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            out.append(_ident(d.dim_param))
        else:
            out.append(f"{_ident(inp.name)}_dim{i}")
    return out


def _node(onnx: Any, proto: Any, index: int) -> Node:
    attrs: dict[str, Any] = {}
    for a in proto.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, onnx.TensorProto):
            v = onnx.numpy_helper.to_array(v)
        elif isinstance(v, (list, tuple)):
            v = list(v)
        attrs[a.name] = v
    return Node(
        proto.op_type,
        proto.name or f"{proto.op_type}_{index}",
        list(proto.input),
        list(proto.output),
        attrs,
        proto.domain,
    )


def _run_node(ctx: Context, node: Node) -> list[Value]:
    present = [n for n in node.inputs if n]
    if node.op in FOLDS and present and all(ctx.is_static(n) for n in present):
        args = [ctx.static(n, "input") if n else None for n in node.inputs]
        return [*FOLDS[node.op](ctx, node, args)]
    return CONVERTERS[node.op](ctx, node)


def _add_inputs(
    onnx: Any, ctx: Context, inputs: Sequence[Any], shapes: Mapping[str, Sequence[int | str]]
) -> None:
    """The graph inputs as the function's leading parameters."""
    for inp in inputs:
        elem = inp.type.tensor_type.elem_type
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).name
        ctx.values[inp.name] = ctx.bb.param(inp.name, _input_shape(inp, shapes), dtype)


def from_onnx(
    model: Any, shapes: Mapping[str, Sequence[int | str]] | None = None
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Import an ONNX model as a graph module and its weights.

    Parameters
    ----------
    model
        An ``onnx.ModelProto``, a path to a ``.onnx`` file, or its bytes. Opset 13 or later.
    shapes
        Input name -> shape overriding the model's (ints; strings name symbolic extents).

    Returns
    -------
    (IRModule, dict)
        The module holding the graph function ``forward`` (inputs, then weights) and the
        weights as numpy arrays (see the module docstring for how names map). A model with
        several outputs gives one ``forward`` returning their tuple, in the model's output
        order (``exe(x)`` returns a tuple of arrays; work the outputs share is done once).

    Raises
    ------
    UnsupportedOpsError
        Listing every unsupported operator of the model with its nodes.
    ONNXImportError
        A malformed model, an opset before 13, or a node the importer cannot convert (named
        with its type and node name).
    """
    onnx = _onnx()
    model = _load(onnx, model)
    _check(onnx, model)
    graph = model.graph
    check_supported(graph.node)
    shapes = dict(shapes or {})
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    unknown = set(shapes) - {i.name for i in inputs}
    if unknown:
        raise ONNXImportError(f"from_onnx: shapes= names no model input: {sorted(unknown)}")
    ctx = _convert(onnx, graph, inits, inputs, shapes)
    rets = [ctx.tensor(out.name) for out in graph.output]
    attrs = {"num_input": len(inputs)}
    if len(rets) != 1:  # the executor returns inputs and repeats in a tuple as copies
        func = ctx.bb.finish(rets, name="forward", attrs=attrs)
    else:
        ret = rets[0]
        if not any(b.var is ret for b in ctx.bb.bindings):  # an input returned as is
            ret = reshape_copy(ctx, ret)
        func = ctx.bb.finish(ret, name="forward", attrs=attrs)
    funcs: dict[str, BaseFunc] = {"forward": func}
    return IRModule(funcs), ctx.params


def _convert(
    onnx: Any,
    graph: Any,
    inits: Mapping[str, np.ndarray],
    inputs: Sequence[Any],
    shapes: Mapping[str, Sequence[int | str]],
) -> Context:
    """Every node of ``graph`` converted into a fresh builder."""
    ctx = Context(GraphBuilder(), inits)
    _add_inputs(onnx, ctx, inputs, shapes)
    for i, proto in enumerate(graph.node):
        ctx.node = _node(onnx, proto, i)
        try:
            results = _run_node(ctx, ctx.node)
        except (ValueError, TypeError, IndexError, ZeroDivisionError) as e:
            raise ctx.error(f"cannot convert: {e}") from e
        for name, v in zip(ctx.node.outputs, results, strict=False):
            if name:
                ctx.values[name] = v
    ctx.node = None
    return ctx


def reshape_copy(ctx: Context, x: TensorVar) -> TensorVar:
    """A binding holding ``x`` (a function returns a binding, not a parameter)."""
    return ctx.emit("reshape", [x], {"shape": tuple(extent_text(e) for e in x.type.shape)})

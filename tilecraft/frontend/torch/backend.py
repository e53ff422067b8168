"""The ``torch.compile`` backend ``"tilecraft"`` (registered as an entry point in pyproject).

``torch.compile(model, backend="tilecraft", options={...})`` hands each dynamo graph to
:func:`tilecraft_backend`. Guards and graph breaks are torch's. On its first call the graph is
exported (``torch.export``, non-strict), imported with
:func:`~tilecraft.frontend.torch.from_exported_program` and compiled with ``tc.compile`` (the
CPU rules). Dimensions dynamo marks dynamic (its symbolic sizes, after a recompile for a new
size or with ``dynamic=True``) stay symbolic: one compile serves every size. A graph whose
export specializes a dynamic size compiles once per shape instead.

Weights (the ``nn.Parameter`` inputs dynamo passes) are read once, at compile time, and
bound as constants, as inductor's freezing does: compile again after changing them in place.
Torch tensors go in and torch tensors come out, through DLPack without a copy. A complex
input goes in as its ``torch.view_as_real`` and a complex output comes back through
``torch.view_as_complex`` (the graph holds complex values as real pairs).

Options: ``target`` (default ``"cpu"``) and ``database`` (tuning records applied before the
rules).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...errors import TilecraftError
from ._errors import TorchFrontendError, import_torch
from ._importer import from_exported_program

_OPTIONS = ("target", "database")


def tilecraft_backend(
    gm: Any, example_inputs: Sequence[Any], options: Mapping[str, Any] | None = None
) -> Callable[..., Any]:
    """Compile one dynamo graph; returns the callable dynamo runs in its place.

    Parameters
    ----------
    gm
        The ``torch.fx.GraphModule`` dynamo captured.
    example_inputs
        Its example inputs (tensors, and ints or SymInts for dynamic sizes).
    options
        ``{"target": "cpu", "database": db}`` from ``torch.compile(..., options=...)``.
    """
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(_OPTIONS))
    if unknown:
        raise TorchFrontendError(
            f"torch.compile(backend='tilecraft'): unknown options {unknown}; known: "
            f"{list(_OPTIONS)}"
        )
    return _Compiled(gm, opts)


class _Compiled:
    """The executables of one dynamo graph, by input signature (static extents, dtypes)."""

    def __init__(self, gm: Any, options: dict[str, Any]) -> None:
        self.gm = gm
        self.options = options
        self.cache: dict[tuple[Any, ...], _Entry] = {}
        self.symbolic = _symbolic_dims(gm)
        sizes = _size_sources(gm, self.symbolic)
        if any(d == () and i not in sizes for i, d in self.symbolic.items()):
            self.symbolic = {}  # an int not read off a tensor's shape: compile per value
        self.inputs = _activations(gm)

    def __call__(self, *args: Any) -> Any:
        torch = import_torch()
        key = tuple(self._key(i, a, torch) for i, a in enumerate(args))
        if key not in self.cache:
            self.cache[key] = self._compile(args, key)
        exe, multi, fixed, complex_out = self.cache[key]
        if not _fits(
            fixed, [args[i] for i in self.inputs]
        ):  # torch kept a dimension dynamo left dynamic
            key = tuple(("v", a) if isinstance(a, int) else self._key(-1, a, torch) for a in args)
            if key not in self.cache:
                self.cache[key] = self._compile(args, key)
            exe, multi, fixed, complex_out = self.cache[key]
        tensors = [_real_view(args[i].detach(), torch) for i in self.inputs]
        out = exe["main"](*tensors)  # torch tensors in: torch tensors out
        if isinstance(out, tuple):  # several outputs: one function returning their tuple
            return tuple(
                torch.view_as_complex(o) if i in complex_out else o for i, o in enumerate(out)
            )
        if complex_out:
            out = torch.view_as_complex(out)
        return (out,) if multi else out

    def _key(self, i: int, a: Any, torch: Any) -> Any:
        dyn = self.symbolic.get(i, ())
        if isinstance(a, torch.Tensor) and i >= 0 and i not in self.inputs:
            return ("v", a.item()) if a.ndim == 0 and not _is_weight(a, torch) else "weight"
        if isinstance(a, torch.Tensor):
            return (str(a.dtype), tuple(None if d in dyn else s for d, s in enumerate(a.shape)))
        return "sym" if i in self.symbolic else ("v", a)

    def _compile(self, args: Sequence[Any], key: tuple[Any, ...]) -> _Entry:
        torch = import_torch()
        symbolic = self.symbolic if any(k == "sym" or _has_none(k) for k in key) else {}
        ep = _export(torch, self.gm, list(args), self.inputs, symbolic)
        if ep is not None:
            try:
                return self._build(ep)
            except TilecraftError:  # e.g. a strided convolution over a symbolic extent
                pass
        # torch specialized a dynamic size, or tilecraft cannot keep it: this shape only
        return self._build(_export(torch, self.gm, list(args), self.inputs, {}))

    def _build(self, ep: Any) -> _Entry:
        mod, params = from_exported_program(ep)
        out_spec = ep.call_spec.out_spec
        multi = out_spec is None or out_spec.num_leaves != 1 or out_spec.type is not None
        tc_compile = importlib.import_module("tilecraft.driver").compile
        # the backend is an entry point above every layer, like the command line: it
        # finishes with the driver's compile, looked up at call time
        exe = tc_compile(
            mod,
            target=self.options.get("target", "cpu"),
            params=params,
            database=self.options.get("database"),
        )
        listed = mod["main"].attrs.get("tc.complex_outputs", ())
        complex_out = (
            tuple(i for i in listed if isinstance(i, int)) if isinstance(listed, tuple) else ()
        )
        return exe, multi, _static_extents(ep), complex_out


_Entry = tuple[Any, bool, list[tuple[int | None, ...]], tuple[int, ...]]


def _real_view(t: Any, torch: Any) -> Any:
    """A complex tensor as its real pairs (the graph's representation); others as they are."""
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def _static_extents(ep: Any) -> list[tuple[int | None, ...]]:
    """Per user input of ``ep``: its extents, None where the export kept one symbolic."""
    out = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            val = next(n for n in ep.graph.nodes if n.name == spec.arg.name).meta["val"]
            out.append(tuple(s if isinstance(s, int) else None for s in val.shape))
    return out


def _fits(fixed: list[tuple[int | None, ...]], tensors: Sequence[Any]) -> bool:
    return all(
        len(f) == a.ndim and all(e is None or e == n for e, n in zip(f, a.shape, strict=True))
        for f, a in zip(fixed, tensors, strict=True)
    )


def _has_none(k: Any) -> bool:
    return isinstance(k, tuple) and len(k) == 2 and isinstance(k[1], tuple) and None in k[1]


def _is_weight(a: Any, torch: Any) -> bool:
    return isinstance(a, torch.nn.Parameter)


def _activations(gm: Any) -> list[int]:
    """Indices of the placeholders that are the caller's tensors, not a module's state
    (parameters, buffers, or attributes such as a batch norm's ``eps`` made tensors)."""
    out = []
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, node in enumerate(holders):
        value = node.meta.get("example_value")
        arg = node.meta.get("grapharg")
        source = str(getattr(getattr(arg, "source", None), "name", ""))
        state = "._parameters[" in source or "._buffers[" in source
        if hasattr(value, "shape") and getattr(arg, "is_tensor", True) and not state:
            out.append(i)
    return out


def _symbolic_dims(gm: Any) -> dict[int, tuple[int, ...]]:
    """Per placeholder index: its symbolic dimensions (a symbolic int input: ``()``)."""
    out: dict[int, tuple[int, ...]] = {}
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, node in enumerate(holders):
        v = node.meta.get("example_value")
        if hasattr(v, "shape"):
            dyn = tuple(d for d, s in enumerate(v.shape) if not isinstance(s, int))
            if dyn:
                out[i] = dyn
        elif v is not None and type(v).__name__ == "SymInt":
            out[i] = ()
    return out


def _size_sources(gm: Any, symbolic: Mapping[int, tuple[int, ...]]) -> dict[int, tuple[int, int]]:
    """For each symbolic int input: a (tensor input, dimension) of the same size."""
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    dims: dict[str, tuple[int, int]] = {}
    for i, ds in symbolic.items():
        for d in ds:
            s = holders[i].meta["example_value"].shape[d]
            dims.setdefault(str(s.node.expr), (i, d))
    out: dict[int, tuple[int, int]] = {}
    for i, ds in symbolic.items():
        name = str(holders[i].meta["example_value"].node.expr) if ds == () else None
        if name is not None and name in dims:
            out[i] = dims[name]
    return out


def _export(
    torch: Any,
    gm: Any,
    args: list[Any],
    inputs: list[int],
    symbolic: Mapping[int, tuple[int, ...]],
) -> Any:
    """``gm`` exported with its weights bound and ``symbolic``'s dimensions dynamic; None
    when torch specializes one of them."""
    sources = _size_sources(gm, symbolic) if symbolic else {}
    wrapper = _Bound(torch, gm, args, inputs, sources)
    example = tuple(args[i].detach() for i in inputs)
    dynamic = (  # forward(*ts): one entry, the tuple of the inputs' dimensions
        (tuple(dict.fromkeys(symbolic.get(i, ()), torch.export.Dim.AUTO) for i in inputs),)
        if symbolic
        else None
    )
    shapes = torch.fx.experimental.symbolic_shapes
    errors = (torch._dynamo.exc.UserError, shapes.GuardOnDataDependentSymNode)
    with torch.no_grad():
        try:
            return torch.export.export(wrapper, example, dynamic_shapes=dynamic, strict=False)
        except errors:
            if not symbolic:
                raise
            return None


def _Bound(  # noqa: N802
    torch: Any, gm: Any, args: list[Any], inputs: list[int], sizes: Mapping[int, tuple[int, int]]
) -> Any:
    """A module taking the tensor inputs; parameters are its own, sizes are read from the
    inputs' shapes (so they stay symbolic) and other values (buffers: constants) are bound
    as they are."""

    class Bound(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = gm
            self.weights = [i for i, a in enumerate(args) if _is_weight(a, torch)]
            for i in self.weights:
                self.register_parameter(f"w{i}", args[i])

        def forward(self, *ts: Any) -> Any:
            full = list(args)
            for i in self.weights:
                full[i] = getattr(self, f"w{i}")
            for i, t in zip(inputs, ts, strict=True):
                full[i] = t
            for i, (src, d) in sizes.items():
                full[i] = full[src].shape[d]
            return self.inner(*full)

    return Bound()

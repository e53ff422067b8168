"""The ``torch.compile`` backend ``"tilecraft"`` (registered as an entry point in pyproject).

``torch.compile(model, backend="tilecraft", options={...})`` hands each dynamo graph to
:func:`tilecraft_backend`. Guards and graph breaks are torch's. The graph is exported
(``torch.export``, non-strict) with the shapes of the first call, imported with
:func:`~tilecraft.frontend.torch.from_exported_program` and compiled with ``tc.compile``
(the CPU rules); a call with other shapes (dynamo's dynamic shapes) compiles once more for
those shapes. Torch tensors go in, torch tensors come out.

Options: ``target`` (default ``"cpu"``) and ``database`` (tuning records applied before the
rules, when ``tc.compile`` takes one).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

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
        Its example inputs (tensors, and ints for dynamic sizes).
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
    """One executable per distinct input signature (shapes, dtypes, int values)."""

    def __init__(self, gm: Any, options: dict[str, Any]) -> None:
        self.gm = gm
        self.options = options
        self.cache: dict[tuple[Any, ...], tuple[Any, list[str]]] = {}

    def __call__(self, *args: Any) -> Any:
        torch = import_torch()
        key = tuple(
            (tuple(a.shape), str(a.dtype)) if isinstance(a, torch.Tensor) else ("v", a)
            for a in args
        )
        if key not in self.cache:
            self.cache[key] = self._compile(args)
        exe, names = self.cache[key]
        arrays = [_to_numpy(a) for a in args if isinstance(a, torch.Tensor)]
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        outs = [torch.from_numpy(np.asarray(exe[n](*arrays))) for n in names]
        if device is not None and device.type != "cpu":
            outs = [o.to(device) for o in outs]
        return tuple(outs) if self.multi else outs[0]

    def _compile(self, args: Sequence[Any]) -> tuple[Any, list[str]]:
        torch = import_torch()
        tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        wrapper = _BindScalars(self.gm, list(args), tensors)
        example = tuple(args[i].detach() for i in tensors)
        with torch.no_grad():
            ep = torch.export.export(wrapper, example, strict=False)
        mod, params = from_exported_program(ep)
        out_spec = ep.call_spec.out_spec
        self.multi = out_spec is None or out_spec.num_leaves != 1 or out_spec.type is not None
        tc_compile = importlib.import_module("tilecraft.driver").compile
        kwargs: dict[str, Any] = {"target": self.options.get("target", "cpu"), "params": params}
        if "database" in self.options:
            if "database" not in inspect.signature(tc_compile).parameters:
                raise TorchFrontendError("this tilecraft's compile takes no database option")
            kwargs["database"] = self.options["database"]
        # the backend is an entry point above every layer, like the command line: it
        # finishes with the driver's compile, looked up at call time
        exe = tc_compile(mod, **kwargs)
        names = sorted(
            (n for n in mod.functions if n == "main" or n.startswith("main_out")),
            key=lambda n: 0 if n == "main" else int(n.removeprefix("main_out")),
        )
        return exe, names

    multi = False


def _to_numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy()  # type: ignore[no-any-return]


def _BindScalars(gm: Any, args: list[Any], tensors: list[int]) -> Any:  # noqa: N802
    """A module taking only the tensor inputs, the others bound to their values."""
    torch = import_torch()

    class Bound(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.inner = gm

        def forward(self, *ts: Any) -> Any:
            full = list(args)
            for i, t in zip(tensors, ts, strict=True):
                full[i] = t
            return self.inner(*full)

    return Bound()

"""Tensors, parameters, modules and ``export``: tracing ``forward`` into a graph function."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import TilecraftError
from ...graph import GraphBuilder, GraphError, TensorVar
from ...graph.ir import dim_text
from ...ir import IntImm, IRModule
from ...ir import dtype as to_dtype
from .spec import Tensor as TensorSpec

_TRACE = threading.local()


class FrontendError(TilecraftError):
    """Misuse of the nn frontend: a tensor op outside export, bad spec, bad state dict."""


def builder() -> GraphBuilder:
    """The graph builder of the export in progress."""
    b = getattr(_TRACE, "builder", None)
    if not isinstance(b, GraphBuilder):
        raise FrontendError("nn tensors can only be computed on inside Module.export(...)")
    return b


class Tensor:
    """A symbolic tensor during tracing: a graph variable with numpy-like operators."""

    def __init__(self, var: TensorVar | None) -> None:
        self._var = var

    @property
    def var(self) -> TensorVar:
        """The graph variable this tensor stands for."""
        if self._var is None:
            raise FrontendError(
                f"{self!r} is not bound to a graph value; use it inside "
                "forward() during Module.export(...)"
            )
        return self._var

    @property
    def shape(self) -> tuple[Any, ...]:
        """Extents: ints for static ones, the symbolic Var otherwise."""
        return tuple(s.value if isinstance(s, IntImm) else s for s in self.var.type.shape)

    @property
    def dtype(self) -> str:
        """Element type name."""
        return str(self.var.type.dtype)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.var.type.shape)

    def __add__(self, other: Tensor) -> Tensor:
        return emit("add", [self, other])

    def __sub__(self, other: Tensor) -> Tensor:
        return emit("subtract", [self, other])

    def __mul__(self, other: Tensor) -> Tensor:
        return emit("multiply", [self, other])

    def __truediv__(self, other: Tensor) -> Tensor:
        return emit("divide", [self, other])

    def __matmul__(self, other: Tensor) -> Tensor:
        return emit("matmul", [self, other])

    def __neg__(self) -> Tensor:
        return emit("negative", [self])

    def reshape(self, *shape: Any) -> Tensor:
        """``reshape`` with ints, -1 or symbolic extents of this tensor."""
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        spec = tuple(d if isinstance(d, int) else getattr(d, "name", d) for d in dims)
        return emit("reshape", [self], {"shape": spec})

    def permute_dims(self, *axes: int) -> Tensor:
        """Reorder dimensions (no axes: reverse them)."""
        ax = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return emit("permute_dims", [self], {"axes": tuple(ax) if ax else None})

    def astype(self, dtype: str) -> Tensor:
        """Convert the element type."""
        return emit("astype", [self], {"dtype": str(to_dtype(dtype))})

    def __repr__(self) -> str:
        if self._var is None:
            return "Tensor(<unbound>)"
        return f"Tensor({self._var.name}: {self._var.type.describe()})"


def emit(op: str, args: Sequence[Tensor], attrs: Mapping[str, Any] | None = None) -> Tensor:
    """Trace one operator call (type-checked by the graph's op registry)."""
    for a in args:
        if not isinstance(a, Tensor):
            raise FrontendError(
                f"{op}: expected nn tensors, got {type(a).__name__}; scalars "
                "must be given as parameters or op attributes"
            )
    return Tensor(builder().emit(op, [a.var for a in args], attrs))


class Parameter(Tensor):
    """A weight of a module: shape, dtype and how to initialise it.

    Parameters
    ----------
    shape
        Static extents.
    dtype
        Element type.
    init
        ``"uniform"`` (in ``[-scale, scale]``), ``"normal"`` (std ``scale``), ``"ones"`` or
        ``"zeros"``.
    scale
        Bound or standard deviation of the random initialisers.
    """

    def __init__(
        self,
        shape: Sequence[int],
        dtype: str = "float32",
        init: str = "uniform",
        scale: float = 0.05,
    ) -> None:
        super().__init__(None)
        self.param_shape = tuple(int(s) for s in shape)
        self.param_dtype = str(to_dtype(dtype))
        if init not in ("uniform", "normal", "ones", "zeros"):
            raise FrontendError(f"Parameter: unknown init {init!r}")
        self.init = init
        self.scale = scale
        self.data: np.ndarray | None = None

    def initial_value(self, rng: np.random.Generator) -> np.ndarray:
        """The loaded value, else one drawn from ``rng`` according to ``init``."""
        if self.data is not None:
            return self.data
        shape, dt = self.param_shape, self.param_dtype
        if self.init == "ones":
            return np.ones(shape, dt)
        if self.init == "zeros":
            return np.zeros(shape, dt)
        if self.init == "normal":
            return (rng.standard_normal(shape) * self.scale).astype(dt)
        return rng.uniform(-self.scale, self.scale, shape).astype(dt)

    def __repr__(self) -> str:
        return f"Parameter({self.param_shape}, {self.param_dtype!r})"


class Module:
    """Base of network layers: attributes that are Parameters or Modules are registered in
    assignment order; subclasses define ``forward``."""

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs in registration order."""
        for name, value in vars(self).items():
            if isinstance(value, Parameter):
                yield prefix + name, value
            elif isinstance(value, Module):
                yield from value.named_parameters(f"{prefix}{name}.")

    def parameters(self) -> list[Parameter]:
        """The parameters in registration order."""
        return [p for _, p in self.named_parameters()]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any) -> Any:
        """The computation; override in subclasses."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def state_dict(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Name -> array for every parameter (loaded values, else deterministic from seed)."""
        rng = np.random.default_rng(seed)
        return {n: p.initial_value(rng) for n, p in self.named_parameters()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load parameter values from numpy arrays; names and shapes must match exactly."""
        own = dict(self.named_parameters())
        missing = sorted(set(own) - set(state))
        unknown = sorted(set(state) - set(own))
        if missing or unknown:
            raise FrontendError(f"load_state_dict: missing {missing}, unexpected {unknown}")
        for name, p in own.items():
            arr = np.asarray(state[name])
            if tuple(arr.shape) != p.param_shape:
                raise FrontendError(
                    f"load_state_dict: {name} has shape {tuple(arr.shape)}, "
                    f"expected {p.param_shape}"
                )
            p.data = np.ascontiguousarray(arr, dtype=p.param_dtype)

    def export(
        self, spec: Mapping[str, Mapping[str, TensorSpec]], seed: int = 0
    ) -> tuple[IRModule, dict[str, np.ndarray]]:
        """Trace the methods named in ``spec`` into graph functions.

        Parameters
        ----------
        spec
            ``{"forward": {"x": nn.spec.Tensor((1, "seq_len"), "float32")}}``: per method,
            its inputs in order. String extents are symbolic, shared within a function.
        seed
            Seed of the deterministic initialisation of parameters not loaded with
            :meth:`load_state_dict`.

        Returns
        -------
        (IRModule, dict)
            The module of graph functions (inputs first, then one parameter per weight, named
            ``fc1_weight`` for ``fc1.weight``; ``attrs["num_input"]`` counts the inputs) and the
            weights as numpy arrays, keyed by dotted name in registration order.
        """
        params = self.named_parameters()
        named = list(params)
        funcs = {}
        for method, inputs in spec.items():
            fn = getattr(self, method, None)
            if not callable(fn):
                raise FrontendError(f"export: {type(self).__name__} has no method {method!r}")
            funcs[method] = self._trace(method, fn, inputs, named)
        return IRModule(funcs), self.state_dict(seed)

    def _trace(
        self,
        method: str,
        fn: Any,
        inputs: Mapping[str, TensorSpec],
        named: list[tuple[str, Parameter]],
    ) -> Any:
        if getattr(_TRACE, "builder", None) is not None:
            raise FrontendError("export: nested exports are not supported")
        bb = GraphBuilder()
        args = []
        for name, s in inputs.items():
            if not isinstance(s, TensorSpec):
                raise FrontendError(
                    f"export: input {name!r} of {method} must be "
                    f"nn.spec.Tensor, got {type(s).__name__}"
                )
            args.append(Tensor(bb.param(name, s.shape, s.dtype)))
        for name, p in named:
            p._var = bb.param(name.replace(".", "_"), p.param_shape, p.param_dtype)
        _TRACE.builder = bb
        try:
            out = fn(*args)
        finally:
            _TRACE.builder = None
            for _, p in named:
                p._var = None
        if not isinstance(out, Tensor):
            raise FrontendError(
                f"export: {method} must return one nn tensor, got {type(out).__name__}"
            )
        return bb.finish(out.var, method, {"num_input": len(args)})


def check_static(name: str, value: Any) -> int:
    """A static extent (errors name the symbolic one)."""
    if isinstance(value, int):
        return value
    raise GraphError(f"{name}: needs a static extent, got {dim_text(value)}")

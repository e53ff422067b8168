"""Tensors, parameters, modules and ``export``: tracing ``forward`` into a graph function."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ...errors import TilecraftError
from ...graph import Binding, Constant, GraphBuilder, GraphError, TensorType, TensorVar
from ...graph.ir import dim_text
from ...ir import IntImm, IRModule
from ...ir import dtype as to_dtype
from ...runtime.arguments import ArgumentError, to_array
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

    # Arithmetic and comparisons: the other operand is a tensor or a Python scalar; a scalar
    # takes this tensor's dtype (x * 2.0 on float16 stays float16), two tensors need one dtype.
    def __add__(self, other: Operand) -> Tensor:
        return emit("add", [self, self._operand(other, "+")])

    def __radd__(self, other: Operand) -> Tensor:
        return emit("add", [self._operand(other, "+"), self])

    def __sub__(self, other: Operand) -> Tensor:
        return emit("subtract", [self, self._operand(other, "-")])

    def __rsub__(self, other: Operand) -> Tensor:
        return emit("subtract", [self._operand(other, "-"), self])

    def __mul__(self, other: Operand) -> Tensor:
        return emit("multiply", [self, self._operand(other, "*")])

    def __rmul__(self, other: Operand) -> Tensor:
        return emit("multiply", [self._operand(other, "*"), self])

    def __truediv__(self, other: Operand) -> Tensor:
        return emit("divide", [self, self._operand(other, "/")])

    def __rtruediv__(self, other: Operand) -> Tensor:
        return emit("divide", [self._operand(other, "/"), self])

    def __matmul__(self, other: Tensor) -> Tensor:
        return emit("matmul", [self, _tensor_operand(other, "@")])

    def __rmatmul__(self, other: Tensor) -> Tensor:
        return emit("matmul", [_tensor_operand(other, "@"), self])

    def __neg__(self) -> Tensor:
        return emit("negative", [self])

    def __pos__(self) -> Tensor:
        return self

    def __lt__(self, other: Operand) -> Tensor:
        return emit("less", [self, self._operand(other, "<")])

    def __le__(self, other: Operand) -> Tensor:
        return emit("less_equal", [self, self._operand(other, "<=")])

    def __gt__(self, other: Operand) -> Tensor:
        return emit("greater", [self, self._operand(other, ">")])

    def __ge__(self, other: Operand) -> Tensor:
        return emit("greater_equal", [self, self._operand(other, ">=")])

    def eq(self, other: Operand) -> Tensor:
        """Elementwise ``self == other`` as a bool tensor (``==`` itself stays identity)."""
        return emit("equal", [self, self._operand(other, "eq")])

    def ne(self, other: Operand) -> Tensor:
        """Elementwise ``self != other`` as a bool tensor (``!=`` itself stays identity)."""
        return emit("not_equal", [self, self._operand(other, "ne")])

    def __bool__(self) -> bool:
        raise FrontendError(
            f"{self!r} has no truth value while tracing: Python's if/and/or/not cannot see "
            "tensor values; select elementwise with nn.functional.where(cond, a, b)"
        )

    def _operand(self, other: Operand, op: str) -> Tensor:
        """``other`` as a tensor: a Python scalar becomes a 0-d constant of this dtype."""
        if isinstance(other, Tensor):
            return other
        if not isinstance(other, (bool, int, float)):
            raise FrontendError(
                f"{op}: expected an nn tensor or a Python scalar, got {type(other).__name__}; "
                "make constant arrays with nn.functional.constant(value, dtype)"
            )
        dt = to_dtype(self.dtype)
        if dt.is_bool and not isinstance(other, bool):
            raise FrontendError(
                f"{op}: {self!r} is bool; convert it first with x.astype('float32') to compute "
                f"with the scalar {other!r}"
            )
        if dt.is_integer and isinstance(other, float) and not other.is_integer():
            raise FrontendError(
                f"{op}: the scalar {other!r} takes the dtype of {self!r} and would be "
                "truncated; convert the tensor first with x.astype('float32')"
            )
        if dt.is_uint and other < 0:
            raise FrontendError(f"{op}: the scalar {other!r} does not fit {self!r} ({dt})")
        return constant(other, self.dtype)

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
                f"{op}: expected nn tensors, got {type(a).__name__}; tensor operators take "
                "Python scalars (x * 2.0), and nn.functional.constant(value, dtype) makes "
                "a constant tensor"
            )
    return Tensor(builder().emit(op, [a.var for a in args], attrs))


Operand = Tensor | bool | int | float
"""What tensor operators take on either side: a tensor or a Python scalar."""


def _tensor_operand(other: object, op: str) -> Tensor:
    if not isinstance(other, Tensor):
        raise FrontendError(
            f"{op}: expected an nn tensor, got {type(other).__name__}; make constant arrays "
            "with nn.functional.constant(value, dtype)"
        )
    return other


def constant(value: ArrayLike, dtype: str = "float32") -> Tensor:
    """A tensor known at export time (``value`` converted to ``dtype``; a scalar is 0-d)."""
    dt = to_dtype(dtype)
    if dt.code.value == "bfloat":  # stored as the upper 16 bits of float32, rounded to even
        bits = np.asarray(value, dtype=np.float32).view(np.uint32).astype(np.uint64)
        arr = np.asarray((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    else:
        arr = np.asarray(value, dtype=np.dtype(dt.numpy_name()))
    b = builder()
    t = TensorType(arr.shape, dt)
    var = TensorVar(b.fresh("const"), t)
    b.bindings.append(Binding(var, Constant(t, arr)))
    return Tensor(var)


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
        """Load parameter values; names and shapes must match exactly.

        Values are numpy arrays, or tensors of any DLPack library as they come (a PyTorch
        ``state_dict()`` as is: Parameters, tensors that require grad, non-contiguous ones);
        each is copied into a C-contiguous array of the parameter's dtype. PyTorch's
        ``num_batches_tracked`` counters, which no layer here reads, are ignored.
        """
        own = dict(self.named_parameters())
        extra = {n for n in state if n.endswith("num_batches_tracked") and n not in own}
        missing = sorted(set(own) - set(state))
        unknown = sorted(set(state) - set(own) - extra)
        if missing or unknown:
            raise FrontendError(f"load_state_dict: missing {missing}, unexpected {unknown}")
        for name, p in own.items():
            arr = _host_array(state[name], f"load_state_dict: {name}")
            if tuple(arr.shape) != p.param_shape:
                raise FrontendError(
                    f"load_state_dict: {name} has shape {tuple(arr.shape)}, "
                    f"expected {p.param_shape}"
                )
            if not np.can_cast(arr.dtype, p.param_dtype, casting="same_kind"):
                raise FrontendError(
                    f"load_state_dict: {name} has dtype {arr.dtype}, which does not convert "
                    f"to the parameter's {p.param_dtype}"
                )
            p.data = np.array(arr, dtype=p.param_dtype, order="C", copy=True)

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
            weights as numpy arrays, keyed by dotted name in registration order. A method
            returning a tuple (or list) of tensors is one function returning their tuple;
            its compiled entry returns a tuple.
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
        ret = _result_vars(method, out)
        return bb.finish(ret, method, {"num_input": len(args)})


def _result_vars(method: str, out: Any) -> TensorVar | tuple[TensorVar, ...]:
    """What ``forward`` returned as the graph function's result: one tensor, or a tuple (or
    list) of tensors, which the function returns as a tuple."""
    if isinstance(out, Tensor):
        return out.var
    if isinstance(out, (tuple, list)) and out and all(isinstance(t, Tensor) for t in out):
        return tuple(t.var for t in out)
    if isinstance(out, (tuple, list)):
        kinds = ", ".join(type(t).__name__ for t in out) or "nothing"
        raise FrontendError(
            f"export: {method} must return an nn tensor or a non-empty tuple of nn tensors, "
            f"got a {type(out).__name__} of {kinds}"
        )
    raise FrontendError(
        f"export: {method} must return an nn tensor or a tuple of nn tensors, "
        f"got {type(out).__name__}"
    )


def _host_array(value: Any, where: str) -> np.ndarray:
    """``value`` (numpy, a DLPack CPU tensor, or a nested sequence) as a numpy array."""
    if isinstance(value, np.ndarray) or not hasattr(value, "__dlpack__"):
        return np.asarray(value)
    try:
        return to_array(value, where)
    except ArgumentError as e:
        raise FrontendError(str(e)) from e


def check_static(name: str, value: Any) -> int:
    """A static extent (errors name the symbolic one)."""
    if isinstance(value, int):
        return value
    raise GraphError(f"{name}: needs a static extent, got {dim_text(value)}")

"""Graph-level IR: functions whose body is a list of tensor-valued bindings.

A graph :class:`Function` lives in an :class:`~tilecraft.ir.IRModule` next to the PrimFuncs it
calls. Its body is one dataflow block of bindings in A-normal form::

    lv = op(args, attrs)                       # OpCall: a registered operator
    lv = call_tir("prim_func_name", args, T)   # CallTIR: a PrimFunc of the same module
    lv = call_extern("blas.gemm", args, T, attrs)  # CallExtern: a routine of an external library
    lv = const(T, data)                        # Constant: a tensor known at compile time
    u_c = bind_symbol(count, "u")   # BindSymbol: extent u read from a tensor (ir_bind.py)

Every value is a :class:`TensorVar` carrying a :class:`TensorType` (shape and dtype); shapes
hold int32 constants or symbolic :class:`~tilecraft.ir.Var` extents shared across the function.
Weights are ordinary function parameters.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GraphError, IRError
from ..ir import (
    Attrs,
    BaseFunc,
    DataType,
    Expr,
    IntImm,
    Node,
    Var,
    as_expr,
    collect_vars,
    substitute,
)
from ..ir import dtype as to_dtype
from ..ir.node import as_attrs
from .ir_bind import BindSymbol, check_carrier, check_symbols

ShapeLike = Sequence[int | Expr]


def as_graph_shape(shape: ShapeLike) -> tuple[Expr, ...]:
    """Normalise a shape: ints become int32 constants; expressions must be scalar integers."""
    out: list[Expr] = []
    for s in shape:
        e = as_expr(int(s), "int32") if isinstance(s, int) else s
        if not isinstance(e, Expr) or not e.dtype.is_integer or e.dtype.lanes != 1:
            raise IRError(f"TensorType: shape entries must be integers or int Vars, got {s!r}")
        if isinstance(e, IntImm) and e.value < 0:
            raise IRError(f"TensorType: negative extent {e.value}")
        out.append(e)
    return tuple(out)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TensorType(Node):
    """The type of a tensor value: ``shape`` (static ints or symbolic exprs) and ``dtype``."""

    shape: tuple[Expr, ...]
    dtype: DataType

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", as_graph_shape(self.shape))
        object.__setattr__(self, "dtype", to_dtype(self.dtype))

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints, or None when some extent is symbolic."""
        dims = [s.value for s in self.shape if isinstance(s, IntImm)]
        return tuple(dims) if len(dims) == len(self.shape) else None

    def describe(self) -> str:
        """Short text such as ``Tensor((1, n, 768), float32)`` for error messages."""
        dims = ", ".join(dim_text(s) for s in self.shape)
        comma = "," if len(self.shape) == 1 else ""
        return f"Tensor(({dims}{comma}), {self.dtype})"

    __hash__ = object.__hash__


def dim_text(e: Expr) -> str:
    """Readable text of one extent (used by error messages)."""
    if isinstance(e, IntImm):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    from ._shape_text import extent_text  # an expression: its text, such as "(s + 1)"

    try:
        return str(extent_text(e))
    except GraphError:
        return " * ".join(v.name for v in collect_vars(e)) or type(e).__name__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TensorVar(Node):
    """A tensor-valued variable: a function parameter or the target of a binding."""

    name: str
    type: TensorType

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise IRError(f"TensorVar: name must be an identifier, got {self.name!r}")
        if not isinstance(self.type, TensorType):
            raise IRError(f"TensorVar {self.name}: type must be a TensorType, got {self.type!r}")

    __hash__ = object.__hash__


def _same_type(a: TensorType, b: TensorType) -> bool:
    """Same dtype and the same static shape."""
    return (
        a.dtype == b.dtype and a.static_shape() is not None and a.static_shape() == b.static_shape()
    )


def _tensor_args(where: str, args: Sequence[object]) -> tuple[TensorVar, ...]:
    """``args`` as a tuple, checked to hold TensorVars only."""
    out: list[TensorVar] = []
    for a in args:
        if not isinstance(a, TensorVar):
            raise IRError(f"{where}: arguments must be TensorVars, got {a!r}")
        out.append(a)
    return tuple(out)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class OpCall(Node):
    """A call of the registered operator ``op`` (see :mod:`tilecraft.graph.op`)."""

    op: str
    args: tuple[TensorVar, ...]
    attrs: Attrs = field(default_factory=Attrs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", _tensor_args(f"OpCall {self.op}", self.args))
        object.__setattr__(self, "attrs", as_attrs(self.attrs))

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CallTIR(Node):
    """Call the PrimFunc ``func`` of the same module with ``args`` and a fresh output.

    The PrimFunc takes the argument buffers then one output buffer of type ``out_type``.
    """

    func: str
    args: tuple[TensorVar, ...]
    out_type: TensorType

    def __post_init__(self) -> None:
        if not self.func.isidentifier():
            raise IRError(f"CallTIR: function name must be an identifier, got {self.func!r}")
        object.__setattr__(self, "args", _tensor_args(f"CallTIR {self.func}", self.args))

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CallExtern(Node):
    """Call the external library routine ``func`` (``"<library>.<routine>"``) on ``args``.

    The routine writes a fresh output of type ``out_type``; ``attrs`` configure it (for
    ``"blas.gemm"``: ``trans_a``, ``trans_b``). The runtime's executor knows the routines
    (:mod:`tilecraft.runtime.executor.extern`) and reads every extent from the arrays it is
    given, so symbolic extents need nothing more. Library dispatch
    (:mod:`tilecraft.dispatch`) makes these calls.
    """

    func: str
    args: tuple[TensorVar, ...]
    out_type: TensorType
    attrs: Attrs = field(default_factory=Attrs)

    def __post_init__(self) -> None:
        lib, _, routine = self.func.partition(".")
        if not (lib.isidentifier() and routine.isidentifier()):
            raise IRError(
                f"CallExtern: the routine must be named '<library>.<routine>', got {self.func!r}"
            )
        object.__setattr__(self, "args", _tensor_args(f"CallExtern {self.func}", self.args))
        object.__setattr__(self, "attrs", as_attrs(self.attrs))
        if not isinstance(self.out_type, TensorType):
            raise IRError(f"CallExtern {self.func}: out_type must be a TensorType")

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CallFunc(Node):
    """Call the graph function ``func`` of the same module (a fused group before FuseTIR)."""

    func: str
    args: tuple[TensorVar, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", _tensor_args(f"CallFunc {self.func}", self.args))

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Constant(Node):
    """A tensor known at compile time: a bound parameter or a folded value.

    ``data`` is a private, read-only, C-contiguous copy of the given array, of ``type``'s
    static shape and dtype. Structural equality, hashing, JSON and the script form see the
    values through :attr:`payload` (base64 of the little-endian bytes), so they are exact.
    """

    type: TensorType
    data: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.type, TensorType):
            raise IRError(f"Constant: type must be a TensorType, got {self.type!r}")
        shape = self.type.static_shape()
        if shape is None:
            raise IRError(f"Constant: type {self.type.describe()} must have a static shape")
        want = np.dtype(self.type.dtype.numpy_name())
        arr = self.data
        if not isinstance(arr, np.ndarray) or arr.dtype != want or arr.shape != shape:
            got = (
                f"{arr.dtype}{list(arr.shape)}"
                if isinstance(arr, np.ndarray)
                else type(arr).__name__
            )
            raise IRError(
                f"Constant: data must be a numpy array of {self.type.describe()}, got {got}"
            )
        copy = np.array(arr, dtype=want, order="C", copy=True)
        copy.flags.writeable = False
        object.__setattr__(self, "data", copy)

    @property
    def args(self) -> tuple[TensorVar, ...]:
        """A constant reads no tensors (so passes can walk every binding's ``args``)."""
        return ()

    @property
    def payload(self) -> str:
        """The values as base64 of their little-endian bytes (C order)."""
        little = self.data.astype(self.data.dtype.newbyteorder("<"), copy=False)
        return base64.b64encode(little.tobytes()).decode("ascii")

    @staticmethod
    def from_payload(type: TensorType, payload: str) -> Constant:
        """The constant of ``type`` whose values :attr:`payload` encodes."""
        if not isinstance(type, TensorType) or not isinstance(payload, str):
            raise IRError("Constant: expected a TensorType and a base64 string")
        shape = type.static_shape()
        if shape is None:
            raise IRError(f"Constant: type {type.describe()} must have a static shape")
        try:
            raw = base64.b64decode(payload.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as e:
            raise IRError(f"Constant: payload is not base64: {e}") from None
        want = np.dtype(type.dtype.numpy_name()).newbyteorder("<")
        count = 1
        for s in shape:
            count *= s
        if len(raw) != count * want.itemsize:
            raise IRError(
                f"Constant: payload holds {len(raw)} bytes, {type.describe()} needs "
                f"{count * want.itemsize}"
            )
        data = np.frombuffer(raw, want).astype(want.newbyteorder("="), copy=False).reshape(shape)
        return Constant(type, data)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Binding(Node):
    """``var = value`` inside a dataflow block; ``var.type`` is the value's type."""

    var: TensorVar
    value: OpCall | CallTIR | CallExtern | CallFunc | Constant | BindSymbol

    def __post_init__(self) -> None:
        if isinstance(self.value, BindSymbol):
            check_carrier(self.var, self.value)
        elif not isinstance(self.value, (OpCall, CallTIR, CallExtern, CallFunc, Constant)):
            kinds = "OpCall, CallTIR, CallExtern, CallFunc, Constant or BindSymbol"
            raise IRError(f"Binding {self.var.name}: value must be {kinds}")
        if isinstance(self.value, Constant) and not _same_type(self.var.type, self.value.type):
            raise IRError(
                f"Binding {self.var.name}: a {self.var.type.describe()} variable cannot hold "
                f"a constant of {self.value.type.describe()}"
            )

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Function(BaseFunc):
    """A graph function: tensor parameters, a dataflow block of bindings and its result(s).

    ``ret`` is one :class:`TensorVar` (the function returns one tensor) or a non-empty tuple
    of them (it returns a tuple of tensors, ``return a, b``: a model with several outputs).
    :attr:`rets` is always the tuple, :attr:`returns_tuple` tells the two apart. A result may
    be a parameter, a constant or the same value as another result; the executor returns
    each result of a tuple as an array of its own (copying where needed).

    ``attrs["num_input"]`` (when present) says how many leading parameters are activations;
    the rest are weights.
    """

    params: tuple[TensorVar, ...]
    bindings: tuple[Binding, ...]
    ret: TensorVar | tuple[TensorVar, ...]
    attrs: Attrs = field(default_factory=Attrs)
    name: str = "main"

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "bindings", tuple(self.bindings))
        object.__setattr__(self, "attrs", as_attrs(self.attrs))
        if isinstance(self.ret, list):
            object.__setattr__(self, "ret", tuple(self.ret))
        if not self.name.isidentifier():
            raise IRError(f"Function: name must be an identifier, got {self.name!r}")
        check_well_formed(self)

    @property
    def rets(self) -> tuple[TensorVar, ...]:
        """The results as a tuple (one entry for a function returning one tensor)."""
        return self.ret if isinstance(self.ret, tuple) else (self.ret,)

    @property
    def returns_tuple(self) -> bool:
        """True when the function returns a tuple of tensors (``return a, b``)."""
        return isinstance(self.ret, tuple)

    @property
    def ret_type(self) -> TensorType:
        """The type of the result of a function returning one tensor.

        Raises
        ------
        IRError
            When the function returns a tuple (see :attr:`ret_types`).
        """
        if isinstance(self.ret, tuple):
            raise IRError(
                f"graph function {self.name} returns a tuple of {len(self.ret)}; use ret_types"
            )
        return self.ret.type

    @property
    def ret_types(self) -> tuple[TensorType, ...]:
        """The type of each result."""
        return tuple(r.type for r in self.rets)

    @property
    def body(self) -> tuple[Binding, ...]:
        """Alias of :attr:`bindings`."""
        return self.bindings

    def shape_vars(self) -> list[Var]:
        """Symbolic extents of the parameters, in order of first appearance."""
        out: list[Var] = []
        for p in self.params:
            for v in collect_vars_of_shape(p.type.shape):
                if all(v is not o for o in out):
                    out.append(v)
        return out

    def script(self) -> str:
        """Render this graph function as script text (see :mod:`tilecraft.graph.script`)."""
        from .script import to_script

        return to_script(self)

    def with_attr(self, key: str, value: Any) -> Function:
        """A copy with ``attrs[key] = value``."""
        return self.update(attrs=self.attrs.with_item(key, value))

    __hash__ = object.__hash__


def collect_vars_of_shape(shape: Sequence[Expr]) -> list[Var]:
    """Distinct Vars used by the extents of ``shape``."""
    out: list[Var] = []
    for s in shape:
        for v in collect_vars(s):
            if all(v is not o for o in out):
                out.append(v)
    return out


def check_well_formed(func: Function) -> None:
    """Raise IRError unless every use is defined before it and every var is defined once."""
    defined: set[int] = set()
    names: set[str] = set()
    where = f"graph function {func.name}"
    for p in func.params:
        if not isinstance(p, TensorVar):
            raise IRError(f"{where}: parameters must be TensorVars, got {p!r}")
        if id(p) in defined:
            raise IRError(f"{where}: parameter {p.name} appears twice")
        defined.add(id(p))
        names.add(p.name)
    for b in func.bindings:
        if not isinstance(b, Binding):
            raise IRError(f"{where}: body entries must be Bindings, got {b!r}")
        for a in b.value.args:
            if id(a) not in defined:
                raise IRError(f"{where}: {b.var.name} uses {a.name} before it is defined")
        if id(b.var) in defined:
            raise IRError(f"{where}: {b.var.name} is bound twice")
        defined.add(id(b.var))
    check_symbols(func)
    rets = func.ret if isinstance(func.ret, tuple) else (func.ret,)
    if not rets:
        raise IRError(f"{where}: returns an empty tuple; a function returns at least one tensor")
    for n, r in enumerate(rets):
        what = f"result {n}" if isinstance(func.ret, tuple) else "the result"
        if not isinstance(r, TensorVar):
            raise IRError(f"{where}: {what} must be a TensorVar, got {r!r}")
        if id(r) not in defined:
            raise IRError(f"{where}: {what} {r.name} is not defined in the function")


def rebuild(
    func: Function,
    bindings: Sequence[Binding],
    ret: TensorVar | tuple[TensorVar, ...] | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> Function:
    """A copy of ``func`` with new bindings (and optionally result(s) and attrs)."""
    return Function(
        func.params,
        tuple(bindings),
        func.ret if ret is None else ret,
        as_attrs(attrs) if attrs is not None else func.attrs,
        func.name,
    )


class ShapeVarCopier:
    """Copies of tensor types with fresh shape variables (one new Var per original Var).

    Each graph function owns its symbolic extents (the script form names them per function),
    so a function built from another's values copies their types through one copier.
    """

    def __init__(self) -> None:
        self.vmap: dict[Var, Expr] = {}

    def type(self, t: TensorType) -> TensorType:
        """``t`` with every shape variable replaced by its copy."""
        for v in collect_vars_of_shape(t.shape):
            if v not in self.vmap:
                self.vmap[v] = Var(v.name, v.dtype)
        shape: list[Expr] = []
        for s in t.shape:
            new = substitute(s, self.vmap)
            assert isinstance(new, Expr)
            shape.append(new)
        return TensorType(tuple(shape), t.dtype)


def graph_functions(mod: Any) -> list[tuple[str, Function]]:
    """The (name, graph Function) pairs of an IRModule."""
    return [(n, f) for n, f in mod.items() if isinstance(f, Function)]


def _register_structural() -> None:
    """Make graph nodes work with structural equality/hash and JSON (when available)."""
    from ..ir import structural

    register = getattr(structural, "register_node", None)
    if register is None:
        return
    register(TensorType, defines=("shape",))
    register(TensorVar, binds=True, ignore=("name",), defines=("type",))
    register(OpCall)
    register(CallTIR)
    register(CallExtern)
    register(CallFunc)
    register(Constant, fields=("type", "payload"), build=Constant.from_payload)
    register(Binding, defines=("var",))
    register(Function, defines=("params",), ignore=("name",), closes=("params",))


_register_structural()

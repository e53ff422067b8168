"""``bind_symbol``: a symbolic extent whose value is read from a tensor at run time.

Most extents of a graph function are known once its inputs are: the executor binds every
shape variable of the parameters from the arrays it is given. Some are not: how many elements
``nonzero`` finds, or a size a program computes and reads back (``n.item()`` in PyTorch).
A :class:`BindSymbol` binding makes such an extent a shape variable like any other::

    u = R.bind_symbol(count, "u0", lower=0, upper=12)   # u: R.Tensor(("u0", 0), "int64")

``count`` is a tensor of one integer element computed by the kernels before it; the executor
reads its value on the host once they ran, checks ``lower <= value <= upper`` (``upper`` -1:
no bound but int32's, the dtype of graph extents; either bound may also be an extent
expression of the parameters or of earlier symbols, such as ``"s77"`` for ``x[:n.item()]`` of
a dynamic ``x``, or ``lower`` and ``upper`` both ``"u0"`` for a count torch asserts equal to
an earlier one) and binds the symbol ``u0`` to it for the
rest of the function, so later kernels, allocations and results use ``u0`` as they use an
input's extent. A value out of range raises :class:`~tilecraft.errors.GraphError`: no
kernel ever sees a negative or oversized extent.

The binding's value is an empty *carrier* tensor of shape ``(u0, 0)`` (it holds no elements):
a later binding whose type names ``u0`` takes the carrier as an argument, which orders it
after the read (and keeps the read alive through dead-code elimination), as a parameter
carries the extents of its shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import IRError
from ..ir import Expr, IntImm, Node, Var, as_expr, collect_vars
from ..ir import dtype as to_dtype

if TYPE_CHECKING:
    from .ir import Function, TensorType, TensorVar

INT32_MAX = 2**31 - 1
"""The largest value a graph extent (an int32 shape variable) can take."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BindSymbol(Node):
    """Bind ``symbol`` to the integer in ``args[0]`` once it is computed (module docstring).

    ``args`` holds the one source tensor (one element of an integer or bool dtype);
    ``lower`` and ``upper`` bound the value (``upper`` -1: only by int32; an expression:
    by its value, which must be bound first).
    """

    args: tuple[TensorVar, ...]
    symbol: Var
    lower: int | Expr = 0
    upper: int | Expr = -1

    def __post_init__(self) -> None:
        from .ir import TensorVar

        args = tuple(self.args)
        object.__setattr__(self, "args", args)
        if len(args) != 1 or not isinstance(args[0], TensorVar):
            raise IRError("bind_symbol: takes one tensor argument (the value's source)")
        src = args[0].type
        if not (src.dtype.is_integer or src.dtype.is_bool) or not _one_element(src):
            raise IRError(f"bind_symbol: the source must hold one integer, got {src.describe()}")
        if not isinstance(self.symbol, Var) or self.symbol.dtype != to_dtype("int32"):
            raise IRError(f"bind_symbol: the symbol must be an int32 Var, got {self.symbol!r}")
        for name in ("lower", "upper"):  # a constant bound is kept as an int
            if isinstance(getattr(self, name), IntImm):
                object.__setattr__(self, name, getattr(self, name).value)
        self._check_bounds()

    def _check_bounds(self) -> None:
        """Ints: ``0 <= lower <= upper <= int32 max`` (upper -1: int32 max); or extents."""
        where = f"bind_symbol {self.symbol.name}"
        lo, hi = self.lower, self.upper
        for name, bound in (("lower", lo), ("upper", hi)):
            if isinstance(bound, Expr):
                if not bound.dtype.is_integer or bound.dtype.lanes != 1:
                    raise IRError(f"{where}: {name} must be an integer extent, got {bound!r}")
                if any(v is self.symbol for v in collect_vars(bound)):
                    raise IRError(f"{where}: {name} names the symbol itself")
            elif not isinstance(bound, int) or isinstance(bound, bool):
                raise IRError(f"{where}: {name} must be an int or an extent, got {bound!r}")
        if isinstance(lo, int) and lo < 0:
            raise IRError(f"{where}: lower must be >= 0, got {lo}")
        if not isinstance(lo, int) or not isinstance(hi, int):
            return  # extents: checked when the value is read
        if not lo <= (INT32_MAX if hi == -1 else hi) <= INT32_MAX:
            raise IRError(
                f"{where}: bounds [{lo}, {hi}] must satisfy 0 <= lower <= upper <= {INT32_MAX} "
                "(upper -1: unbounded)"
            )

    @property
    def source(self) -> TensorVar:
        """The tensor the value is read from."""
        return self.args[0]

    __hash__ = object.__hash__


def _one_element(t: TensorType) -> bool:
    return all(isinstance(s, IntImm) and s.value == 1 for s in t.shape)


def carrier_type(symbol: Var, source: TensorType) -> TensorType:
    """The type of a ``bind_symbol`` binding: ``(symbol, 0)`` of the source's dtype."""
    from .ir import TensorType

    return TensorType((symbol, as_expr(0, "int32")), source.dtype)


def check_carrier(var: TensorVar, value: BindSymbol) -> None:
    """A ``bind_symbol`` binding's variable must have the carrier type of its symbol."""
    shape = var.type.shape
    ok = (
        len(shape) == 2
        and shape[0] is value.symbol
        and isinstance(shape[1], IntImm)
        and shape[1].value == 0
        and var.type.dtype == value.source.type.dtype
    )
    if not ok:
        raise IRError(
            f"Binding {var.name}: bind_symbol {value.symbol.name} gives "
            f"{carrier_type(value.symbol, value.source.type).describe()}, not "
            f"{var.type.describe()}"
        )


def check_symbols(func: Function) -> None:
    """Each bound symbol is bound once and is not an extent of a parameter.

    Raises
    ------
    IRError
        Naming the function and the symbol.
    """
    from .ir import collect_vars_of_shape

    where = f"graph function {func.name}"
    taken = {id(v) for p in func.params for v in collect_vars_of_shape(p.type.shape)}
    for b in func.bindings:
        if not isinstance(b.value, BindSymbol):
            continue
        sym = b.value.symbol
        bounds = [e for e in (b.value.lower, b.value.upper) if isinstance(e, Expr)]
        free = [v.name for e in bounds for v in collect_vars(e) if id(v) not in taken]
        if free:
            raise IRError(
                f"{where}: bind_symbol {sym.name}: its bounds name {free}, which no "
                "parameter's shape or earlier bind_symbol binds"
            )
        if id(sym) in taken:
            raise IRError(
                f"{where}: bind_symbol binds {sym.name}, which a parameter's shape or an "
                "earlier bind_symbol already binds"
            )
        taken.add(id(sym))


def _register_structural() -> None:
    """Structural equality, hashing and JSON of ``bind_symbol`` (the symbol is a definition)."""
    from ..ir.structural import register_node

    register_node(BindSymbol, defines=("symbol",))


_register_structural()

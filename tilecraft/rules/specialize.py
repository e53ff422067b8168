"""``SpecializeShapes``: size-specialised variants of functions with a symbolic extent.

A rule scheduling a function whose extent ``n`` is symbolic must pick its tiles for every
``n``: the CPU Matmul rule packs the weight and tiles ``n`` by 8 rows, right for a batch of 64
and six times slower than the GEMV schedule at ``n = 1`` (the MLP 1000 -> 333 -> 17: 315 us
against 53 us compiled for a batch of 1, AVX-512, one thread). This pass gives the rules the
concrete extent where one size is common and different: for each unscheduled PrimFunc and
each free variable ``n`` of its buffer parameters' shapes, and each value ``v`` of
``values`` (default ``(1,)``: one row, one token; or per variable name,
``{"seq": (1, 64)}``), it adds a copy of the function with
``n = v`` substituted and its index expressions folded, named ``<name>_<n><v>`` and marked
``tc.specialization_of = <name>``; the general function lists its variants in
``tc.specializations``. The rules then schedule every function on its own (the variant at
``n = 1`` is a GEMV). At build, the CPU backend folds each variant into its general
function's lowered body as a branch ``if n == v`` (:mod:`tilecraft.lower.merge_specializations`),
so the executor, exported libraries and the C entry call one kernel per function as before,
and ``explain`` lists each variant with the rule that took it.

A pure ``IRModule => IRModule`` pass: scheduled functions (the ``tc.scheduled`` mark), a
variant, a function already specialised, a function whose shape variables share a name, and
one without a reduction (elementwise and layout kernels schedule alike at any extent; their
variants would double the compile time for nothing) are left alone. ``tc.compile`` runs it
for CPU targets (``specialize=`` names the sizes) before the database and the default
rules, so a record tuned at a variant's size (``TuneIRMod(specialize=...)``; the database
keys a variant as the function written at that size) schedules it; a module built for
another target keeps its variants as extra, unused kernels.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ..arith import Analyzer
from ..errors import IRError
from ..graph.transform.names import fresh_name
from ..ir import Block, Expr, IntImm, IRModule, IterKind, Mutator, PrimFunc, Var, walk
from ..ir.transform import ModulePass
from ..lower.expose_shape_vars import shape_vars
from ..lower.merge_specializations import SPECIALIZATION_OF_ATTR, SPECIALIZATIONS_ATTR
from .apply import is_scheduled


class _Fix(Mutator):
    """Substitute ``var = value`` and fold each changed outermost expression."""

    def __init__(self, var: Var, value: int) -> None:
        super().__init__()
        self.var, self.value = var, IntImm(var.dtype, value)
        self.ana = Analyzer()
        self.depth = 0

    def visit_Var(self, v: Var) -> Expr:  # noqa: N802
        return self.value if v is self.var else v

    def visit(self, node: Any) -> Any:
        if not isinstance(node, Expr):
            return super().visit(node)
        self.depth += 1
        try:
            out = super().visit(node)
        finally:
            self.depth -= 1
        if self.depth == 0 and out is not node and not isinstance(out, IntImm):
            out = self.ana.simplify(out)
        return out


def specialize(func: PrimFunc, var: Var, value: int, name: str) -> PrimFunc:
    """``func`` with the shape variable ``var`` fixed to ``value``, named ``name``.

    Raises
    ------
    IRError
        When ``var`` is a parameter of ``func`` (only free shape variables are fixed).
    """
    if any(p is var for p in func.params):
        raise IRError(f"specialize {func.name}: {var.name} is a parameter, not a shape variable")
    out: PrimFunc = _Fix(var, value).visit(func)
    return out.update(name=name, attrs=out.attrs.with_item(SPECIALIZATION_OF_ATTR, func.name))


class SpecializeShapes(ModulePass):
    """Add size-specialised variants of each function with a symbolic extent (module doc).

    Parameters
    ----------
    values
        The extents to specialise each shape variable for (default ``(1,)``), or, per shape
        variable name, its extents (``{"seq": (1, 64)}``: variants at ``seq = 1`` and
        ``seq = 64``, other shape variables left symbolic).

    Raises
    ------
    IRError
        When an extent is not an integer ``>= 0``, or no extent is given.
    """

    def __init__(self, values: Sequence[int] | Mapping[str, Sequence[int]] = (1,)) -> None:
        super().__init__()
        self.by_name: dict[str, tuple[int, ...]] | None = None
        if isinstance(values, Mapping):
            self.by_name = {str(k): _extents(v) for k, v in values.items()}
            if not self.by_name:
                raise IRError("SpecializeShapes: no shape variable named")
            self.values: tuple[int, ...] = ()
        else:
            self.values = _extents(values)

    def _values_of(self, var: Var) -> tuple[int, ...]:
        if self.by_name is None:
            return self.values
        return self.by_name.get(var.name, ())

    def transform_module(self, mod: IRModule) -> IRModule:
        """``mod`` with the variants added after their general functions."""
        taken = set(mod.functions)
        funcs: dict[str, Any] = {}
        for name, func in mod.items():
            if not isinstance(func, PrimFunc) or not self._wanted(func):
                funcs[name] = func
                continue
            listed = []
            for var in shape_vars(func):
                for value in self._values_of(var):
                    vname = fresh_name(taken, f"{name}_{var.name}{value}")
                    taken.add(vname)
                    funcs[vname] = specialize(func, var, value, vname)
                    listed.append((var.name, value, vname))
            funcs[name] = func.with_attr(SPECIALIZATIONS_ATTR, tuple(listed)) if listed else func
        if self.by_name is not None:
            self._warn_unknown(mod)
        if len(funcs) == len(mod.functions):
            return mod
        order = list(mod.functions) + [n for n in funcs if n not in mod.functions]
        return IRModule({n: funcs[n] for n in order}, mod.attrs)

    def _warn_unknown(self, mod: IRModule) -> None:
        """Warn about named shape variables no function of ``mod`` has (a typo specialises
        nothing)."""
        seen = {v.name for _, f in mod.prim_funcs() for v in shape_vars(f)}
        unknown = sorted(set(self.by_name or ()) - seen)
        if unknown:
            have = ", ".join(sorted(seen)) or "none"
            warnings.warn(
                f"SpecializeShapes: no function has the shape variable(s) {', '.join(unknown)} "
                f"(shape variables in the module: {have})",
                stacklevel=2,
            )

    def _wanted(self, func: PrimFunc) -> bool:
        """An unscheduled general function with distinctly named shape variables."""
        if is_scheduled(func) or SPECIALIZATION_OF_ATTR in func.attrs:
            return False
        if SPECIALIZATIONS_ATTR in func.attrs:
            return False
        names = [v.name for v in shape_vars(func)]
        return bool(names) and len(set(names)) == len(names) and _has_reduction(func)


def _extents(values: object) -> tuple[int, ...]:
    """``values`` as distinct extents, checked."""
    ok = isinstance(values, Sequence) and not isinstance(values, str) and len(values) > 0
    if not ok or any(
        not isinstance(v, int) or isinstance(v, bool) or v < 0
        for v in values  # type: ignore[attr-defined]
    ):
        raise IRError(f"SpecializeShapes: values must be extents >= 0, got {values!r}")
    return tuple(dict.fromkeys(values))  # type: ignore[call-overload]


def _has_reduction(func: PrimFunc) -> bool:
    """Whether a block of ``func`` reduces: elementwise and layout kernels (a transpose) get
    the same schedule at any extent, so a variant would only add compile time."""
    return any(
        isinstance(n, Block) and any(iv.kind is IterKind.REDUCE for iv in n.iter_vars)
        for n in walk(func.body)
    )

"""``DispatchLibrary``: send the GEMMs of a module to a vendor library (K2).

A pure ``IRModule => IRModule`` pass over a module after the graph pipeline (graph functions
calling fused PrimFuncs). For each PrimFunc called by a graph function:

1. **Skip it when it is already scheduled** (the ``tc.scheduled`` mark, a non-serial loop:
   :func:`tilecraft.rules.apply.scheduled_reason`). The first pass to schedule a function owns
   it, so the order is the user's: ``DispatchLibrary`` then ``ApplyDatabase`` then the rules
   sends every GEMM to the library; the rules first leave nothing for dispatch to take.
2. **Match a GEMM at its head** (:func:`~tilecraft.dispatch._gemm.match_gemm`): a plain matmul,
   batched matmul or linear layer (either weight layout) of the dtypes the library takes: BLAS
   float32 or float64; cuBLAS also float16 and bfloat16 operands accumulated in float32 (the
   form fp16 matmuls legalize to). Other dtypes (int8, ...) are declined with the reason.
3. **Rewrite its calls**: ``y = call_tir(f, args)`` becomes
   ``y = call_extern("blas.gemm", (a, b), trans_a=.., trans_b=..)`` (``"cublas.gemm"`` for
   cuBLAS); when ``f`` fuses a bias or
   an activation after the GEMM, ``g = call_extern(...)`` then ``y = call_tir(f_epilogue, (g,
   ..))``, the epilogue a new, unscheduled PrimFunc of our own (the rules or a database
   schedule it).
   A BLAS call runs on the target's ``-num-cores`` threads (attribute ``num_threads``).
4. **Mark the replaced function** ``tc.scheduled = "dispatch:<library>"``: it stays in the
   module (what the library computes, for inspection and for comparing against a tuned
   kernel), every scheduling pass leaves it alone, and the build does not compile it while no
   graph function calls it.

With ``database=``, step 2 also asks the tuning database which is faster: a GEMM is sent
to the library only when the tuner measured the library (a library record of its workload,
see :mod:`tilecraft.dispatch.measure`) faster than the best tuned record; otherwise, and when
the database has no tuned record of the function to compare with (the library beside an
unmeasured rules' schedule is no measured choice), it is left for ``ApplyDatabase`` and the
rules (the report says why). ``DispatchLibrary(database=db)``,
then ``ApplyDatabase``, then the rules is the tuner's choice per function.

The extern call reads its extents from the arrays at run time, so symbolic extents (batch,
sequence length) work unchanged. Without BLAS the pass raises
:class:`~tilecraft.runtime.executor.extern.ExternLibraryError` naming the extra to install;
cuBLAS is loaded when a real (not emulated) CUDA build runs, with the same error
(:mod:`tilecraft.runtime.executor.extern_cublas`), so emulated builds need no GPU library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import TilecraftError
from ..graph.ir import (
    Binding,
    CallExtern,
    CallTIR,
    Function,
    TensorType,
    TensorVar,
    graph_functions,
    rebuild,
)
from ..ir import Attrs, Expr, IRModule, PrimFunc, dtype
from ..ir.scheduled import by_dispatch, mark_scheduled
from ..ir.transform import ModulePass
from ..rules.apply import scheduled_reason
from ..runtime.executor.extern import load_blas
from ..target import Target, as_target
from ._gemm import BLAS_DTYPES, GemmMatch, match_gemm

LIBRARIES = ("blas", "cublas")
"""The libraries this pass dispatches to."""
GEMM_ROUTINE = {"blas": "blas.gemm", "cublas": "cublas.gemm"}
TARGET_KIND = {"blas": "cpu", "cublas": "cuda"}
"""The target kind each library runs on."""
GEMM_DTYPES = {
    "blas": BLAS_DTYPES,
    "cublas": BLAS_DTYPES
    | {("float16", "float32"), ("bfloat16", "float32"), ("float16", "float16")},
}
"""(operand dtype, accumulator dtype) pairs each library takes (cuBLAS accumulates float16
in float32 even for a float16 result)."""


class _Timed(Protocol):
    @property
    def mean_secs(self) -> float: ...


class Measurements(Protocol):
    """What ``DispatchLibrary(database=...)`` asks: a tuning database
    (:class:`tilecraft.tune.Database`) answers both."""

    def query_tuning_record(
        self, mod: IRModule | PrimFunc, target: Target | str | None = None
    ) -> _Timed | None:
        """The fastest tuned record of ``mod``'s function, if any."""

    def query_library_record(
        self, mod: IRModule | PrimFunc, library: str, target: Target | str | None = None
    ) -> _Timed | None:
        """The fastest measurement of ``library`` on ``mod``'s function, if any."""


class DispatchError(TilecraftError):
    """A library dispatch that cannot run: an unknown library, or one for another target."""


@dataclass
class DispatchReport:
    """What the last run of a :class:`DispatchLibrary` did, per PrimFunc name."""

    dispatched: list[str] = field(default_factory=list)
    declined: dict[str, str] = field(default_factory=dict)


class DispatchLibrary(ModulePass):
    """Replace matmul-like kernels by calls to a vendor library (see the module docstring).

    Parameters
    ----------
    library
        ``"blas"``: OpenBLAS's cblas GEMM on the CPU (``pip install 'tilecraft[blas]'``);
        ``"cublas"``: cuBLAS on CUDA targets (``pip install 'tilecraft[cublas]'``).
    database
        A tuning database: dispatch only the GEMMs whose library measurement is faster than
        their best tuned record (None: every GEMM).

    Attributes
    ----------
    report
        After a run: the functions dispatched and, for the others, why not.

    Raises
    ------
    DispatchError
        For an unknown library, or a current target of another kind than the library's.
    ExternLibraryError
        When the library is not installed (the message names the extra).
    """

    def __init__(self, library: str = "blas", *, database: Measurements | None = None) -> None:
        if library not in LIBRARIES:
            raise DispatchError(
                f"DispatchLibrary: unknown library {library!r}; available: {list(LIBRARIES)}"
            )
        self.library = library
        self.database = database
        self.report = DispatchReport()
        self._threads = 0

    def transform_module(self, mod: IRModule) -> IRModule:
        """The module with the GEMMs of its graph functions sent to the library."""
        target = Target.current()
        kind = TARGET_KIND[self.library]
        if (target.kind if target is not None else "cpu") != kind:
            where = "the CPU" if kind == "cpu" else "CUDA GPUs"
            raise DispatchError(
                f"DispatchLibrary({self.library!r}) runs GEMMs on {where}; the current target "
                f"is {target or 'none (the CPU)'}"
            )
        if self.library == "blas":
            load_blas()  # a missing library is an error naming the extra, before any change
        self.report = DispatchReport()
        tgt = as_target(target)
        self._threads = tgt.num_cores if self.library == "blas" else 0
        matches = self._matches(mod, tgt)
        if not matches:
            return mod
        taken = set(mod.functions)
        funcs = dict(mod.items())
        epilogues: dict[str, str] = {}
        for name, m in matches.items():
            replaced = mod.functions[name]
            assert isinstance(replaced, PrimFunc)  # _matches takes PrimFuncs only
            funcs[name] = mark_scheduled(replaced, by_dispatch(self.library))
            if m.epilogue is not None:
                epi = _fresh(m.epilogue.name, taken)
                epilogues[name] = epi
                funcs[epi] = m.epilogue.update(name=epi)
        for gname, g in graph_functions(mod):
            funcs[gname] = self._rewrite(g, matches, epilogues)
        return IRModule(funcs, mod.attrs)

    def _matches(self, mod: IRModule, target: Target) -> dict[str, GemmMatch]:
        called = {
            b.value.func
            for _, g in graph_functions(mod)
            for b in g.bindings
            if isinstance(b.value, CallTIR)
        }
        out: dict[str, GemmMatch] = {}
        for name, func in mod.prim_funcs():
            if name not in called:
                continue
            why = scheduled_reason(func)
            dtypes = GEMM_DTYPES[self.library]
            m = match_gemm(func, dtypes) if why is None else f"already scheduled ({why})"
            if not isinstance(m, str):
                m = self._slower(func, target) or m
            if isinstance(m, str):
                self.report.declined[name] = m
            else:
                out[name] = m
                self.report.dispatched.append(name)
        return out

    def _slower(self, func: PrimFunc, target: Target) -> str | None:
        """Why the library loses to the tuned kernel per the database (None: it wins)."""
        if self.database is None:
            return None
        lib = self.database.query_library_record(func, self.library, target)
        if lib is None:
            return f"no {self.library} measurement in the database"
        tuned = self.database.query_tuning_record(func, target)
        if tuned is None:  # nothing measured against it: the rules keep the function
            return f"no tuned record to compare {self.library} with ({lib.mean_secs * 1e3:.4g} ms)"
        if tuned.mean_secs <= lib.mean_secs:
            return (
                f"the tuned kernel is faster ({tuned.mean_secs * 1e3:.4g} ms, "
                f"{self.library} {lib.mean_secs * 1e3:.4g} ms)"
            )
        return None

    def _rewrite(
        self, g: Function, matches: dict[str, GemmMatch], epilogues: dict[str, str]
    ) -> Function:
        bindings: list[Binding] = []
        routine = GEMM_ROUTINE[self.library]
        for b in g.bindings:
            v = b.value
            m = matches.get(v.func) if isinstance(v, CallTIR) else None
            if m is None or not isinstance(v, CallTIR):
                bindings.append(b)
                continue
            a, bb = v.args[m.a], v.args[m.b]
            config: dict[str, bool | int] = {"trans_a": m.trans_a, "trans_b": m.trans_b}
            if self.library == "blas":
                config["num_threads"] = self._threads
            attrs = Attrs(config)
            if m.epilogue is None:
                bindings.append(Binding(b.var, CallExtern(routine, (a, bb), b.var.type, attrs)))
                continue
            gemm = TensorVar(f"{b.var.name}_gemm", _gemm_type(a.type, bb.type, m))
            bindings.append(Binding(gemm, CallExtern(routine, (a, bb), gemm.type, attrs)))
            rest = (gemm, *(v.args[n] for n in m.epilogue_inputs))
            bindings.append(Binding(b.var, CallTIR(epilogues[v.func], rest, b.var.type)))
        return rebuild(g, bindings)


def _gemm_type(a: TensorType, b: TensorType, m: GemmMatch) -> TensorType:
    """The type of the GEMM result: batch extents of the batched operand, M of A, N of B, the
    accumulator's dtype."""
    rank = max(a.ndim, b.ndim)
    batch: Sequence[Expr] = a.shape[:-2] if a.ndim == rank else b.shape[:-2]
    rows = a.shape[-1] if m.trans_a else a.shape[-2]
    cols = b.shape[-2] if m.trans_b else b.shape[-1]
    return TensorType((*batch, rows, cols), dtype(m.dtype))


def _fresh(base: str, taken: set[str]) -> str:
    name, n = base, 1
    while name in taken:
        name = f"{base}_{n}"
        n += 1
    taken.add(name)
    return name


def dispatched_functions(mod: IRModule) -> list[str]:
    """Names of the PrimFuncs of ``mod`` marked as dispatched to a library."""
    from ..ir import scheduled_by
    from ..ir.scheduled import DISPATCH_PREFIX

    return [
        n
        for n, f in mod.prim_funcs()
        if isinstance(f, PrimFunc) and (scheduled_by(f) or "").startswith(DISPATCH_PREFIX)
    ]

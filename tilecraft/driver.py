"""``tc.build`` and ``tc.compile``: the top of the stack below the command line.

``build(mod, target)`` (defined by the graph layer, the lowest that knows both kinds of
function: :func:`tilecraft.graph.build.build`) builds what it is given and runs no pipeline: a
module holding graph functions is lowered by the graph layer and run by the runtime's executor;
PrimFuncs alone go to the target's backend (:func:`tilecraft.runtime.build`).

``compile(mod, target, params)`` runs, in order:

1. the ``"default"`` graph pipeline (:func:`tilecraft.graph.get_pipeline`): ``params`` bound
   as constants when given, matmuls reading transposed weights in place, every operator
   legalized to a PrimFunc, parameter-only work (weight transposes, re-layouts) computed
   once here, fusion;
2. with a tuning database (``database=``, else the one of an enclosing ``with db:``),
   :class:`~tilecraft.dispatch.DispatchLibrary` with the database, which sends a GEMM to
   BLAS where the tuner measured the library faster than its best tuned record (CPU targets,
   when ``tilecraft[blas]`` is installed);
3. for a CPU target, :func:`specialize_shapes`: each function still unscheduled with a
   symbolic extent ``n`` gets variants at the sizes of ``specialize=`` (default ``n = 1``;
   :class:`~tilecraft.rules.SpecializeShapes`; at build each variant becomes an ``n == v``
   branch of the function's kernel);
4. with a database, :class:`~tilecraft.tune.ApplyDatabase`: each function (a variant too)
   with an applicable record gets its best schedule, marked ``tc.scheduled = "database"``;
5. the default schedule rules of the target (:func:`default_rules`) through
   :class:`~tilecraft.rules.ApplyDefaultSchedule`, under the target, for every function still
   unscheduled;
6. :func:`build`.

This module sits above every layer it drives (graph, rules) so the default path can grow
the passes of the layers above the rules (applying a tuning database, library dispatch)
without moving: it is the top of the stack below the command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from . import rules
from .dispatch import DispatchLibrary
from .dispatch.measure import LibraryCandidate
from .errors import BuildError
from .graph import Executable, get_pipeline, is_graph_module
from .graph.build import build as build
from .ir import IRModule, PrimFunc
from .rules import ApplyDefaultSchedule, ScheduleRule, SpecializeShapes
from .runtime import Library
from .runtime.arguments import ArgumentTypeError
from .runtime.backend import backend_of
from .runtime.emulate import EmulateArg
from .target import Target, as_target
from .tune import ApplyDatabase, Database


def default_rules(target: Target | str) -> list[ScheduleRule]:
    """The rules ``tc.compile`` applies for ``target``: :func:`tilecraft.rules.default_rules`."""
    return rules.default_rules(target)


Specialize: TypeAlias = "Sequence[int] | Mapping[str, Sequence[int]]"
"""Sizes to specialise symbolic extents for: extents for every shape variable (``(1,)``) or
per shape variable name (``{"seq": (1, 64)}``); see :class:`~tilecraft.rules.SpecializeShapes`."""


def specialize_shapes(
    mod: IRModule, target: Target, specialize: Specialize | None = None
) -> IRModule:
    """The size specialisation ``tc.compile`` runs before the database and the rules: for a
    CPU target, :class:`~tilecraft.rules.SpecializeShapes` with ``specialize`` (default:
    variants at ``n = 1`` of each function with a symbolic extent; empty: none), folded into
    one kernel by the CPU backend; for other targets ``mod`` itself.

    Raises
    ------
    IRError
        When ``specialize`` holds something other than extents ``>= 0``.
    """
    values: Specialize = (1,) if specialize is None else specialize
    if backend_of(target).needs_gpu_schedule or len(values) == 0:
        return mod
    return SpecializeShapes(values)(mod)


def compile(
    mod: IRModule | PrimFunc,
    target: Target | str = "cpu",
    params: Mapping[str, Any] | None = None,
    database: Database | None = None,
    *,
    specialize: Specialize | None = None,
    emulate: EmulateArg = False,
) -> Executable | Library:
    """Compile a model (or kernels) the default way: graph pipeline, default rules, build.

    Parameters
    ----------
    mod
        An exported module (graph functions with operator calls, as
        :meth:`~tilecraft.frontend.nn.Module.export` returns), a module after a graph
        pipeline, or PrimFuncs alone (a PrimFunc or a module without graph functions:
        they are scheduled and built).
    target
        ``"cpu"`` (default), a CPU or a CUDA :class:`~tilecraft.target.Target`.
    params
        Weights to bind: export name (``"fc1.weight"``) or parameter name -> array. Bound
        weights become constants of the executable, and every computation reading only
        them (a transpose, a re-layout) is done once, here: ``exe["forward"](x)`` then takes
        only the model inputs. Without ``params`` the executable takes the inputs then the
        weights, ``exe["forward"](x, *params.values())``.
    database
        Tuning records to apply (default: the database of an enclosing ``with db:``).
    specialize
        For a CPU target, the sizes to give functions with a symbolic extent a variant for,
        chosen at run time (default ``(1,)``: every shape variable at 1; ``{"seq": (1, 64)}``
        names the variable; ``()`` none). A variant is scheduled like any function: by a
        record tuned at that size (``TuneIRMod(..., specialize=...)`` tunes the variants),
        else by the rules with the extent known.
    emulate
        For a GPU target: run the scheduled kernels on the CPU in the GPU emulator
        (``True``, ``"racecheck"``, ``"serial"``; see :func:`tilecraft.build`).

    Returns
    -------
    Executable or Library
        For a module with graph functions, the graph :class:`~tilecraft.graph.Executable`
        (``exe["forward"](...)`` returns the result); for PrimFuncs alone, what
        :func:`tilecraft.build` returns.

    Raises
    ------
    BuildError
        When the C compiler (or, for a GPU target, the CUDA compiler) fails.
    GraphError
        When ``params`` names no parameter, or an array does not match its parameter.
    """
    tgt = as_target(target)
    rules = default_rules(tgt)
    if isinstance(mod, PrimFunc):
        mod = IRModule({mod.name: mod})
    if not isinstance(mod, IRModule):
        raise ArgumentTypeError(
            f"compile: expected an IRModule or PrimFunc, got {type(mod).__name__}"
        )
    with tgt:
        if is_graph_module(mod):
            mod = get_pipeline("default", params=params)(mod)
        elif params is not None:
            raise BuildError("compile: params given, but the module has no graph function")
        db = database if database is not None else Database.current()
        if db is not None and is_graph_module(mod) and LibraryCandidate().unavailable(tgt) is None:
            mod = DispatchLibrary(database=db)(mod)  # the tuner's choice per function
        # variants before the records: a variant is a static function a record may schedule
        mod = specialize_shapes(mod, tgt, specialize)
        if db is not None:
            mod = ApplyDatabase(database=db)(mod)
        mod = ApplyDefaultSchedule(*rules)(mod)
    return build(mod, tgt, emulate=emulate)

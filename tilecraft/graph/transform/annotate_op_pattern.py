"""AnnotateOpPattern: classify every PrimFunc by analysing its blocks.

After: each PrimFunc has ``attrs["op_pattern"]``, an :class:`OpPattern` value that FuseOps
reads. The classification is the schedule layer's block analysis,
:func:`tilecraft.schedule.analysis.classify_prim_func` (its docstring gives the rules: per
block elementwise, broadcast, injective, multiply-accumulate "output-fusable", other
reduction, opaque; then combined over the function), so rules, the tuner and fusion agree.
"""

from __future__ import annotations

from ...ir import IRModule, PrimFunc
from ...ir.transform import ModulePass
from ...schedule.analysis import OpPattern, classify_prim_func

__all__ = ["AnnotateOpPattern", "OpPattern", "analyze_op_pattern", "op_pattern_of"]


def analyze_op_pattern(func: PrimFunc) -> OpPattern:
    """Classify ``func`` (see :func:`tilecraft.schedule.analysis.classify_prim_func`)."""
    return classify_prim_func(func)


def op_pattern_of(func: PrimFunc) -> OpPattern:
    """The annotated pattern of ``func``, analysing it when unannotated."""
    value = func.attrs.get("op_pattern")
    return OpPattern(value) if isinstance(value, int) else analyze_op_pattern(func)


class AnnotateOpPattern(ModulePass):
    """Set ``attrs["op_pattern"]`` on every PrimFunc that lacks it."""

    def transform_module(self, mod: IRModule) -> IRModule:
        """See the module docstring."""
        funcs = {}
        for name, f in mod.items():
            if isinstance(f, PrimFunc) and "op_pattern" not in f.attrs:
                f = f.with_attr("op_pattern", int(analyze_op_pattern(f)))
            funcs[name] = f
        return IRModule(funcs, mod.attrs)

"""Graph passes: each is an IRModule => IRModule transform that leaves its input untouched.

They are built on :mod:`tilecraft.ir.transform`; its pass classes, context and instruments
are re-exported here for code written against the earlier graph-only pass module.
"""

from ...ir.transform import ModulePass as ModulePass
from ...ir.transform import PassContext as PassContext
from ...ir.transform import PassInstrument as PassInstrument
from ...ir.transform import RecordPasses as RecordPasses
from ...ir.transform import Sequential as Sequential
from .annotate_op_pattern import AnnotateOpPattern as AnnotateOpPattern
from .annotate_op_pattern import OpPattern as OpPattern
from .annotate_op_pattern import analyze_op_pattern as analyze_op_pattern
from .dce import DeadCodeElimination as DeadCodeElimination
from .fuse_ops import FuseOps as FuseOps
from .fuse_tir import FuseTIR as FuseTIR
from .legalize import Legalize as Legalize

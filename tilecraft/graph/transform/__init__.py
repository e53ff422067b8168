"""Graph passes: each is an IRModule => IRModule transform that leaves its input untouched."""

from .annotate_op_pattern import AnnotateOpPattern as AnnotateOpPattern
from .annotate_op_pattern import OpPattern as OpPattern
from .annotate_op_pattern import analyze_op_pattern as analyze_op_pattern
from .base import ModulePass as ModulePass
from .base import PassContext as PassContext
from .base import PassInstrument as PassInstrument
from .base import RecordPasses as RecordPasses
from .base import Sequential as Sequential
from .dce import DeadCodeElimination as DeadCodeElimination
from .fuse_ops import FuseOps as FuseOps
from .fuse_tir import FuseTIR as FuseTIR
from .legalize import Legalize as Legalize

"""Schedules: handles, queries, primitives, sampling and replayable traces over a PrimFunc."""

from ..errors import ScheduleError as ScheduleError
from . import analysis as analysis
from .instruction import INSTRUCTION_KINDS as INSTRUCTION_KINDS
from .instruction import Instruction as Instruction
from .instruction import InstructionKind as InstructionKind
from .instruction import primitive as primitive
from .primitives.index_map import IndexMap as IndexMap
from .result import TryResult as TryResult
from .schedule import Schedule as Schedule
from .state import BlockRV as BlockRV
from .state import ExprRV as ExprRV
from .state import LoopRV as LoopRV
from .state import ScheduleState as ScheduleState
from .tensor_intrin import TensorIntrin as TensorIntrin
from .tensor_intrin import get_tensor_intrin as get_tensor_intrin
from .tensor_intrin import list_tensor_intrins as list_tensor_intrins
from .tensor_intrin import register_tensor_intrin as register_tensor_intrin
from .trace import Trace as Trace
from .trace import TraceFormatError as TraceFormatError

__all__ = [
    "INSTRUCTION_KINDS",
    "BlockRV",
    "ExprRV",
    "Instruction",
    "IndexMap",
    "InstructionKind",
    "LoopRV",
    "Schedule",
    "ScheduleError",
    "ScheduleState",
    "TensorIntrin",
    "Trace",
    "TraceFormatError",
    "TryResult",
    "analysis",
    "get_tensor_intrin",
    "list_tensor_intrins",
    "primitive",
    "register_tensor_intrin",
]

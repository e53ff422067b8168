"""The graph executor: run lowered graph programs over a module's compiled kernels.

The graph layer lowers each graph function to a
:class:`~tilecraft.lower.graph_program.GraphProgram`; :func:`build_executable` compiles the
kernels (and, on a host C backend, each program's native entry in the same library) and
returns an :class:`Executable`. Nothing here knows the graph IR.
"""

from .executable import Executable as Executable
from .executable import build_executable as build_executable
from .function import GraphFunction as GraphFunction
from .memory_plan import RESULT as RESULT
from .memory_plan import MemoryPlan as MemoryPlan
from .memory_plan import plan_memory as plan_memory
from .native import NativeGraph as NativeGraph
from .native import StepRecord as StepRecord
from .native import kernel_prim_funcs as kernel_prim_funcs

"""Lowering: passes from a (scheduled) PrimFunc with blocks to flat loops for code generation.

Each pass is a :class:`FunctionPass` (PrimFunc -> PrimFunc, also applicable to an IRModule);
:func:`lower` runs the pipeline of :func:`get_pipeline`.
"""

from .base import FunctionPass as FunctionPass
from .base import PassHook as PassHook
from .base import Sequential as Sequential
from .collect_storage_align import STORAGE_ALIGN_ATTR as STORAGE_ALIGN_ATTR
from .collect_storage_align import CollectStorageAlign as CollectStorageAlign
from .compact_buffer import CompactBufferAllocation as CompactBufferAllocation
from .convert_blocks_to_loops import ConvertBlocksToLoops as ConvertBlocksToLoops
from .expose_shape_vars import ExposeShapeVars as ExposeShapeVars
from .expose_shape_vars import shape_vars as shape_vars
from .flatten_buffer import FlattenBuffer as FlattenBuffer
from .flatten_buffer import aligned_strides as aligned_strides
from .flatten_buffer import linear_index as linear_index
from .gpu_compact_thread_dims import CompactThreadDims as CompactThreadDims
from .gpu_pipeline import lower_gpu as lower_gpu
from .lower_init_block import LowerInitBlock as LowerInitBlock
from .lower_thread_bindings import LowerThreadBindings as LowerThreadBindings
from .pipeline import LOWERED_ATTR as LOWERED_ATTR
from .pipeline import get_pipeline as get_pipeline
from .pipeline import lower as lower
from .plan_allocations import PlanAllocations as PlanAllocations
from .simplify import Simplify as Simplify

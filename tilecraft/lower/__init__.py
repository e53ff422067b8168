"""Lowering: passes from a (scheduled) PrimFunc with blocks to flat loops for code generation.

Each pass is a :class:`~tilecraft.ir.transform.FunctionPass` (PrimFunc -> PrimFunc, also
applicable to an IRModule); :func:`lower` runs the pipeline of :func:`get_pipeline`. The pass
classes of :mod:`tilecraft.ir.transform` are re-exported here for code written against the
earlier lowering-only pass module.
"""

from ..ir.transform import FunctionPass as FunctionPass
from ..ir.transform import PassContext as PassContext
from ..ir.transform import PassHook as PassHook
from ..ir.transform import Sequential as Sequential
from .collect_storage_align import STORAGE_ALIGN_ATTR as STORAGE_ALIGN_ATTR
from .collect_storage_align import CollectStorageAlign as CollectStorageAlign
from .compact_buffer import CompactBufferAllocation as CompactBufferAllocation
from .convert_blocks_to_loops import ConvertBlocksToLoops as ConvertBlocksToLoops
from .expand_warp_tiles import ExpandWarpTiles as ExpandWarpTiles
from .expose_shape_vars import ExposeShapeVars as ExposeShapeVars
from .expose_shape_vars import shape_vars as shape_vars
from .flatten_buffer import FlattenBuffer as FlattenBuffer
from .flatten_buffer import aligned_strides as aligned_strides
from .flatten_buffer import linear_index as linear_index
from .gpu_check_local import CheckLocalPrivate as CheckLocalPrivate
from .gpu_compact_thread_dims import CompactThreadDims as CompactThreadDims
from .gpu_pipeline import get_gpu_pipeline as get_gpu_pipeline
from .gpu_pipeline import lower_gpu as lower_gpu
from .gpu_pipeline import lower_gpu_function as lower_gpu_function
from .gpu_thread_loops import HoistSharedAllocations as HoistSharedAllocations
from .gpu_thread_loops import LowerVirtualThreads as LowerVirtualThreads
from .hoist_invariant_guards import HoistInvariantGuards as HoistInvariantGuards
from .lower_init_block import LowerInitBlock as LowerInitBlock
from .lower_thread_bindings import LowerThreadBindings as LowerThreadBindings
from .lower_warp_fragments import CompactTensorCoreBuffers as CompactTensorCoreBuffers
from .lower_warp_fragments import LowerWarpFragments as LowerWarpFragments
from .parallel_grain import MIN_PARALLEL_WORK as MIN_PARALLEL_WORK
from .parallel_grain import PARALLEL_MIN_WORK_ATTR as PARALLEL_MIN_WORK_ATTR
from .parallel_grain import ParallelGrain as ParallelGrain
from .parallel_grain import parallel_condition as parallel_condition
from .parallel_grain import parallel_work as parallel_work
from .pipeline import LOWERED_ATTR as LOWERED_ATTR
from .pipeline import cpu_pipeline as cpu_pipeline
from .pipeline import get_pipeline as get_pipeline
from .pipeline import lower as lower
from .plan_allocations import PlanAllocations as PlanAllocations
from .share_output_storage import ShareOutputStorage as ShareOutputStorage
from .simplify import Simplify as Simplify
from .software_pipeline import InjectSoftwarePipeline as InjectSoftwarePipeline
from .unroll_loops import AUTO_UNROLL as AUTO_UNROLL
from .unroll_loops import UNROLL_EXPLICIT as UNROLL_EXPLICIT
from .unroll_loops import UnrollLoops as UnrollLoops

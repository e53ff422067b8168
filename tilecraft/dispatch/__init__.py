"""Library dispatch (K2): matmul-like kernels become calls to vendor libraries.

``tc.dispatch.DispatchLibrary(library="blas")`` is a pass like the others: run it after the
graph pipeline, in any order with ``ApplyDatabase`` and ``ApplyDefaultSchedule`` (the first
pass to schedule a function owns it). Matched GEMMs become ``call_extern("blas.gemm", ...)``
bindings of the graph; their epilogues stay fused kernels of our own.
"""

from ..runtime.executor.extern import ExternLibraryError as ExternLibraryError
from .library import DispatchError as DispatchError
from .library import DispatchLibrary as DispatchLibrary
from .library import DispatchReport as DispatchReport
from .library import dispatched_functions as dispatched_functions

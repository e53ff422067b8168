"""The runtime: one backend per target kind (lower, emit, compile through one verified cache,
load), loaded kernels, argument checks and timing."""

from .arguments import ArgumentError as ArgumentError
from .arguments import ArgumentTypeError as ArgumentTypeError
from .arguments import FunctionNotFoundError as FunctionNotFoundError
from .arguments import GraphArgumentError as GraphArgumentError
from .backend import Artifact as Artifact
from .backend import Backend as Backend
from .backend import CPUBackend as CPUBackend
from .backend import CUDABackend as CUDABackend
from .backend import EmulatedCUDABackend as EmulatedCUDABackend
from .backend import backend_of as backend_of
from .backend import build_c_source as build_c_source
from .backend import build_cuda as build_cuda
from .backend import build_cuda_source as build_cuda_source
from .backend import c_source as c_source
from .backend import cuda_source as cuda_source
from .bounds import BoundsCheckError as BoundsCheckError
from .build import Library as Library
from .build import build as build
from .compiler import cache_key as cache_key
from .compiler import compile_flags as compile_flags
from .compiler import compile_shared as compile_shared
from .compiler import find_compiler as find_compiler
from .cuda import CUDAModule as CUDAModule
from .cuda import DeviceArray as DeviceArray
from .cuda_driver import CUDAError as CUDAError
from .emulate import EmulatedBoundsError as EmulatedBoundsError
from .emulate import EmulatedModule as EmulatedModule
from .emulate import EmulateMode as EmulateMode
from .executor import Executable as Executable
from .export import ExportError as ExportError
from .export import load_module as load_module
from .module import Function as Function
from .module import Module as Module
from .module import TimingResult as TimingResult
from .module import written_params as written_params

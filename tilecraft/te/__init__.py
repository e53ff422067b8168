"""Tensor expressions: describe a computation as tensors and stages, then make a PrimFunc.

>>> A = placeholder((1024, 1024), "float32", name="A")
>>> B = placeholder((1024, 1024), "float32", name="B")
>>> k = reduce_axis((0, 1024), name="k")
>>> C = compute((1024, 1024), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
>>> func = create_prim_func([A, B, C])

Math on values (``exp``, ``sqrt``, ``rsqrt``, ``tanh``, ``sigmoid``, ``abs``, ``pow``, ...,
``if_then_else``, ``cast``) is re-exported from :mod:`tilecraft.ir.op`; ``max``/``min`` are
reducers that also take two values (``te.max(a, b)``).
"""

from ..ir.op import abs as abs
from ..ir.op import acos as acos
from ..ir.op import asin as asin
from ..ir.op import atan as atan
from ..ir.op import atan2 as atan2
from ..ir.op import call_intrin as call_intrin
from ..ir.op import cast as cast
from ..ir.op import ceil as ceil
from ..ir.op import const as const
from ..ir.op import copysign as copysign
from ..ir.op import cos as cos
from ..ir.op import cosh as cosh
from ..ir.op import erf as erf
from ..ir.op import exp as exp
from ..ir.op import exp2 as exp2
from ..ir.op import exp10 as exp10
from ..ir.op import expm1 as expm1
from ..ir.op import fabs as fabs
from ..ir.op import floor as floor
from ..ir.op import fmod as fmod
from ..ir.op import hypot as hypot
from ..ir.op import if_then_else as if_then_else
from ..ir.op import isfinite as isfinite
from ..ir.op import isinf as isinf
from ..ir.op import isnan as isnan
from ..ir.op import log as log
from ..ir.op import log1p as log1p
from ..ir.op import log2 as log2
from ..ir.op import log10 as log10
from ..ir.op import pow as pow
from ..ir.op import round as round
from ..ir.op import rsqrt as rsqrt
from ..ir.op import select as select
from ..ir.op import sigmoid as sigmoid
from ..ir.op import sin as sin
from ..ir.op import sinh as sinh
from ..ir.op import sqrt as sqrt
from ..ir.op import tan as tan
from ..ir.op import tanh as tanh
from ..ir.op import trunc as trunc
from .create import create_prim_func as create_prim_func
from .reduce import CommReducer as CommReducer
from .reduce import Reduce as Reduce
from .reduce import ReduceAxis as ReduceAxis
from .reduce import Reducer as Reducer
from .reduce import argmax as argmax
from .reduce import argmin as argmin
from .reduce import comm_reducer as comm_reducer
from .reduce import max as max
from .reduce import max_value as max_value
from .reduce import min as min
from .reduce import min_value as min_value
from .reduce import prod as prod
from .reduce import sum as sum
from .tensor import ComputeOp as ComputeOp
from .tensor import Operation as Operation
from .tensor import PlaceholderOp as PlaceholderOp
from .tensor import Tensor as Tensor
from .tensor import as_shape as as_shape
from .tensor import compute as compute
from .tensor import placeholder as placeholder
from .tensor import reduce_axis as reduce_axis
from .tensor import size_var as size_var

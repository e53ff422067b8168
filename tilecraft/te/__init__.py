"""Tensor expressions: describe a computation as tensors and stages, then make a PrimFunc.

>>> A = placeholder((1024, 1024), "float32", name="A")
>>> B = placeholder((1024, 1024), "float32", name="B")
>>> k = reduce_axis((0, 1024), name="k")
>>> C = compute((1024, 1024), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
>>> func = create_prim_func([A, B, C])
"""

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

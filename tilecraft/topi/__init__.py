"""The operator library: computations (te tensors) with numpy semantics, no schedules.

Each operator takes and returns :class:`~tilecraft.te.Tensor` objects; stages get short
names (``T_add``, ``matmul``, ``T_softmax_maxelem``...) that become block names in
:func:`~tilecraft.te.create_prim_func`.
"""

from .attention import attention as attention
from .attention import causal_attention as causal_attention
from .attention import causal_mask as causal_mask
from .attention import rotary as rotary
from .attention import rotary_embedding as rotary_embedding
from .broadcast import add as add
from .broadcast import broadcast_shape as broadcast_shape
from .broadcast import divide as divide
from .broadcast import elementwise as elementwise
from .broadcast import equal as equal
from .broadcast import floor_divide as floor_divide
from .broadcast import floor_mod as floor_mod
from .broadcast import greater as greater
from .broadcast import greater_equal as greater_equal
from .broadcast import less as less
from .broadcast import less_equal as less_equal
from .broadcast import logical_and as logical_and
from .broadcast import logical_or as logical_or
from .broadcast import maximum as maximum
from .broadcast import minimum as minimum
from .broadcast import multiply as multiply
from .broadcast import not_equal as not_equal
from .broadcast import power as power
from .broadcast import subtract as subtract
from .broadcast import where as where
from .conv import avg_pool2d as avg_pool2d
from .conv import conv2d as conv2d
from .conv import max_pool2d as max_pool2d
from .elemwise import abs as abs
from .elemwise import cast as cast
from .elemwise import ceil as ceil
from .elemwise import clip as clip
from .elemwise import cos as cos
from .elemwise import erf as erf
from .elemwise import exp as exp
from .elemwise import floor as floor
from .elemwise import gelu as gelu
from .elemwise import identity as identity
from .elemwise import log as log
from .elemwise import negative as negative
from .elemwise import relu as relu
from .elemwise import rsqrt as rsqrt
from .elemwise import sigmoid as sigmoid
from .elemwise import silu as silu
from .elemwise import sin as sin
from .elemwise import sqrt as sqrt
from .elemwise import tanh as tanh
from .elemwise import unary as unary
from .nn import dense as dense
from .nn import group_norm as group_norm
from .nn import layer_norm as layer_norm
from .nn import log_softmax as log_softmax
from .nn import matmul as matmul
from .nn import rms_norm as rms_norm
from .nn import softmax as softmax
from .reduction import argmax as argmax
from .reduction import argmin as argmin
from .reduction import max as max
from .reduction import mean as mean
from .reduction import min as min
from .reduction import prod as prod
from .reduction import reduce as reduce
from .reduction import sum as sum
from .transform import concat as concat
from .transform import embedding as embedding
from .transform import pad as pad
from .transform import permute as permute
from .transform import reshape as reshape
from .transform import split as split
from .transform import take as take
from .transform import transpose as transpose

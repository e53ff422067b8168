"""A PyTorch-like module API that traces ``forward`` into tilecraft graph functions."""

from . import functional as functional
from . import spec as spec
from .core import FrontendError as FrontendError
from .core import Module as Module
from .core import Parameter as Parameter
from .core import Tensor as Tensor
from .modules import GELU as GELU
from .modules import BatchNorm2d as BatchNorm2d
from .modules import Conv2d as Conv2d
from .modules import Embedding as Embedding
from .modules import LayerNorm as LayerNorm
from .modules import Linear as Linear
from .modules import ModuleList as ModuleList
from .modules import ReLU as ReLU
from .modules import RMSNorm as RMSNorm
from .modules import Sequential as Sequential
from .modules import Sigmoid as Sigmoid
from .modules import SiLU as SiLU
from .modules import Softmax as Softmax
from .modules import Tanh as Tanh

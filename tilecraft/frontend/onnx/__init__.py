"""The ONNX importer: ``from_onnx(model, shapes=None) -> (IRModule, params)``.

Needs the ``onnx`` package (``pip install 'tilecraft[onnx]'``, which also installs
onnxruntime, the reference the tests compare against).
"""

from ._context import ONNXImportError as ONNXImportError
from .importer import CONVERTERS as CONVERTERS
from .importer import UnsupportedOpsError as UnsupportedOpsError
from .importer import from_onnx as from_onnx

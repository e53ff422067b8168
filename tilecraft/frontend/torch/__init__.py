"""Models as PyTorch users have them: ``torch.export`` programs and ``torch.compile``.

``from_exported_program(ep)`` turns an exported program into a graph module and its weights;
the ``"tilecraft"`` backend of ``torch.compile`` compiles each graph dynamo hands over.
PyTorch is imported only when one of them is used (the ``torch`` extra installs it).
"""

from ._errors import TorchFrontendError as TorchFrontendError
from ._errors import UnsupportedOpsError as UnsupportedOpsError
from ._importer import from_exported_program as from_exported_program
from .backend import tilecraft_backend as tilecraft_backend
from .coverage import coverage as coverage

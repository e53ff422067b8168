"""Graph-level IR, operators, passes, and the lowering of graph functions for the executor.

``tc.graph.get_pipeline("zero")(mod)`` legalizes every operator of a module's graph functions
to a PrimFunc and fuses them; ``tc.build`` (or :func:`build_graph_module`) lowers each graph
function and hands it to the runtime's executor (:mod:`tilecraft.runtime.executor`), which
runs the result. ``build`` runs no pipeline by itself.
"""

from ..runtime.executor import Executable as Executable
from . import op_types as _op_types  # noqa: F401  (registers the built-in operators)
from .build import build_graph_module as build_graph_module
from .build import is_graph_module as is_graph_module
from .build import lower_graph_function as lower_graph_function
from .builder import GraphBuilder as GraphBuilder
from .ir import Binding as Binding
from .ir import CallExtern as CallExtern
from .ir import CallFunc as CallFunc
from .ir import CallTIR as CallTIR
from .ir import Constant as Constant
from .ir import Function as Function
from .ir import OpCall as OpCall
from .ir import TensorType as TensorType
from .ir import TensorVar as TensorVar
from .op import OPS as OPS
from .op import GraphError as GraphError
from .op import infer_type as infer_type
from .op import register_op as register_op
from .pipeline import get_pipeline as get_pipeline
from .transform import AnnotateOpPattern as AnnotateOpPattern
from .transform import DeadCodeElimination as DeadCodeElimination
from .transform import FuseOps as FuseOps
from .transform import FuseTIR as FuseTIR
from .transform import Legalize as Legalize
from .transform import OpPattern as OpPattern
from .transform import PassContext as PassContext
from .transform import PassInstrument as PassInstrument
from .transform import Sequential as Sequential
from .transform.bind_params import BindParams as BindParams
from .transform.fold_constants import FoldConstants as FoldConstants
from .transform.fuse_attention import FuseAttention as FuseAttention
from .transform.fuse_transpose_matmul import FuseTransposeMatmul as FuseTransposeMatmul


def _register_with_script() -> None:
    """Print and parse graph functions inside ``@T.ir_module`` text through tc.script."""
    from ..script import register_function_printer, register_text_parser
    from .ir import Function
    from .script import function_lines
    from .script import parse as parse_graph_text

    register_function_printer(Function, lambda func, name: function_lines(func, name, True))
    register_text_parser("R.function", parse_graph_text)


_register_with_script()

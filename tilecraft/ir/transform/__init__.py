"""The one pass infrastructure: passes, sequences, a pass context with instruments and config.

Every transform of an :class:`~tilecraft.ir.IRModule` in tilecraft (graph passes, lowering
passes, default scheduling, tuning, library dispatch) is a :class:`Pass`::

    with PassContext(instruments=[PassTimingInstrument(), DumpIR("dump"), VerifyIR()]):
        mod = Sequential([Legalize(), FuseOps(), FuseTIR()])(mod)

Configuration keys are registered with :func:`register_pass_config`; a context given an
unregistered key or a value of the wrong type raises :class:`~tilecraft.errors.IRError`.
"""

from .config import ConfigOption as ConfigOption
from .config import register_pass_config as register_pass_config
from .config import registered_pass_configs as registered_pass_configs
from .context import PassContext as PassContext
from .context import PassInstrument as PassInstrument
from .instruments import DumpIR as DumpIR
from .instruments import PassHook as PassHook
from .instruments import PassTiming as PassTiming
from .instruments import PassTimingInstrument as PassTimingInstrument
from .instruments import PrimFuncHooks as PrimFuncHooks
from .instruments import RecordPasses as RecordPasses
from .instruments import VerifyIR as VerifyIR
from .passes import FunctionPass as FunctionPass
from .passes import ModulePass as ModulePass
from .passes import Pass as Pass
from .passes import Sequential as Sequential
from .passes import function_pass as function_pass
from .passes import module_pass as module_pass

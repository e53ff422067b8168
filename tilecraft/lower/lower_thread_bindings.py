"""Handle thread-bound loops for a CPU target.

Before: loops may be ``ForKind.THREAD_BINDING`` (a GPU schedule).
After:  with ``emulate_gpu=True`` every thread-bound loop is an ordinary serial loop (a GPU
schedule before thread-sync lowering has serial semantics, so this computes the same result);
otherwise a thread-bound loop raises :class:`~tilecraft.errors.LowerError`.
"""

from __future__ import annotations

from ..errors import LowerError
from ..ir import For, ForKind, Mutator, PrimFunc
from ..ir.transform import FunctionPass


class _Serializer(Mutator):
    def __init__(self, emulate: bool, func_name: str) -> None:
        super().__init__()
        self.emulate = emulate
        self.func_name = func_name

    def visit_For(self, loop: For) -> For:  # noqa: N802
        loop = self.generic_visit(loop)
        if loop.kind is not ForKind.THREAD_BINDING:
            return loop
        if not self.emulate:
            raise LowerError(
                f"lower {self.func_name}: loop {loop.loop_var.name!r} is bound to "
                f"{loop.thread}, which a CPU target cannot run; build for a CUDA target, or "
                "run the GPU schedule on the CPU with tc.build(..., emulate=True) "
                "(lower(..., emulate_gpu=True) when lowering by hand)"
            )
        return loop.update(kind=ForKind.SERIAL, thread=None)


class LowerThreadBindings(FunctionPass):
    """Serialize thread-bound loops (GPU emulation) or reject them.

    Parameters
    ----------
    emulate_gpu
        Run thread-bound loops as serial loops instead of raising.
    """

    def __init__(self, emulate_gpu: bool = False) -> None:
        self.emulate_gpu = emulate_gpu

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Serialize or reject the thread-bound loops of ``func``."""
        return func.update(body=_Serializer(self.emulate_gpu, func.name).visit(func.body))

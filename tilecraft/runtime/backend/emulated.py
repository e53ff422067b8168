"""The emulating CUDA backend: the CUDA backend's lowering, run on the CPU with thread semantics.

Functions go through exactly the CUDA backend's pipeline and host/device split; the emulator
unit (:mod:`tilecraft.codegen.emulate`) is C, compiled like the CPU backend's, and loaded as an
:class:`~tilecraft.runtime.EmulatedModule` that reports races, uninitialized reads and
out-of-bounds accesses.
"""

from __future__ import annotations

from ...codegen.emulate import EmulatorSource, Site, SiteKind, emit_emulator
from ...errors import BuildError
from ...ir import IRModule, PrimFunc
from ...ir.transform import FunctionPass
from ...lower.gpu_pipeline import get_gpu_pipeline
from ...target import Target
from ..compiler import compile_shared
from ..emulate import EmulatedModule, EmulateMode
from . import program
from .base import Artifact, Backend, Lowered, Source
from .cpu import library_file
from .cuda import lower_for_gpu

EMULATOR_OPTIMIZE = "-O1"
"""The C compiler's optimization level for emulator units. The emulator runs kernels at
reduced sizes, where compiling dominates: on the tensor-core GEMM of the tests ``-O1`` halves
the compile time of ``-O3`` (4.5 s to 2.4 s) for a run time still in milliseconds."""


class EmulatedCUDABackend(Backend):
    """Run GPU-lowered programs on the CPU, thread by thread, barrier phase by phase.

    Parameters
    ----------
    mode
        :attr:`EmulateMode.THREADS` or :attr:`EmulateMode.RACECHECK` (the race checker).
    bounds_check
        Check every access's bounds (implied by the race checker).
    """

    kind = "emulated"

    def __init__(self, mode: EmulateMode, *, bounds_check: bool = False) -> None:
        if not mode.truthful:
            raise BuildError(f"the GPU emulator runs the threads or racecheck modes, not {mode}")
        self.mode = mode
        self.bounds_check = bounds_check

    def pipeline(self, target: Target) -> list[FunctionPass]:
        """The CUDA backend's pipeline (:func:`~tilecraft.lower.gpu_pipeline.get_gpu_pipeline`)."""
        return get_gpu_pipeline(target)

    def lower(self, func_or_module: PrimFunc | IRModule, target: Target) -> Lowered:
        """Lower exactly as the CUDA backend does."""
        return lower_for_gpu(func_or_module, target, "emulator")

    def emit(self, lowered: Lowered, target: Target) -> Source:
        """The emulator unit (:func:`~tilecraft.codegen.emulate.emit_emulator`)."""
        racecheck = self.mode is EmulateMode.RACECHECK
        emu = emit_emulator(
            lowered.programs, target, racecheck=racecheck, bounds_check=self.bounds_check
        )
        return Source(emu.text, lowered, dict(emu.symbols), emu)

    def compile(
        self, source: Source, target: Target, *, arch_flags: tuple[str, ...] | None = None
    ) -> Artifact:
        """A shared library of the emulator unit (cached)."""
        emu = source.code
        assert isinstance(emu, EmulatorSource)
        path = compile_shared(source.text, arch_flags=arch_flags, optimize=EMULATOR_OPTIMIZE)
        sites = [
            [s.function, s.kernel, s.kind.value, s.buffer, s.scope, s.ordinal, s.intrinsic]
            for s in emu.sites
        ]
        meta = {
            "sites": sites,
            "kernels": dict(emu.kernels),
            "racecheck": emu.racecheck,
            "bounds_check": emu.bounds_check,
        }
        return Artifact(
            kind=self.kind,
            target=str(target),
            source=source.text,
            symbols=dict(source.symbols),
            program=program.encode(source.lowered),
            lib_path=str(path),
            meta=meta,
        )

    def load(self, artifact: Artifact) -> EmulatedModule:
        """The :class:`~tilecraft.runtime.EmulatedModule` of the artifact."""
        self.check_artifact(artifact)
        low = program.decode(artifact.program)
        meta = artifact.meta
        try:
            sites = tuple(
                Site(str(f), str(k), SiteKind(kind), str(b), str(sc), int(o), str(i))
                for f, k, kind, b, sc, o, i in meta["sites"]
            )
            emu = EmulatorSource(
                artifact.source,
                dict(low.functions),
                dict(artifact.symbols),
                dict(low.programs),
                sites,
                {str(k): str(v) for k, v in meta["kernels"].items()},
                bool(meta["racecheck"]),
                bool(meta["bounds_check"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise BuildError(f"malformed emulator artifact: {e}") from None
        return EmulatedModule(library_file(artifact), artifact.source, emu, low.originals)

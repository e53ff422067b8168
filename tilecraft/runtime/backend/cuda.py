"""The CUDA backend: the GPU pipeline, CUDA C++, a cubin (NVRTC or nvcc), the CUDA driver."""

from __future__ import annotations

from pathlib import Path

from ...codegen.base import prim_funcs_of
from ...codegen.cuda import CUDASource, emit_cuda
from ...errors import BuildError
from ...ir import IRModule, PrimFunc
from ...ir.transform import FunctionPass
from ...lower.gpu_pipeline import get_gpu_pipeline, lower_gpu
from ...target import Target
from ..cuda import CUDAModule
from ..cuda_compile import compile_cuda_file
from . import program
from .base import Artifact, Backend, Lowered, Source


def lower_for_gpu(func_or_module: PrimFunc | IRModule, target: Target, what: str) -> Lowered:
    """Every PrimFunc through :func:`~tilecraft.lower.gpu_pipeline.lower_gpu`."""
    items = prim_funcs_of(func_or_module, what)
    programs = {name: lower_gpu(f.update(name=name), target) for name, f in items}
    return Lowered(dict(items), {n: p.func for n, p in programs.items()}, programs)


class CUDABackend(Backend):
    """CUDA C++ for NVIDIA GPUs; kernels run on the GPU (no bounds checks there)."""

    kind = "cuda"
    hosts_graph_entries = False
    runner = "cuda"
    needs_gpu_schedule = True

    def pipeline(self, target: Target) -> list[FunctionPass]:
        """:func:`~tilecraft.lower.gpu_pipeline.get_gpu_pipeline` (then the host/device split)."""
        return get_gpu_pipeline(target)

    def lower(self, func_or_module: PrimFunc | IRModule, target: Target) -> Lowered:
        """Lower, split into kernels and host steps, and check each function's resources."""
        return lower_for_gpu(func_or_module, target, "CUDA")

    def emit(self, lowered: Lowered, target: Target) -> Source:
        """CUDA C++ for the lowered programs (:func:`~tilecraft.codegen.cuda.emit_cuda`)."""
        src = emit_cuda(lowered.programs, target)
        return Source(src.text, lowered, {n: n for n in lowered.functions}, src)

    def compile(
        self, source: Source, target: Target, *, arch_flags: tuple[str, ...] | None = None
    ) -> Artifact:
        """A cubin for ``target.arch`` (cached); ``arch_flags`` (host machine options) do not
        apply to device code and are ignored."""
        del arch_flags
        cubin, path = compile_cuda_file(source.text, target.arch)
        return Artifact(
            kind=self.kind,
            target=str(target),
            source=source.text,
            symbols=dict(source.symbols),
            program=program.encode(source.lowered),
            lib_path=None if path is None else str(path),
            lib_bytes=cubin,
        )

    def load(self, artifact: Artifact) -> CUDAModule:
        """The :class:`~tilecraft.runtime.CUDAModule` of the artifact's cubin (no GPU needed
        until a function is called)."""
        self.check_artifact(artifact)
        low = program.decode(artifact.program)
        cubin = artifact.lib_bytes
        if cubin is None:
            if artifact.lib_path is None:
                raise BuildError("the artifact has neither a cubin path nor its bytes")
            cubin = Path(artifact.lib_path).read_bytes()
        source = CUDASource(artifact.source, low.programs)
        lib = CUDAModule(source, cubin, low.originals, Target(artifact.target))
        lib.artifact = artifact
        return lib

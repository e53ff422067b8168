"""The CPU backend: lower for C, emit C, compile a shared library, load it with ctypes."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ... import config
from ...codegen.base import prim_funcs_of
from ...codegen.c import emit_c
from ...errors import BuildError, CodegenError
from ...ir import IRModule, PrimFunc
from ...ir.transform import FunctionPass, Sequential
from ...lower import LOWERED_ATTR
from ...lower.merge_specializations import merge_specializations
from ...lower.pipeline import cpu_pipeline
from ...target import Target
from ..compiler import compile_shared
from ..module import Module
from . import program
from .base import Artifact, Backend, Lowered, Source


class CPUBackend(Backend):
    """C for the CPU (OpenMP, SIMD) through the system C compiler.

    Parameters
    ----------
    emulate_gpu
        Run thread-bound loops as serial loops (the quick ``emulate="serial"`` mode of a GPU
        schedule; also what ``emulate=True`` means on a CPU target).
    bounds_check
        Check every buffer access at run time (see :mod:`tilecraft.runtime.bounds`).
    """

    kind = "c"

    def __init__(self, *, emulate_gpu: bool = False, bounds_check: bool = False) -> None:
        self.emulate_gpu = emulate_gpu
        self.bounds_check = bounds_check

    def pipeline(self, target: Target) -> list[FunctionPass]:
        """:func:`~tilecraft.lower.pipeline.cpu_pipeline` (bounds checks before flattening)."""
        del target
        return cpu_pipeline(emulate_gpu=self.emulate_gpu, bounds_check=self.bounds_check)

    def lower(self, func_or_module: PrimFunc | IRModule, target: Target) -> Lowered:
        """Lower every PrimFunc for the C emitter (one ``"lower"`` Sequential per function).

        Size-specialised variants are then folded into their general function
        (:func:`~tilecraft.lower.merge_specializations.merge_specializations`).
        """
        items = prim_funcs_of(func_or_module, "C")
        lowered = {name: self._lower_one(f.update(name=name), target) for name, f in items}
        functions = merge_specializations(lowered)
        return Lowered({n: f for n, f in items if n in functions}, functions)

    def _lower_one(self, func: PrimFunc, target: Target) -> PrimFunc:
        if func.attrs.get(LOWERED_ATTR):
            if self.bounds_check:
                raise CodegenError(
                    f"C codegen {func.name}: bounds_check=True needs the function before "
                    "lowering; it is already lowered"
                )
            return func
        seq = Sequential(self.pipeline(target), name="lower")
        return seq(func).with_attr(LOWERED_ATTR, True)

    def emit(self, lowered: Lowered, target: Target) -> Source:
        """C for the lowered functions (:func:`~tilecraft.codegen.c.emit_c`)."""
        csrc = emit_c(lowered.functions, target, bounds_check=self.bounds_check)
        return Source(csrc.text, lowered, csrc.symbols, csrc)

    def compile(
        self, source: Source, target: Target, *, arch_flags: tuple[str, ...] | None = None
    ) -> Artifact:
        """A shared library (:func:`~tilecraft.runtime.compiler.compile_shared`, cached).

        ``arch_flags`` name the machine the library is for; None: the machine ``target``
        describes (:func:`machine_flags`).
        """
        flags = machine_flags(target) if arch_flags is None else arch_flags
        path = compile_shared(source.text, arch_flags=flags)
        return Artifact(
            kind=self.kind,
            target=str(target),
            source=source.text,
            symbols=dict(source.symbols),
            program=program.encode(source.lowered),
            lib_path=str(path),
        )

    def load(self, artifact: Artifact) -> Module:
        """The :class:`~tilecraft.runtime.Module` of a C artifact.

        Raises
        ------
        BuildError
            When the artifact was built for a machine whose ISA this one lacks (before any
            of its code runs: it would stop on an illegal instruction).
        """
        self.check_artifact(artifact)
        check_runs_here(artifact.target)
        low = program.decode(artifact.program)
        functions = {n: (low.originals[n], low.functions[n]) for n in low.functions}
        lib = Module(library_file(artifact), artifact.source, functions, dict(artifact.symbols))
        lib.artifact = artifact
        return lib


_HOST_FLAGS = frozenset({"-march=native", "-mprefer-vector-width=512"})


def machine_flags(target: Target) -> tuple[str, ...] | None:
    """The compiler's machine options for ``target``.

    None for the host as it is (the compiler's probed ``-march=native``, dropped where the
    compiler does not take it), else :attr:`~tilecraft.target.Target.arch_flags`: a preset or
    ``-mcpu``/``-mattr`` target is compiled for that machine, whichever machine compiles.

    Raises
    ------
    BuildError
        For a target of another architecture (``aarch64`` on an x86 host): its C is
        generated (:func:`tilecraft.runtime.c_source`) but not compiled here.
    """
    missing = target.missing_host_features()
    if missing and missing[0] == target.arch:
        raise BuildError(
            f"build: {target} is an {target.arch} target and this machine is not: tilecraft "
            "generates its C (tc.runtime.c_source(mod, target)) but cannot compile it here"
        )
    flags = target.arch_flags
    return None if set(flags) <= _HOST_FLAGS else flags


def check_runs_here(target_text: str) -> None:
    """Refuse to load code built for ``target_text`` when this machine lacks its ISA."""
    missing = Target(target_text).missing_host_features()
    if missing:
        raise BuildError(
            f"the library was built for {target_text}, which needs {', '.join(missing)}; this "
            "machine lacks them, so its code cannot run here (build for tc.Target('cpu'), "
            "the host, or a preset it supports)"
        )


def library_file(artifact: Artifact) -> Path:
    """The library to load: the compiled file, or the shipped bytes stored by content.

    A stored file is named by the sha256 of its bytes and used only when it still has them;
    a damaged or truncated one is written again.
    """
    if artifact.lib_bytes is None:
        if artifact.lib_path is None:
            raise BuildError("the artifact has neither a library path nor its bytes")
        return Path(artifact.lib_path)
    folder = config.cache_dir() / "shipped"
    digest = hashlib.sha256(artifact.lib_bytes).hexdigest()
    path = folder / f"{digest}.so"
    if not _holds(path, digest):
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".shipped-", suffix=".so", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(artifact.lib_bytes)
        os.replace(tmp, path)
    return path


def _holds(path: Path, digest: str) -> bool:
    """Whether ``path`` exists with content of sha256 ``digest``."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == digest
    except OSError:
        return False

"""C source of the GPU emulator: the GPU-lowered program, run on the CPU with thread semantics.

Each PrimFunc has been lowered exactly as the CUDA backend lowers it
(:func:`~tilecraft.lower.gpu_pipeline.lower_gpu`: cross-thread reductions, barrier insertion,
vectorization, storage scopes, host/device split, resource check; the emulating backend of
:mod:`tilecraft.runtime.backend` does it); this module only emits. Every kernel becomes a C
*thread body* (:mod:`._kernel`), and every function an exported host function with the
CPU ABI of :mod:`..c` — one argument per parameter of the *lowered* function — which runs the
program's host steps: allocate global temporaries, launch each kernel through the emulator
runtime (:mod:`.runtime`) with its grid and block extents evaluated from the
arguments, free. The runtime and the intrinsics the kernels use
(:mod:`.intrinsics`; the tensor-core ones are registered by
:mod:`.tensor_core`) are added to the unit once.

Options: ``bounds_check`` checks every access against its buffer's flat extent (an
out-of-range access is skipped and reported); ``racecheck`` adds the race checker (shared-memory
conflicts within a barrier phase, uninitialized shared/local reads) and implies
``bounds_check``. The numbered :class:`Site` list of the unit lets the runtime name what a
reported fault touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...ir import Buffer, PrimFunc, Var
from ...lower.gpu_split_host_device import (
    GPUProgram,
    HostAlloc,
    HostFree,
    HostLaunch,
    Kernel,
    dyn_shared_layout,
)
from ...target import Target, as_target
from .._names import C_RESERVED
from ..base import symbol_table
from ..c import CCodegen, _FunctionEmitter, storage_ctype
from . import tensor_core as _tensor_core  # noqa: F401  (registers the intrinsics)
from ._kernel import ThreadEmitter
from ._layout import KernelOptions, Site, SiteKind, SiteTable
from .runtime import RUNTIME

__all__ = ["EmulatorSource", "Site", "SiteKind", "emit_emulator"]


@dataclass(frozen=True)
class EmulatorSource:
    """An emulator unit: C text, the lowered programs and what its reports refer to.

    Attributes
    ----------
    text
        The C translation unit.
    functions
        Function name -> the lowered PrimFunc (its parameters are the exported ABI).
    symbols
        Function name -> exported C symbol.
    programs
        Function name -> the :class:`~tilecraft.lower.gpu_split_host_device.GPUProgram` run.
    sites
        The numbered sites (accesses, barriers, collectives) faults are reported at.
    kernels
        Kernel symbol -> the function it belongs to.
    racecheck, bounds_check
        The checks compiled in.
    """

    text: str
    functions: dict[str, PrimFunc]
    symbols: dict[str, str]
    programs: dict[str, GPUProgram]
    sites: tuple[Site, ...]
    kernels: dict[str, str]
    racecheck: bool
    bounds_check: bool


@dataclass(frozen=True)
class _Emitted:
    """How the host launches an emitted kernel."""

    struct: str  # its argument struct
    info: str  # its tc_emu_kernel descriptor
    extra: tuple[Var, ...]  # scalar arguments beyond the kernel's parameters
    shadowed: tuple[Buffer, ...]  # global buffers given a race-check shadow per launch


class _Unit:
    """Collects the kernels and host functions of one emulator unit."""

    def __init__(self, target: Target, options: KernelOptions) -> None:
        self.cg = CCodegen(target, bounds_check=options.checks)
        self.cg.need("tc_emu_runtime", RUNTIME)
        self.options = options
        self.sites = SiteTable()
        self.count = 0
        self.kernels: dict[int, _Emitted] = {}  # by id(kernel)

    def add_kernel(self, function: str, kernel: Kernel) -> None:
        """Emit ``kernel``'s argument struct, thread body and launch descriptor."""
        k = self.count
        self.count += 1
        struct, body, info = f"tc_emu_args_{k}", f"tc_emu_body_{k}", f"tc_emu_kernel_{k}"
        em = ThreadEmitter(self.cg, kernel, body, function, self.sites, self.options)
        head = em.args_struct(struct)
        text = em.emit_body(struct)
        racecheck = int(self.options.racecheck)
        desc = (
            f'static const tc_emu_kernel {info} = {{"{kernel.name}", {body}, {em.static_smem}, '
            f"{em.stack_bytes}, {int(em.fibers)}, {racecheck}}};\n"
        )
        self.cg.bodies.append(head + "\n" + text + "\n" + desc)
        self.kernels[id(kernel)] = _Emitted(
            struct, info, tuple(em.extra), tuple(em.global_shadowed)
        )

    def add_host(self, program: GPUProgram, symbol: str) -> None:
        """Emit the exported host function running ``program``."""
        em = _HostEmitter(self, program, symbol)
        em.emit_host()
        self.cg.bodies.append(em.out.text())


class _HostEmitter(_FunctionEmitter):
    """Emit ``TC_EXPORT void f(<lowered params>)`` running a program's host steps."""

    def __init__(self, unit: _Unit, program: GPUProgram, symbol: str) -> None:
        super().__init__(unit.cg, program.func, symbol)
        self.unit = unit
        self.program = program

    def emit_host(self) -> None:
        args = self.params(self.func.params)
        self.out.emit(f"TC_EXPORT void {self.symbol}({', '.join(args) or 'void'}) {{")
        self.out.level += 1
        for step in self.program.steps:
            if isinstance(step, HostAlloc):
                self.alloc(step.buffer)
            elif isinstance(step, HostFree):
                self.out.emit(f"free({self.buf(step.buffer)});")
            else:
                self.launch(step)
        self.out.level -= 1
        self.out.emit("}")

    def alloc(self, buf: Buffer) -> None:
        ctype = storage_ctype(buf.dtype)
        size = self.expr(buf.shape[0])
        self.out.emit(
            f"{ctype}* {self.buf(buf)} = ({ctype}*)tc_emu_alloc(sizeof({ctype}) * "
            f"(size_t)({size}));"
        )
        self.out.emit(f"if (!{self.buf(buf)}) tc_emu_error.count += 1;")

    def launch(self, step: HostLaunch) -> None:
        k = step.kernel
        emitted = self.unit.kernels[id(k)]
        struct, info = emitted.struct, emitted.info
        values = []
        for p in (*k.params, *emitted.extra):
            if isinstance(p, Buffer):
                values.append(f"({storage_ctype(p.dtype)}*){self.buf(p)}")
            else:
                values.append(self.expr(p))
        shadows = [f"tc_gs{j}" for j in range(len(emitted.shadowed))]
        values += shadows
        _, dyn = dyn_shared_layout(k.dyn_shared)
        grid = ", ".join(f"(int64_t)({self.expr(e)})" for e in k.grid)
        block = ", ".join(f"(int64_t)({self.expr(e)})" for e in k.block)
        self.out.emit("{")
        self.out.level += 1
        for name, buf in zip(shadows, emitted.shadowed, strict=True):
            self.out.emit(
                f"tc_emu_gshadow* {name} = (tc_emu_gshadow*)calloc((size_t)"
                f"({self.expr(buf.shape[0])}) + 1, sizeof(tc_emu_gshadow));"
            )
            self.out.emit(f"if (!{name}) tc_emu_error.count += 1;")
        self.out.emit(f"const {struct} tc_a = {{{', '.join(values) or '0'}}};")
        self.out.emit(f"const int64_t tc_grid[3] = {{{grid}}};")
        self.out.emit(f"const int64_t tc_dim[3] = {{{block}}};")
        self.out.emit(
            f"tc_emu_launch(&{info}, &tc_a, tc_grid, tc_dim, (int64_t)({self.expr(dyn)}));"
        )
        for name in shadows:
            self.out.emit(f"free({name});")
        self.out.level -= 1
        self.out.emit("}")


def emit_emulator(
    programs: Mapping[str, GPUProgram],
    target: Target | str | None = None,
    *,
    racecheck: bool = False,
    bounds_check: bool = False,
) -> EmulatorSource:
    """Emit the emulator unit of already-lowered GPU programs.

    Parameters
    ----------
    programs
        Function name -> its program lowered exactly as the CUDA backend lowers it
        (:func:`~tilecraft.lower.gpu_pipeline.lower_gpu`; the emulating backend's ``lower``).
    target
        A CUDA target (default: the current target, else ``cuda``).
    racecheck, bounds_check
        Compile the race checker in (implies ``bounds_check``); check every access's bounds.

    Raises
    ------
    CodegenError
        When a program cannot be emitted.
    """
    tgt = as_target(target) if target is not None else (Target.current() or Target("cuda"))
    symbols = symbol_table(programs, C_RESERVED)
    unit = _Unit(tgt, KernelOptions(checks=racecheck or bounds_check, racecheck=racecheck))
    kernels: dict[str, str] = {}
    for name, prog in programs.items():
        for k in prog.kernels:
            unit.add_kernel(name, k)
            kernels[k.name] = name
        unit.add_host(prog, symbols[name])
    return EmulatorSource(
        unit.cg.finish(),
        {name: p.func for name, p in programs.items()},
        symbols,
        dict(programs),
        tuple(unit.sites.sites),
        kernels,
        racecheck,
        racecheck or bounds_check,
    )

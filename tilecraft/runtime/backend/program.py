"""Lowered programs as ``tc.ir`` JSON, so an artifact loads without lowering again.

One document holds, per function, its name, the function as given and the lowered function;
GPU programs add their kernels (name, parameters, body, launch extents, shared buffers) and
host steps. A single :func:`~tilecraft.ir.to_json` call keeps sharing, so a kernel's buffers
stay the lowered function's buffers (launches resolve arguments by identity).
"""

from __future__ import annotations

from typing import Any

from ...errors import BuildError, IRError
from ...ir import PrimFunc, from_json, to_json
from ...lower.gpu_split_host_device import (
    GPUProgram,
    HostAlloc,
    HostFree,
    HostLaunch,
    HostStep,
    Kernel,
)
from .base import Lowered


def _kernel(k: Kernel) -> tuple[Any, ...]:
    return (k.name, k.params, k.body, k.grid, k.block, k.shared, k.dyn_shared)


def _step(s: HostStep, index: dict[int, int]) -> tuple[Any, ...]:
    if isinstance(s, HostAlloc):
        return ("alloc", s.buffer)
    if isinstance(s, HostFree):
        return ("free", s.buffer)
    return ("launch", index[id(s.kernel)])


def encode(lowered: Lowered) -> str:
    """``lowered`` as one JSON document (see :func:`decode`)."""
    items = []
    for name, low in lowered.functions.items():
        prog = lowered.programs.get(name)
        gpu: tuple[Any, ...] = ()
        if prog is not None:
            index = {id(k): i for i, k in enumerate(prog.kernels)}
            gpu = (
                tuple(_kernel(k) for k in prog.kernels),
                tuple(_step(s, index) for s in prog.steps),
            )
        items.append((name, lowered.originals[name], low, gpu))
    return to_json(tuple(items))


def _decode_program(func: PrimFunc, gpu: tuple[Any, ...]) -> GPUProgram:
    raw_kernels, raw_steps = gpu
    kernels = tuple(
        Kernel(name, tuple(params), body, tuple(grid), tuple(block), tuple(sh), tuple(dyn))
        for name, params, body, grid, block, sh, dyn in raw_kernels
    )
    steps: list[HostStep] = []
    for what, value in raw_steps:
        if what == "alloc":
            steps.append(HostAlloc(value))
        elif what == "free":
            steps.append(HostFree(value))
        else:
            steps.append(HostLaunch(kernels[int(value)]))
    return GPUProgram(func, kernels, tuple(steps))


def decode(text: str) -> Lowered:
    """The :class:`Lowered` that :func:`encode` wrote.

    Raises
    ------
    BuildError
        When the document is not a lowered program.
    """
    try:
        items = from_json(text)
        originals, functions, programs = {}, {}, {}
        for name, original, low, gpu in items:
            if not isinstance(original, PrimFunc) or not isinstance(low, PrimFunc):
                raise TypeError("expected PrimFuncs")
            originals[str(name)] = original
            functions[str(name)] = low
            if gpu:
                programs[str(name)] = _decode_program(low, gpu)
    except (IRError, TypeError, ValueError) as e:
        raise BuildError(f"malformed lowered program in an artifact: {e}") from None
    return Lowered(originals, functions, programs)

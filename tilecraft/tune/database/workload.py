"""Workloads, their keys, and tuning records.

A **workload** is one unscheduled PrimFunc (held as ``IRModule({"main": func})``). Its
**key** is what a database matches on:

* ``shash``: the structural hash of the function under the database's module equality;
* ``target``: :func:`target_key` of the target it was tuned for: the kind, the architecture
  and, for CPUs, the ISA features (a record tuned with AVX-512 is not applied on a machine
  without it, and a CUDA record never on the CPU);
* ``equality``: the :class:`ModuleEquality` the hash was computed under;
* ``version``: :data:`FORMAT_VERSION` of the record format.

Module equality modes:

``structural``
    The whole function, alpha-equivalent (names of variables, buffers and the function do
    not matter; shapes, dtypes, block names and the computation do). Function attributes
    that only describe where the function came from (:data:`IGNORED_ATTRS`, such as the
    graph layer's ``op_pattern``) are dropped first, so a function tuned on its own matches
    the same function inside a model.
``ignore-ndarray``
    The structural key with the payload of constant arrays replaced by their shape and
    dtype, so models that differ only in baked-in weights share records. tilecraft PrimFuncs
    hold no constant arrays today (constants are scalar immediates, which stay in the key),
    so this hash equals the structural one; the mode is still part of the key, so records
    made under one mode are only applied by a database opened in the same mode.
``anchor-block``
    The hash of the function's anchor block alone (:func:`anchor_block`): its iterators
    (kinds and domains), the regions it reads and writes (buffer shapes and dtypes), its init
    and body, and its name. Fused variants of one computation (a matmul alone, with a bias,
    with a ReLU) share records. A shared record's trace may touch blocks the other variant
    lacks; applying then tries the next-best record (:meth:`Database.lookup`) and reports
    why each failed. A function without blocks falls back to its structural hash.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field

from ...errors import TilecraftError, TuneError
from ...ir import Block, IntImm, IRModule, IterKind, Node, PrimFunc, post_order_visit
from ...ir import structural_hash as ir_structural_hash
from ...schedule import Trace
from ...target import Target, as_target
from ..arg_info import ArgInfo

FORMAT_VERSION = 1
"""Version of the workload/record format; part of every workload key."""

LIBRARY_RECORD_VERSION = 2
"""Format version of a library record's line (a record of format version 1 is a schedule):
a reader of version 1 alone skips these lines instead of replaying their empty trace."""

LIBRARY_EXTRA = "dispatch"
"""The ``extra`` key that makes a record a library record: its value names the library."""

IGNORED_ATTRS = frozenset(
    {
        "op_pattern",
        "tc.scheduled",
        "tc.tuned",
        "tc.schedule_rule",
        "tc.record",
        # a size variant (``SpecializeShapes``) is the same workload as the function written
        # at that size: records tuned on either apply to both
        "tc.specialization_of",
        "tc.specializations",
    }
)
"""Function attributes that do not change what a function computes or how it compiles."""


class ModuleEquality(enum.Enum):
    """How a database decides that two functions are the same workload."""

    STRUCTURAL = "structural"
    IGNORE_NDARRAY = "ignore-ndarray"
    ANCHOR_BLOCK = "anchor-block"

    @staticmethod
    def parse(value: ModuleEquality | str) -> ModuleEquality:
        """``ModuleEquality("anchor-block")`` with a TuneError naming the choices."""
        if isinstance(value, ModuleEquality):
            return value
        for mode in ModuleEquality:
            if mode.value == value:
                return mode
        choices = [m.value for m in ModuleEquality]
        raise TuneError(f"module_equality: expected one of {choices}, got {value!r}")


def as_prim_func(mod: IRModule | PrimFunc, workload_name: str = "main") -> PrimFunc:
    """The PrimFunc ``mod`` names (``mod`` itself when it is one)."""
    if isinstance(mod, PrimFunc):
        return mod
    if not isinstance(mod, IRModule):
        raise TuneError(f"expected a PrimFunc or IRModule, got {type(mod).__name__}")
    if workload_name in mod and isinstance(mod[workload_name], PrimFunc):
        func = mod[workload_name]
        assert isinstance(func, PrimFunc)
        return func
    funcs = mod.prim_funcs()
    if len(funcs) == 1:
        return funcs[0][1]
    raise TuneError(
        f"the module has no PrimFunc {workload_name!r} and {len(funcs)} others; name one "
        f"with workload_name= (functions: {[n for n, _ in funcs]})"
    )


def canonical_func(func: PrimFunc) -> PrimFunc:
    """``func`` named ``main`` without :data:`IGNORED_ATTRS`: the form a workload stores."""
    kept = {k: v for k, v in func.attrs.items() if k not in IGNORED_ATTRS}
    if len(kept) != len(func.attrs):
        func = func.update(attrs=kept)
    return func.update(name="main")


def _blocks(func: PrimFunc) -> list[Block]:
    found: list[Block] = []

    def visit(node: Node) -> None:
        if isinstance(node, Block):
            found.append(node)

    post_order_visit(func.body, visit)
    # post-order lists a block after the blocks nested in it; the root comes last
    return [b for b in found if b.iter_vars]


def _volume(block: Block) -> float:
    volume = 1.0
    for iv in block.iter_vars:
        extent = iv.dom.extent
        volume *= extent.value if isinstance(extent, IntImm) else math.inf
    return volume


def anchor_block(func: PrimFunc) -> Block | None:
    """The block that stands for ``func`` under ``anchor-block`` equality.

    The largest reduction block (by iteration-domain volume, a symbolic extent counting as
    unbounded); without reductions, the largest block; ties go to the first in program
    order. None when the function has no block with iterators.
    """
    blocks = _blocks(func)
    reductions = [b for b in blocks if any(iv.kind is IterKind.REDUCE for iv in b.iter_vars)]
    pool = reductions or blocks
    if not pool:
        return None
    # post-order lists sibling blocks in program order, so a lower index is earlier
    order = {id(b): i for i, b in enumerate(blocks)}
    return max(pool, key=lambda b: (_volume(b), -order[id(b)]))


def workload_hash(func: PrimFunc, equality: ModuleEquality) -> str:
    """The ``shash`` of ``func`` under ``equality`` (see the module docstring)."""
    canon = canonical_func(func)
    if equality is ModuleEquality.ANCHOR_BLOCK:
        block = anchor_block(canon)
        if block is not None:
            return ir_structural_hash(block)
    return ir_structural_hash(canon)


def target_key(target: Target | str | None) -> str:
    """The target part of a workload key, e.g. ``"cpu x86_64 avx,avx2,fma"``."""
    tgt = as_target(target)
    if tgt.is_gpu:
        return f"cuda {tgt.arch}"
    return f"cpu {tgt.arch} {','.join(tgt.features) or '-'}"


_ISA_OPTIONS = ("-mcpu=", "-mattr=", "-march=")


@functools.lru_cache(maxsize=256)
def target_conflict(measured_on: str, key_target: str) -> str | None:
    """Why a record measured on ``measured_on`` cannot serve a workload keyed ``key_target``.

    None when it can. The kinds must agree (a CPU record never serves a CUDA workload, nor the
    reverse) and so must a CUDA architecture. A CPU record whose target names its ISA
    (``-mcpu``, ``-mattr``) must have the key's :func:`target_key`; a bare ``"cpu"`` means
    "the host it was measured on", which is what the workload key records.
    """
    try:
        measured = as_target(measured_on)
    except TilecraftError as e:
        return f"its target {measured_on!r} is not a target ({e})"
    kind, _, rest = key_target.partition(" ")
    arch = rest.split(" ", 1)[0]
    names_isa = any(w.startswith(_ISA_OPTIONS) for w in measured_on.split()[1:])
    if (
        measured.kind != kind
        or (measured.is_gpu and measured.arch != arch)
        or (not measured.is_gpu and names_isa and target_key(measured) != key_target)
    ):
        return (
            f"it was measured on {measured_on!r} ({target_key(measured)}) but its workload "
            f"is for {key_target!r}"
        )
    return None


@dataclass(frozen=True)
class WorkloadKey:
    """What a database matches a function on (see the module docstring)."""

    shash: str
    target: str
    equality: ModuleEquality
    version: int = FORMAT_VERSION

    @property
    def id(self) -> str:
        """A short stable digest of the key: how records refer to their workload."""
        text = json.dumps([self.shash, self.target, self.equality.value, self.version])
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    @staticmethod
    def of(
        mod: IRModule | PrimFunc,
        target: Target | str | None,
        equality: ModuleEquality | str = ModuleEquality.STRUCTURAL,
        workload_name: str = "main",
    ) -> WorkloadKey:
        """The key of ``mod``'s function for ``target`` under ``equality``."""
        mode = ModuleEquality.parse(equality)
        func = as_prim_func(mod, workload_name)
        return WorkloadKey(workload_hash(func, mode), target_key(target), mode)


@dataclass(frozen=True, eq=False)
class Workload:
    """A tuned function (``mod["main"]``) and its key."""

    key: WorkloadKey
    mod: IRModule

    @property
    def func(self) -> PrimFunc:
        """The workload's function."""
        return as_prim_func(self.mod)

    def __repr__(self) -> str:
        k = self.key
        return f"Workload({k.shash[:12]}, {k.target!r}, {k.equality.value})"

    @staticmethod
    def create(
        mod: IRModule | PrimFunc,
        target: Target | str | None,
        equality: ModuleEquality | str = ModuleEquality.STRUCTURAL,
        workload_name: str = "main",
    ) -> Workload:
        """The workload of ``mod``'s function (stored in canonical form)."""
        func = canonical_func(as_prim_func(mod, workload_name))
        key = WorkloadKey.of(func, target, equality)
        return Workload(key, IRModule({"main": func}))


@dataclass(frozen=True, eq=False)
class TuningRecord:
    """One measured (or failed) candidate of a workload.

    Attributes
    ----------
    workload
        The workload the trace was recorded on.
    trace
        Replaying it on a fresh schedule of the workload's function gives the candidate.
    run_secs
        Seconds per call of each repeat, or None when the candidate failed.
    error
        Why the candidate failed (None on success).
    target
        The target string it was measured on (``str(Target)``).
    args_info
        The arguments it was measured with.
    func_hash
        Structural hash of the scheduled function (to skip repeated candidates), if known.
    """

    workload: Workload
    trace: Trace
    run_secs: tuple[float, ...] | None
    target: str
    args_info: tuple[ArgInfo, ...] = ()
    error: str | None = None
    func_hash: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def __repr__(self) -> str:
        outcome = f"{self.mean_secs * 1e3:.4g} ms" if self.ok else f"failed: {self.error}"
        return f"TuningRecord({self.workload!r}, {len(self.trace)} instructions, {outcome})"

    @property
    def library(self) -> str | None:
        """The library a *library record* measured (``"blas"``), None for a schedule's record.

        A library record times what ``DispatchLibrary`` would run for the workload (the
        library call and our epilogue); its trace is empty and is never replayed.
        """
        value = self.extra.get(LIBRARY_EXTRA)
        return value if isinstance(value, str) else None

    @property
    def ok(self) -> bool:
        """True when the candidate ran and has run times."""
        return self.run_secs is not None and self.error is None and len(self.run_secs) > 0

    @property
    def mean_secs(self) -> float:
        """Mean of :attr:`run_secs` (infinity for a failed record)."""
        if not self.ok or self.run_secs is None:
            return math.inf
        return sum(self.run_secs) / len(self.run_secs)

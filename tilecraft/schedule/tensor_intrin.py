"""The tensor intrinsic registry: what a hardware operation computes and how to call it.

A :class:`TensorIntrin` pairs two PrimFuncs over the same buffer parameters (same shapes,
dtypes and storage scopes, in the same order):

- the **description** states the computation as ordinary IR: a root block whose ``reads`` /
  ``writes`` cover every parameter, holding a loop nest around one block (for example the
  16x8x16 multiply-accumulate ``C[i, j] += A[i, k] * B[k, j]``);
- the **implementation** performs it with device intrinsics (:mod:`tilecraft.ir.device_intrin`),
  its root block's body addressing the parameters from their first element
  (``T.evaluate(T.mma_sync_m16n8k16(C[0, 0], A[0, 0], B[0, 0]))``).

:meth:`~tilecraft.schedule.Schedule.tensorize` matches a block's body against a description
and substitutes the implementation. Built-in CUDA intrinsics are registered by
:mod:`tilecraft.schedule.tensor_intrin_cuda`, imported the first time the registry is used
(parsing them costs tens of milliseconds, too much for ``import tilecraft``); users add
their own with :func:`register_tensor_intrin`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ScheduleError
from ..ir import Block, BlockRealize, Buffer, PrimFunc, post_order_visit
from ..ir.node import Node


def _fail(name: str, short: str, requires: str) -> ScheduleError:
    return ScheduleError(
        "register_tensor_intrin", f'intrinsic "{name}": {short}', requires=requires
    )


def _root(func: PrimFunc) -> Block | None:
    body = func.body
    if isinstance(body, BlockRealize) and not body.block.iter_vars:
        return body.block
    return None


def _buffers(func: PrimFunc) -> list[Buffer]:
    return [p for p in func.params if isinstance(p, Buffer)]


@dataclass(frozen=True)
class TensorIntrin:
    """A registered tensor intrinsic (see the module docstring).

    Attributes
    ----------
    name
        Registry key (``"mma_m16n8k16_f16f16f32"``).
    desc
        The description PrimFunc.
    impl
        The implementation PrimFunc.
    """

    name: str
    desc: PrimFunc
    impl: PrimFunc

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(self.desc, PrimFunc) or not isinstance(self.impl, PrimFunc):
            raise _fail(name, "desc and impl must be PrimFuncs", "two PrimFuncs")
        d_bufs, i_bufs = _buffers(self.desc), _buffers(self.impl)
        if len(d_bufs) != len(self.desc.params) or len(i_bufs) != len(self.impl.params):
            raise _fail(name, "scalar parameters are not supported", "buffer parameters only")
        if len(d_bufs) != len(i_bufs):
            raise _fail(
                name,
                f"desc has {len(d_bufs)} buffers, impl {len(i_bufs)}",
                "desc and impl take the same buffers in the same order",
            )
        for d, i in zip(d_bufs, i_bufs, strict=True):
            if d.static_shape() is None or d.static_shape() != i.static_shape():
                raise _fail(name, f"buffer {d.name}: shapes differ or are symbolic", "equal shapes")
            if d.dtype != i.dtype or d.scope != i.scope:
                raise _fail(name, f"buffer {d.name}: dtype or scope differ", "equal dtypes, scopes")
        d_root, i_root = _root(self.desc), _root(self.impl)
        if d_root is None or i_root is None:
            raise _fail(name, "desc and impl need a root block", "a root block without iterators")
        covered = {id(r.buffer) for r in (*d_root.reads, *d_root.writes)}
        if any(id(b) not in covered for b in d_bufs):
            raise _fail(
                name, "the desc root block does not declare every buffer", "reads/writes of all"
            )
        inner: list[Node] = []
        post_order_visit(
            i_root.body, lambda n: inner.append(n) if isinstance(n, BlockRealize) else None
        )
        if inner:
            raise _fail(name, "the impl body holds blocks", "an impl body of plain statements")


_REGISTRY: dict[str, TensorIntrin] = {}
_builtins_loaded = False


def _ensure_builtins() -> None:
    """Register the built-in intrinsics once, on first use of the registry."""
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        from . import tensor_intrin_cuda  # registers on import  # noqa: F401


def register_tensor_intrin(
    name: str, desc: PrimFunc, impl: PrimFunc, *, override: bool = False
) -> TensorIntrin:
    """Register a tensor intrinsic under ``name``.

    Parameters
    ----------
    name
        Registry key used by ``Schedule.tensorize``.
    desc, impl
        Description and implementation PrimFuncs (see the module docstring).
    override
        Replace an intrinsic already registered under ``name``.

    Raises
    ------
    ScheduleError
        When the pair is malformed or the name is taken (without ``override``).
    """
    _ensure_builtins()
    if not isinstance(name, str) or not name:
        raise ScheduleError("register_tensor_intrin", f"name must be a non-empty str, got {name!r}")
    if name in _REGISTRY and not override:
        raise _fail(name, "already registered", "a new name, or override=True")
    intrin = TensorIntrin(name, desc, impl)
    _REGISTRY[name] = intrin
    return intrin


def get_tensor_intrin(name: str) -> TensorIntrin:
    """The intrinsic registered under ``name``; ScheduleError when there is none."""
    _ensure_builtins()
    got = _REGISTRY.get(name) if isinstance(name, str) else None
    if got is None:
        raise ScheduleError(
            "tensorize",
            f"no tensor intrinsic named {name!r}",
            requires="a registered intrinsic",
            hint=f"registered: {sorted(_REGISTRY)}",
        )
    return got


def list_tensor_intrins() -> list[str]:
    """Names of every registered tensor intrinsic, sorted."""
    _ensure_builtins()
    return sorted(_REGISTRY)

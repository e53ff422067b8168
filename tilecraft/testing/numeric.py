"""``check_numeric``: run a PrimFunc on random inputs and compare with numpy or another PrimFunc.

Inputs are the buffer parameters the function does not write; outputs are the ones it writes
(see :func:`tilecraft.runtime.written_params`). Floats are drawn uniformly from [-1, 1),
integers from [0, 8); outputs start as NaN (floats) so unwritten elements are caught.
``bfloat16`` buffers hold uint16 bit patterns; references see them as float32 values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..ir import Buffer, DataType, For, ForKind, Node, PrimFunc, Var, post_order_visit
from ..runtime import build, written_params
from ..runtime.arguments import eval_shape_expr
from ..runtime.backend import emulation_target
from ..runtime.emulate import EmulateArg, EmulateMode, emulate_mode
from ..target import Target

Reference = Callable[..., Any] | PrimFunc

DEFAULT_TOLERANCES = {
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
    "float32": (1e-5, 1e-5),
    "float64": (1e-10, 1e-10),
}


def _is_bf16(dt: DataType) -> bool:
    return dt.code.value == "bfloat"


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """Decode bfloat16 bit patterns (uint16) to float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Encode float32 values as bfloat16 bit patterns (round to nearest even)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def _shape(buf: Buffer, env: dict[int, int]) -> tuple[int, ...]:
    out = []
    for extent in buf.shape:
        value = eval_shape_expr(extent, env)
        if value is None:
            missing = [v.name for v in buf.shape_vars() if id(v) not in env]
            raise ValueError(
                f"check_numeric: buffer {buf.name!r} has a symbolic shape; give shape_vars= "
                f"values for {missing or 'its extents'}"
            )
        out.append(value)
    return tuple(out)


def _random(buf: Buffer, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    dt = buf.dtype
    if dt.is_bool:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.is_integer:
        return rng.integers(0, 8, size=shape).astype(dt.numpy_name())
    values = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    if _is_bf16(dt):
        return f32_to_bf16(values)
    return values.astype(dt.numpy_name())


def _empty_output(buf: Buffer, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    dt = buf.dtype
    if _is_bf16(dt):
        return np.full(shape, 0x7FC0, dtype=np.uint16)  # NaN
    if dt.is_float:
        return np.full(shape, np.nan, dtype=dt.numpy_name())
    return _random(buf, shape, rng)


def _as_values(buf: Buffer, arr: np.ndarray) -> np.ndarray:
    """What a numpy reference sees: bfloat16 decoded to float32, everything else as is."""
    return bf16_to_f32(arr) if _is_bf16(buf.dtype) else arr


class _Case:
    """Arguments for one run: inputs, fresh outputs, scalar parameters."""

    def __init__(
        self,
        func: PrimFunc,
        inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray] | None,
        shape_vars: Mapping[str, int] | None,
        seed: int,
        strict: bool = True,
    ) -> None:
        self.func = func
        self.outputs = written_params(func)
        out_ids = {id(b) for b in self.outputs}
        self.inputs = [b for b in func.buffer_params if id(b) not in out_ids]
        rng = np.random.default_rng(seed)
        env = self._bind_vars(shape_vars or {}, strict)
        given = self._given(inputs)
        self.values: dict[int, np.ndarray] = {}
        for buf in self.inputs:
            arr = given.get(buf.name)
            if arr is not None:
                for extent, got in zip(buf.shape, arr.shape, strict=False):
                    if isinstance(extent, Var):
                        env.setdefault(id(extent), int(got))
            self.values[id(buf)] = arr if arr is not None else _random(buf, _shape(buf, env), rng)
        self.env = env
        self.out_shapes = {id(b): _shape(b, env) for b in self.outputs}
        self.rng = rng

    def _bind_vars(self, shape_vars: Mapping[str, int], strict: bool) -> dict[int, int]:
        env: dict[int, int] = {}
        known = {}
        for p in self.func.params:
            for v in [p] if isinstance(p, Var) else p.shape_vars():
                known[v.name] = v
        for name, value in shape_vars.items():
            if name not in known:
                if not strict:
                    continue
                raise ValueError(
                    f"check_numeric: shape_vars names {name!r}, but the function's variables "
                    f"are {sorted(known)}"
                )
            env[id(known[name])] = int(value)
        return env

    def _given(
        self, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray] | None
    ) -> dict[str, np.ndarray]:
        if inputs is None:
            return {}
        if isinstance(inputs, Mapping):
            return {k: np.asarray(v) for k, v in inputs.items()}
        if len(inputs) != len(self.inputs):
            names = [b.name for b in self.inputs]
            raise ValueError(
                f"check_numeric: expected {len(names)} inputs {names}, got {len(inputs)}"
            )
        return {b.name: np.asarray(a) for b, a in zip(self.inputs, inputs, strict=True)}

    def args(self) -> tuple[list[Any], list[np.ndarray]]:
        """Call arguments (fresh outputs each time) and the output arrays."""
        outs = {id(b): _empty_output(b, self.out_shapes[id(b)], self.rng) for b in self.outputs}
        args: list[Any] = []
        for p in self.func.params:
            if isinstance(p, Var):
                args.append(self.env[id(p)])
            elif id(p) in outs:
                args.append(outs[id(p)])
            else:
                args.append(self.values[id(p)].copy())
        return args, [outs[id(b)] for b in self.outputs]


def _thread_bound(func: PrimFunc) -> bool:
    """True when ``func`` has a loop bound to a thread index (a GPU schedule)."""
    found = False

    def fn(n: Node) -> None:
        nonlocal found
        found = found or (isinstance(n, For) and n.kind is ForKind.THREAD_BINDING)

    post_order_visit(func.body, fn)
    return found


def _build_args(func: PrimFunc, target: str | Target, mode: EmulateMode) -> dict[str, Any]:
    """How ``check_numeric`` builds ``func`` (see its ``emulate_gpu`` parameter)."""
    if not mode.truthful:
        return {"target": target, "emulate": mode}
    if not _thread_bound(func):
        return {"target": "cpu", "emulate": False}
    return {"target": emulation_target(target), "emulate": mode}


def _run_reference(reference: Reference, case: _Case, mode: EmulateMode) -> list[np.ndarray]:
    if isinstance(reference, PrimFunc):
        given = [case.values[id(b)] for b in case.inputs]
        named = {v.name: val for v, val in _named_env(case)}
        ref_case = _Case(reference, given, named, 0, strict=False)
        args, outs = ref_case.args()
        build(reference, **_build_args(reference, "cpu", mode))[reference.name](*args)
        return [_as_values(b, o) for b, o in zip(ref_case.outputs, outs, strict=True)]
    values = [_as_values(b, case.values[id(b)]) for b in case.inputs]
    result = reference(*values)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    return [np.asarray(r) for r in results]


def _named_env(case: _Case) -> list[tuple[Var, int]]:
    out = []
    for p in case.func.params:
        for v in [p] if isinstance(p, Var) else p.shape_vars():
            if id(v) in case.env:
                out.append((v, case.env[id(v)]))
    return out


def _compare(name: str, got: np.ndarray, want: np.ndarray, dt: DataType, rtol: float | None,
             atol: float | None) -> None:  # fmt: skip
    if got.shape != want.shape:
        raise AssertionError(f"output {name!r}: shape {got.shape}, reference has {want.shape}")
    if not dt.is_float:
        bad = np.argwhere(got != want)
        if bad.size:
            idx = tuple(int(i) for i in bad[0])
            raise AssertionError(
                f"output {name!r}: {len(bad)} of {got.size} elements differ; first at {idx}: "
                f"got {got[idx]}, expected {want[idx]}"
            )
        return
    d_rtol, d_atol = DEFAULT_TOLERANCES.get(str(dt), (1e-5, 1e-5))
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    g, w = got.astype(np.float64), want.astype(np.float64)
    scale = max(1.0, float(np.nanmax(np.abs(w)))) if w.size and not np.isnan(w).all() else 1.0
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, judged by the NaN rules below
        err = np.abs(g - w)
    nan_mismatch = np.isnan(g) != np.isnan(w)
    tol = atol * scale + rtol * np.abs(w)
    bad = nan_mismatch | (err > tol) & ~(np.isnan(g) & np.isnan(w))
    if not bad.any():
        return
    worst_err = np.where(np.isnan(err), np.inf, err)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(worst_err)), g.shape))
    rel = worst_err[idx] / max(abs(w[idx]), 1e-30) if np.isfinite(worst_err[idx]) else np.inf
    raise AssertionError(
        f"output {name!r} ({dt}): {int(bad.sum())} of {g.size} elements out of tolerance "
        f"(rtol={rtol}, atol={atol} x {scale:.3g}); max abs error {worst_err[idx]:.3g} at {idx}: "
        f"got {g[idx]!r}, expected {w[idx]!r}; relative error there {rel:.3g}"
    )


def check_numeric(
    func: PrimFunc,
    reference: Reference,
    *,
    inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    shape_vars: Mapping[str, int] | None = None,
    emulate_gpu: EmulateArg = False,
    target: str | Target = "cpu",
) -> list[np.ndarray]:
    """Build ``func``, run it on random inputs and compare its outputs with ``reference``.

    Parameters
    ----------
    func
        The function under test.
    reference
        A numpy function taking the input arrays (in parameter order) and returning the
        output array(s), or a PrimFunc with the same inputs and outputs, run the same way.
    inputs
        Input arrays (in order, or by buffer name) instead of random ones.
    rtol, atol
        Tolerances (default per dtype: float32 1e-5, float16 1e-2, bfloat16 2e-2);
        ``atol`` is scaled by ``max(1, max |reference|)``.
    seed
        Seed of the random inputs.
    shape_vars
        Values of symbolic extents, by variable name: ``{"n": 7}``.
    emulate_gpu
        How GPU-scheduled functions (the one under test, and a PrimFunc reference) run
        without a GPU. ``True``: the GPU-lowered program runs in the emulator with real
        thread semantics (:func:`tilecraft.build` with ``emulate=True``), for ``target`` when
        it is a CUDA target, else for ``Target("cuda")``; ``"racecheck"``: the same, raising
        :class:`~tilecraft.errors.RaceCheckError` on a race, an uninitialized read or an
        out-of-bounds access; ``"serial"``: thread-bound loops run as serial loops (the quick
        mode: the schedule's serial meaning only). In these modes a function without
        thread-bound loops runs on the CPU. ``False``: ``func`` is built for ``target`` as is.
    target
        Build target (a PrimFunc reference runs on the CPU unless it is GPU-scheduled and
        ``emulate_gpu`` is True or ``"racecheck"``).

    Returns
    -------
    list of numpy.ndarray
        The outputs of ``func`` (bfloat16 decoded to float32).

    Raises
    ------
    AssertionError
        With the max abs/rel error and the worst element's index on mismatch.
    """
    mode = emulate_mode(emulate_gpu, "check_numeric")
    case = _Case(func, inputs, shape_vars, seed)
    args, outs = case.args()
    build(func, **_build_args(func, target, mode))[func.name](*args)
    got = [_as_values(b, o) for b, o in zip(case.outputs, outs, strict=True)]
    want = _run_reference(reference, case, mode)
    if len(want) != len(got):
        raise AssertionError(
            f"check_numeric: {func.name} has {len(got)} outputs "
            f"({[b.name for b in case.outputs]}), the reference returned {len(want)}"
        )
    for buf, g, w in zip(case.outputs, got, want, strict=True):
        _compare(buf.name, g, np.asarray(w), buf.dtype, rtol, atol)
    return got

"""Measuring one candidate (what a runner worker or a Ray measurement task runs).

Inputs are made from the argument info with a seeded generator, the way
:func:`tilecraft.testing.check_numeric` makes them: floats uniform in [-1, 1), integers in
[0, 8), booleans 0/1, ``bfloat16`` as bit patterns; outputs start as NaN (floats) so an element
a candidate forgets to write is caught. With a reference, the unscheduled function runs on
the same inputs (once per worker and reference) and every output of the candidate must match
it within tolerance; a mismatch is the candidate's error ("wrong result: ..."). Timing
follows :class:`~tilecraft.tune.runner.EvaluatorConfig`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...ir import IRModule, PrimFunc, from_json
from ...runtime.backend import backend_for_artifact, load_artifact
from ...runtime.compiler import adopt_flag_probe
from ...target import Target
from ..arg_info import ArgInfo, ArgRole
from ..builder.base import BuildArtifact
from .base import EvaluatorConfig

TOLERANCES = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-3, "float64": 1e-8}
"""Default rtol (and atol, scaled by ``max(1, max |reference|)``) per float dtype. Looser than
``check_numeric``: candidates reorder reductions, which moves float32 sums by more than 1e-5."""

_CACHE_LIMIT = 8
_inputs: dict[str, list[np.ndarray]] = {}
_reference_outputs: dict[str, list[np.ndarray]] = {}
_flush_buffer: list[np.ndarray] = []


def _remember(cache: dict[str, list[np.ndarray]], key: str, value: list[np.ndarray]) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _random(info: ArgInfo, rng: np.random.Generator) -> np.ndarray:
    if info.dtype == "bool":
        return rng.integers(0, 2, size=info.shape).astype(bool)
    if info.dtype.startswith(("int", "uint")):
        return rng.integers(0, 8, size=info.shape).astype(info.dtype)
    values = rng.uniform(-1.0, 1.0, size=info.shape).astype(np.float32)
    if info.dtype == "bfloat16":
        bits = values.view(np.uint32).astype(np.uint64)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return values.astype(info.dtype)


def _blank(info: ArgInfo) -> np.ndarray:
    if info.dtype == "bfloat16":
        return np.full(info.shape, 0x7FC0, dtype=np.uint16)
    if info.dtype.startswith("float"):
        return np.full(info.shape, np.nan, dtype=info.dtype)
    return np.zeros(info.shape, dtype="bool" if info.dtype == "bool" else info.dtype)


def make_args(args: Sequence[ArgInfo], seed: int) -> list[np.ndarray]:
    """Fresh call arguments: the seeded inputs (copied) and blank outputs."""
    key = f"{seed}:{[a.as_dict() for a in args]}"
    inputs = _inputs.get(key)
    if inputs is None:
        rng = np.random.default_rng(seed)
        inputs = [_random(a, rng) for a in args if a.role is ArgRole.INPUT]
        _remember(_inputs, key, inputs)
    it = iter(inputs)
    return [next(it).copy() if a.role is ArgRole.INPUT else _blank(a) for a in args]


def _values(info: ArgInfo, arr: np.ndarray) -> np.ndarray:
    if info.dtype == "bfloat16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64) if info.dtype.startswith("float") else arr


def compare(
    info: ArgInfo, got: np.ndarray, want: np.ndarray, rtol: float | None, atol: float | None
) -> str | None:
    """Why ``got`` does not match ``want`` (None when it does)."""
    g, w = _values(info, got), _values(info, want)
    if not info.dtype.startswith(("float", "bfloat")):
        bad = int(np.count_nonzero(g != w))
        return f"output {info.name!r}: {bad} of {g.size} elements differ" if bad else None
    tol = TOLERANCES.get(info.dtype, 1e-3)
    rtol = tol if rtol is None else rtol
    atol = tol if atol is None else atol
    finite = w[np.isfinite(w)]
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    err = np.abs(g - w)
    bad = (np.isnan(g) != np.isnan(w)) | (err > atol * scale + rtol * np.abs(w))
    count = int(np.count_nonzero(bad))
    if not count:
        return None
    worst = np.where(np.isnan(err), np.inf, err)
    idx = np.unravel_index(int(np.argmax(worst)), g.shape)
    return (
        f"output {info.name!r}: {count} of {g.size} elements out of tolerance (rtol={rtol}, "
        f"atol={atol} x {scale:.3g}); worst at {tuple(int(i) for i in idx)}: got {g[idx]!r}, "
        f"expected {w[idx]!r}"
    )


def load(art: BuildArtifact) -> Any:
    """The callable function of a built candidate: its backend loads the artifact as built
    (a runtime Function or CUDAFunction; nothing is lowered or emitted again)."""
    return load_artifact(art)[art.name]  # type: ignore[index]


def reference_outputs(ref: Mapping[str, str], args: Sequence[ArgInfo], seed: int) -> list[Any]:
    """The unscheduled function's outputs on the seeded inputs (cached per worker).

    It is built for this CPU, as ``tc.build`` builds it.
    """
    key = f"{ref['key']}:{seed}"
    outs = _reference_outputs.get(key)
    if outs is None:
        from ..builder._compile import build_artifact

        func = from_json(ref["mod"])
        assert isinstance(func, PrimFunc)
        mod = IRModule({"main": func.update(name="main")})
        art = build_artifact(mod, Target("cpu"))
        call = make_args(args, seed)
        load(art)(*call)
        outs = [a for a, info in zip(call, args, strict=True) if info.role is ArgRole.OUTPUT]
        _remember(_reference_outputs, key, outs)
    return outs


def _flush_cache() -> None:
    if not _flush_buffer:
        _flush_buffer.append(np.zeros(_last_level_cache_bytes() * 2 // 8, dtype=np.float64))
    _flush_buffer[0] += 1.0


def _last_level_cache_bytes() -> int:
    best = 32 * 2**20
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        if text and text[-1] in units and text[:-1].isdigit():
            best = max(best, int(text[:-1]) * units[text[-1]])
    return best


def time_calls(run: Callable[[], None], cfg: EvaluatorConfig) -> list[float]:
    """Seconds per call of each repeat of ``run`` on ``cfg.clock`` (elapsed, or this thread's
    CPU time)."""
    clock = time.thread_time if cfg.clock == "thread" else time.perf_counter
    for _ in range(cfg.warmup):
        run()
    n = cfg.number
    results: list[float] = []
    for r in range(cfg.repeat):
        if r and cfg.cooldown_s:
            time.sleep(cfg.cooldown_s)
        while True:
            if cfg.cache_flush:
                _flush_cache()
            start = clock()
            for _ in range(n):
                run()
            elapsed = clock() - start
            if elapsed * 1e3 >= cfg.min_repeat_ms or n >= 1 << 30:
                break
            n = max(n * 2, int(n * cfg.min_repeat_ms / max(elapsed * 1e3, 1e-3)) + 1)
        results.append(elapsed / n)
    return results


def _time_cuda(fn: Any, call: list[np.ndarray], cfg: EvaluatorConfig) -> list[float]:
    """Seconds per call of each repeat, timed with CUDA events on device-resident arguments."""
    from ...runtime import DeviceArray

    device = [DeviceArray.from_numpy(a) for a in call]
    for _ in range(cfg.warmup):
        fn(*device)
    results: list[float] = []
    for r in range(cfg.repeat):
        if r and cfg.cooldown_s:
            time.sleep(cfg.cooldown_s)
        results.extend(fn.time(tuple(device), cfg.number, 1).results)
    return results


def handle_run(msg: dict[str, Any]) -> dict[str, Any]:
    """Worker side of a run request (see :func:`tilecraft.tune.runner.base.run_request`)."""
    art = BuildArtifact.from_message(msg["artifact"])
    args = [ArgInfo.from_dict(a) for a in msg["args"]]
    cfg = EvaluatorConfig.from_dict(msg["config"])
    check = msg["check"]
    seed = int(check.get("seed", 0))
    checking = msg.get("reference") is not None and check.get("enabled", True)
    # the reference first: a reply then means the worker holds it (see WorkerPool warmup_s)
    adopt_flag_probe(msg.get("probe"))
    want = reference_outputs(msg["reference"], args, seed) if checking else None
    fn = load(art)
    call = make_args(args, seed)
    if want is not None:
        fn(*call)
        outs = [
            (info, a) for info, a in zip(args, call, strict=True) if info.role is ArgRole.OUTPUT
        ]
        for (info, got), expected in zip(outs, want, strict=True):
            why = compare(info, got, expected, check.get("rtol"), check.get("atol"))
            if why is not None:
                return {"ok": False, "error": f"wrong result: {why}"}
    if backend_for_artifact(art).runner == "cuda":  # device-resident arguments, CUDA events
        secs = _time_cuda(fn, call, cfg)
    else:
        secs = time_calls(fn.bind(*call), cfg)
    return {"ok": True, "run_secs": secs}

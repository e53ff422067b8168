"""``tilecraft run``, ``bench`` and ``inspect``: commands over an exported library."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..ir import Var
from ..lower.graph_program import GraphProgram
from ..runtime.arguments import eval_shape_expr
from ..runtime.executor import Executable
from ..runtime.module import time_calls
from .app import CommandError, cli
from .models import load_npy, load_reference, save_npy
from .output import emit_json, print_table, seconds_text
from .pipeline import LibraryFile, function_rows, kernel_rows, open_library, read_library, runs_here

LIBRARY = click.argument("library", type=click.Path(dir_okay=False, path_type=Path))
FUNCTION = click.option(
    "-f",
    "--function",
    "function",
    default=None,
    help="The graph function to run (default: forward, or the only one).",
)
NPY_INPUTS = click.option(
    "-i",
    "--input",
    "inputs",
    multiple=True,
    metavar="NAME=FILE.npy",
    help="An input array from a .npy file; repeat per input.",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")


def _pairs(ctx: click.Context, values: tuple[str, ...], option: str) -> dict[str, str]:
    pairs = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise click.BadParameter(f"expected NAME=VALUE, got {v!r}", ctx, param_hint=option)
        pairs[name] = rest
    return pairs


def _function(ctx: click.Context, lib: LibraryFile, name: str | None) -> GraphProgram:
    names = sorted(lib.programs)
    if name is None:
        name = "forward" if "forward" in names or len(names) != 1 else names[0]
    if name not in lib.programs:
        raise click.BadParameter(
            f"the library has no graph function {name!r}; it has {names}",
            ctx,
            param_hint="--function",
        )
    return lib.programs[name]


def _arrays(
    ctx: click.Context, prog: GraphProgram, given: Mapping[str, np.ndarray], fill: bool, seed: int
) -> list[np.ndarray]:
    """The arguments of ``prog`` in order: given ones, else (``fill``) random ones."""
    missing = [n for n in prog.param_names if n not in given]
    if missing and not fill:
        raise click.BadParameter(
            f"{prog.name} needs {', '.join(missing)} (inputs: {list(prog.param_names)})",
            ctx,
            param_hint="--input",
        )
    rng = np.random.default_rng(seed)
    dims = _dims(ctx, prog, given)
    out = []
    for name, spec in zip(prog.param_names, prog.param_types, strict=True):
        if name in given:
            out.append(given[name])
            continue
        shape = tuple(int(eval_shape_expr(s, dims) or 0) for s in spec.shape)
        kind = spec.numpy_dtype.kind
        value = rng.standard_normal(shape) if kind in "fc" else np.zeros(shape)
        out.append(value.astype(spec.numpy_dtype))
    return out


def _dims(
    ctx: click.Context, prog: GraphProgram, given: Mapping[str, np.ndarray]
) -> dict[int, int]:
    """Values of the symbolic extents (by ``id`` of their Var): from the given arrays, else
    from ``--dim``."""
    dims: dict[int, int] = {}
    for name, spec in zip(prog.param_names, prog.param_types, strict=True):
        if name in given and given[name].ndim == spec.ndim:
            for s, n in zip(spec.shape, given[name].shape, strict=True):
                if isinstance(s, Var):
                    dims[id(s)] = int(n)
    extra = ctx.params.get("dims") or {}
    for var in prog.shape_vars:
        if var.name in extra:
            dims[id(var)] = extra[var.name]
        elif id(var) not in dims:
            raise click.BadParameter(
                f"give a value for the symbolic extent {var.name!r} with --dim {var.name}=N",
                ctx,
                param_hint="--dim",
            )
    return dims


def _summary(array: np.ndarray) -> dict[str, Any]:
    finite = array[np.isfinite(array)] if array.dtype.kind in "fc" else array
    stats = (
        (float(finite.min()), float(finite.max()), float(finite.mean())) if finite.size else None
    )
    return {
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        "min": None if stats is None else stats[0],
        "max": None if stats is None else stats[1],
        "mean": None if stats is None else stats[2],
        "nonfinite": int(array.size - finite.size),
    }


def _parse_dims(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, int]:
    out = {}
    for name, text in _pairs(ctx, values, "--dim").items():
        if not text.isdigit():
            raise click.BadParameter(f"--dim {name}: expected an int, got {text!r}", ctx, param)
        out[name] = int(text)
    return out


DIMS = click.option(
    "--dim",
    "dims",
    multiple=True,
    callback=_parse_dims,
    metavar="NAME=N",
    help="Value of a symbolic extent not fixed by the given inputs.",
)


def _given(ctx: click.Context, prog: GraphProgram, inputs: tuple[str, ...]) -> dict[str, Any]:
    """The ``--input NAME=FILE.npy`` arrays of ``prog`` (names checked before any file is read)."""
    pairs = _pairs(ctx, inputs, "--input")
    unknown = sorted(set(pairs) - set(prog.param_names))
    if unknown:
        raise click.BadParameter(
            f"{prog.name} has no input {unknown[0]!r}; its inputs: {list(prog.param_names)}",
            ctx,
            param_hint="--input",
        )
    return {n: load_npy(Path(f)) for n, f in pairs.items()}


@cli.command("run")
@LIBRARY
@FUNCTION
@NPY_INPUTS
@DIMS
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the result to this .npy file (default: print a summary).",
)
@JSON
@click.pass_context
def run_command(
    ctx: click.Context,
    library: Path,
    function: str | None,
    inputs: tuple[str, ...],
    dims: dict[str, int],
    output: Path | None,
    as_json: bool,
) -> None:
    """Run a graph function of the exported LIBRARY on .npy inputs."""
    lib, exe = open_library(library)
    prog = _function(ctx, lib, function)
    args = _arrays(ctx, prog, _given(ctx, prog, inputs), fill=False, seed=0)
    result = np.asarray(exe[prog.name](*args))
    if output is not None:
        save_npy(output, result)
    summary = _summary(result) | {"file": None if output is None else str(output)}
    if as_json:
        emit_json({"function": prog.name, "output": summary})
        return
    rows = [(k, v) for k, v in summary.items() if v is not None]
    print_table(("result", "value"), rows, title=f"{library}: {prog.name}")


def _time(fn: Any, number: int, repeat: int) -> float:
    return time_calls(fn, number, repeat, 0.0).median


def _race(
    exe: Executable,
    prog: GraphProgram,
    args: list[np.ndarray],
    timing: tuple[int, int],
    reference: Path | None,
    tol: tuple[float, float],
) -> list[dict[str, Any]]:
    """One row for the library, one for the reference (with its agreement)."""
    fn = exe[prog.name]
    secs = _time(lambda: fn(*args), *timing)
    rows = [{"name": "tilecraft", "median_s": secs, "ratio": 1.0, "max_abs_err": None}]
    if reference is None:
        return rows
    kind, ref = load_reference(reference)
    got, want = np.asarray(fn(*args)), np.asarray(ref(*args))
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
    ok = got.shape == want.shape and bool(np.allclose(got, want, rtol=tol[0], atol=tol[1]))
    ref_secs = _time(lambda: ref(*args), *timing)
    rows.append(
        {
            "name": kind,
            "median_s": ref_secs,
            "ratio": ref_secs / secs,
            "max_abs_err": err,
            "match": ok,
        }
    )
    return rows


@cli.command("bench")
@LIBRARY
@FUNCTION
@NPY_INPUTS
@DIMS
@click.option(
    "--reference",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Race this: a .py file's reference() (numpy), an .onnx (onnxruntime) or a "
    ".pt2 (torch) file.",
)
@click.option(
    "--number",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Calls per timed repeat.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Timed repeats (the median is reported).",
)
@click.option("--rtol", type=float, default=1e-3, show_default=True)
@click.option("--atol", type=float, default=1e-3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random inputs.")
@JSON
@click.pass_context
def bench_command(
    ctx: click.Context,
    library: Path,
    function: str | None,
    inputs: tuple[str, ...],
    dims: dict[str, int],
    reference: Path | None,
    number: int,
    repeat: int,
    rtol: float,
    atol: float,
    seed: int,
    as_json: bool,
) -> None:
    """Time a graph function of the exported LIBRARY (inputs not given are random).

    With --reference, races it and checks both agree; ratio is the reference's
    time over tilecraft's (above 1: tilecraft is faster). Exit code 1 when they disagree.
    """
    lib, exe = open_library(library)
    prog = _function(ctx, lib, function)
    args = _arrays(ctx, prog, _given(ctx, prog, inputs), fill=True, seed=seed)
    rows = _race(exe, prog, args, (number, repeat), reference, (rtol, atol))
    if as_json:
        emit_json({"function": prog.name, "number": number, "repeat": repeat, "results": rows})
    else:
        table = [
            (
                r["name"],
                seconds_text(r["median_s"]),
                f"{r['ratio']:.2f}",
                "-" if r["max_abs_err"] is None else f"{r['max_abs_err']:.3g}",
            )
            for r in rows
        ]
        print_table(("", "median", "ratio", "max abs err"), table, title=f"{library}: {prog.name}")
    if any(r.get("match") is False for r in rows):
        raise CommandError(f"the results differ from the reference (rtol {rtol}, atol {atol})")


@cli.command("inspect")
@LIBRARY
@JSON
def inspect_command(library: Path, as_json: bool) -> None:
    """What the exported LIBRARY holds: manifest, target, functions, kernels and who
    scheduled each (no code is loaded)."""
    lib = read_library(library)
    m = lib.manifest
    why_not = runs_here(lib)
    functions, kernels = function_rows(lib), kernel_rows(m)
    info: dict[str, Any] = {
        "file": str(library),
        "format": m.get("format"),
        "version": m.get("version"),
        "tilecraft_version": m.get("tilecraft_version"),
        "target": m.get("target"),
        "runs_here": why_not is None,
        "why_not": why_not,
        "params_bound": m.get("params_bound"),
        "c_externs": m.get("c_externs"),
        "functions": functions,
        "kernels": kernels,
    }
    if as_json:
        emit_json(info)
        return
    target = m.get("target") or {}
    click.echo(
        f"{library}: {m.get('format')} {m.get('version')}, "
        f"written by tilecraft {m.get('tilecraft_version')}"
    )
    click.echo(f"target: {target.get('string')}")
    click.echo("runs here: yes" if why_not is None else f"runs here: no: {why_not}")
    externs = m.get("c_externs")
    if isinstance(externs, dict):
        click.echo(
            f"C entries call {', '.join(externs.get('routines', []))}: "
            f"{externs.get('loader')}(path) opens path, ${externs.get('environment')} or "
            f"{externs.get('default_library')}"
        )
    for f in functions:
        ins = ", ".join(f"{p['name']}: {p['shape']}" for p in f["inputs"])
        click.echo(
            f"{f['function']}({ins}) -> {f['result']}: {len(f['steps'])} kernel calls, "
            f"{f['constants']} bound constants"
        )
    rows = [(k["kernel"], k["scheduled_by"] or "-", k["record"] or "-") for k in kernels]
    print_table(("kernel", "scheduled by", "record"), rows)

"""What the command reads: model files of each kind, input specs, ``.npy`` inputs, references.

A model file is one of (decided by its suffix, one function per kind):

``.py``
    A Python file defining a module-level ``model``: an instance of a
    :class:`tilecraft.frontend.nn.Module` subclass whose ``forward`` is compiled. Its inputs
    come from ``--input name:shape:dtype`` options, in ``forward``'s order; without them the
    file must define ``inputs``, a dict ``name -> nn.spec.Tensor`` (or ``(shape, dtype)``).
    Weights are ``model.state_dict()`` (deterministic, or what the file loaded with
    ``model.load_state_dict``). An optional ``reference(*inputs)`` function computing the same
    result with numpy is what ``tilecraft bench --reference model.py`` races. The file is
    run as Python code: open only files you trust.
``.pt2``
    A program saved with ``torch.export.save``, read with ``torch.export.load`` and imported
    by ``tilecraft.frontend.torch.from_exported_program`` (needs PyTorch and that importer).
``.onnx``
    An ONNX model, imported by ``tilecraft.frontend.onnx.from_onnx`` (needs the ``onnx``
    package and that importer; without the importer the file is refused as not supported
    yet).
"""

from __future__ import annotations

import importlib
import logging
import re
import runpy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import TilecraftError
from ..frontend import nn
from ..ir import IRModule

Reference = Callable[..., Any]

_INPUT_RE = re.compile(r"(?P<name>[A-Za-z_]\w*):(?P<shape>[^:]*)(?::(?P<dtype>\w+))?")


class ModelError(TilecraftError):
    """A model file that cannot be read or imported (the message says what is missing)."""


@dataclass
class Model:
    """A model read from a file: its exported module (graph functions), weights, origin."""

    mod: IRModule
    params: dict[str, np.ndarray]
    kind: str
    reference: Reference | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def parse_input_spec(text: str) -> tuple[str, nn.spec.Tensor]:
    """``name:shape:dtype`` (``x:1,768:float32``; ``seq`` for a symbolic extent; dtype
    default float32; ``x::float32`` for a scalar) as a name and an input spec.

    Raises
    ------
    ValueError
        When ``text`` is malformed (the command reports it as a usage error).
    """
    match = _INPUT_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"expected name:shape:dtype such as x:1,768:float32, got {text!r}")
    dims: list[int | str] = []
    for part in filter(None, (p.strip() for p in match["shape"].split(","))):
        if part.isdigit():
            dims.append(int(part))
        elif part.isidentifier():
            dims.append(part)
        else:
            raise ValueError(f"{text!r}: extent {part!r} is neither an int nor a name")
    try:
        return match["name"], nn.spec.Tensor(dims, match["dtype"] or "float32")
    except TilecraftError as e:
        raise ValueError(f"{text!r}: {e}") from None


def load_model(path: Path, inputs: Sequence[tuple[str, nn.spec.Tensor]]) -> Model:
    """Read the model file ``path`` (see the module docstring for the kinds)."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    if suffix == ".py":
        return from_python_file(path, inputs)
    if inputs:
        raise ModelError(
            f"{path}: --input is for Python model files; a {suffix} file carries its inputs"
        )
    if suffix == ".pt2":
        return from_torch_export(path)
    if suffix == ".onnx":
        return from_onnx_file(path)
    raise ModelError(
        f"{path}: unknown model kind {suffix or '(no suffix)'!r}; expected a Python file (.py), "
        "a torch.export program (.pt2) or an ONNX model (.onnx)"
    )


def _run_python(path: Path) -> dict[str, Any]:
    """The globals of the Python file ``path`` after running it."""
    try:
        return runpy.run_path(str(path), run_name="__tilecraft_model__")
    except TilecraftError:
        raise
    except Exception as e:  # the user's code failed: one line saying so, not a traceback
        raise ModelError(f"{path}: running the file raised {type(e).__name__}: {e}") from e


def _spec_of(
    path: Path, ns: Mapping[str, Any], inputs: Sequence[tuple[str, Any]]
) -> dict[str, Any]:
    """The ``forward`` spec: the ``--input`` options, else the file's ``inputs``."""
    if inputs:
        return dict(inputs)
    declared = ns.get("inputs")
    if not isinstance(declared, Mapping) or not declared:
        raise ModelError(
            f"{path}: no inputs: give --input name:shape:dtype for each input of forward, "
            "or define `inputs = {'x': nn.spec.Tensor((1, 768), 'float32')}` in the file"
        )
    spec = {}
    for name, value in declared.items():
        if isinstance(value, tuple) and len(value) == 2:
            value = nn.spec.Tensor(value[0], value[1])
        if not isinstance(value, nn.spec.Tensor):
            raise ModelError(f"{path}: inputs[{name!r}] is not an nn.spec.Tensor")
        spec[str(name)] = value
    return spec


def from_python_file(path: Path, inputs: Sequence[tuple[str, nn.spec.Tensor]]) -> Model:
    """A Python model file: its ``model`` exported with the given (or its own) inputs."""
    ns = _run_python(path)
    model = ns.get("model")
    if not isinstance(model, nn.Module):
        got = "nothing" if model is None else type(model).__name__
        raise ModelError(
            f"{path}: the file must define `model`, an instance of a tilecraft.frontend.nn."
            f"Module subclass (got {got})"
        )
    spec = _spec_of(path, ns, inputs)
    mod, params = model.export({"forward": spec})
    reference = ns.get("reference")
    return Model(mod, params, "python", reference if callable(reference) else None)


def _importer(module: str, attr: str, path: Path, what: str, extra: str) -> Callable[..., Any]:
    """``module.attr`` of tilecraft's importer for ``what``; refused cleanly when missing."""
    try:
        found: ModuleType = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and module.startswith(e.name):
            raise ModelError(
                f"{path}: importing {what} models is not supported yet: this tilecraft has no "
                f"{module} importer"
            ) from None
        raise ModelError(
            f"{path}: reading this file needs {e.name}: pip install 'tilecraft[{extra}]'"
        ) from None
    fn = getattr(found, attr, None)
    if not callable(fn):
        raise ModelError(f"{path}: {module} has no {attr}: importing {what} is not supported")
    return fn  # type: ignore[no-any-return]


def _require(package: str, extra: str, path: Path) -> ModuleType:
    """The third-party ``package``, or a clean error naming the extra that installs it."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise ModelError(
            f"{path}: reading this file needs {package}: pip install 'tilecraft[{extra}]'"
        ) from None


def from_torch_export(path: Path) -> Model:
    """A ``torch.export`` program file, through ``tilecraft.frontend.torch``."""
    importer = _importer(
        "tilecraft.frontend.torch", "from_exported_program", path, "PyTorch", "torch"
    )
    torch = _require("torch", "torch", path)
    torch_log = logging.getLogger("torch")
    level = torch_log.level
    torch_log.setLevel(logging.ERROR)  # torch logs a bad file's traceback before raising
    try:
        program = torch.export.load(str(path))
    except Exception as e:  # torch's own errors on a bad file: reported in one line
        raise ModelError(f"{path}: torch.export.load failed: {type(e).__name__}: {e}") from e
    finally:
        torch_log.setLevel(level)
    mod, params = importer(program)
    return Model(mod, dict(params), "torch.export", extra={"program": program})


def from_onnx_file(path: Path) -> Model:
    """An ONNX model file, through ``tilecraft.frontend.onnx``."""
    importer = _importer("tilecraft.frontend.onnx", "from_onnx", path, "ONNX", "onnx")
    onnx = _require("onnx", "onnx", path)
    try:
        proto = onnx.load(str(path))
    except Exception as e:  # onnx's own errors on a bad file: reported in one line
        raise ModelError(f"{path}: onnx.load failed: {type(e).__name__}: {e}") from e
    mod, params = importer(proto)
    return Model(mod, dict(params), "onnx")


def load_reference(path: Path) -> tuple[str, Reference]:
    """A reference to race: (its name, a function of the inputs returning an array).

    ``.py``: the file's ``reference(*inputs)`` (numpy); ``.onnx``: an onnxruntime session;
    ``.pt2``: the ``torch.export`` program's module, on torch tensors.
    """
    suffix = path.suffix.lower()
    if not path.is_file():
        raise ModelError(f"{path}: no such reference file")
    if suffix == ".py":
        fn = _run_python(path).get("reference")
        if not callable(fn):
            raise ModelError(f"{path}: the file defines no `reference(*inputs)` function")
        return "numpy", fn
    if suffix == ".onnx":
        return "onnxruntime", _onnx_reference(path)
    if suffix == ".pt2":
        return "torch", _torch_reference(path)
    raise ModelError(f"{path}: a reference is a .py (numpy), .onnx or .pt2 file")


def _onnx_reference(path: Path) -> Reference:
    ort = _require("onnxruntime", "onnx", path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(*arrays: np.ndarray) -> np.ndarray:
        return np.asarray(session.run(None, dict(zip(names, arrays, strict=False)))[0])

    return run


def _torch_reference(path: Path) -> Reference:
    torch = _require("torch", "torch", path)
    module = torch.export.load(str(path)).module()

    def run(*arrays: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = module(*(torch.from_numpy(a) for a in arrays))
        first = out[0] if isinstance(out, tuple | list) else out
        return np.asarray(first.detach().numpy())

    return run


class InputFileError(TilecraftError):
    """An input array file that cannot be read."""


def load_npy(path: Path) -> np.ndarray:
    """The array in the ``.npy`` file ``path`` (never unpickled)."""
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such input file") from None
    except (OSError, ValueError, EOFError) as e:
        raise InputFileError(f"{path}: not a readable .npy array ({e})") from None


def save_npy(path: Path, array: np.ndarray) -> None:
    """Write ``array`` to the ``.npy`` file ``path``."""
    try:
        np.save(path, array, allow_pickle=False)
    except OSError as e:
        raise InputFileError(f"{path}: cannot write the output: {e}") from None

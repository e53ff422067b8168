"""Malformed call arguments raise the runtime's ArgumentError family, never raw errors (6l).

A campaign of malformed objects — fake ``__dlpack__`` producers that raise or return garbage,
bad ``__dlpack_device__`` results, foreign and used capsules, wrong devices, 0-d, strided,
read-only and wrongly typed arrays, non-array values, bad scalars and call misuse — against the
CPU call path and the CUDA argument path (``device_view``, which needs no GPU for these).
In the campaign these cases come from (321 calls, the same objects in more positions), 82 raised
a raw ValueError, KeyError, TypeError, ... before the fix; every case must now be rejected with
a TilecraftError (the CUDA path may also accept a well-formed array).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te
from tilecraft.errors import TilecraftError
from tilecraft.runtime import ArgumentError, ArgumentTypeError, FunctionNotFoundError
from tilecraft.runtime import cuda as cuda_rt

_BUFFERS: list[Any] = []


def _capsule(name: bytes | None) -> object:
    """A capsule of the given name around 64 zero bytes."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    buf = ctypes.create_string_buffer(64)
    _BUFFERS.append(buf)
    return new(ctypes.addressof(buf), name, None)  # type: ignore[no-any-return]


class FakeTensor:
    """A DLPack producer whose two methods return (or raise) what the test says."""

    def __init__(self, dlpack: object, device: object = (1, 0), has_device: bool = True) -> None:
        self._dlpack, self._device, self._has_device = dlpack, device, has_device

    def __dlpack__(self, *args: object, **kwargs: object) -> object:
        if isinstance(self._dlpack, BaseException):
            raise self._dlpack
        return self._dlpack() if callable(self._dlpack) else self._dlpack

    def __getattr__(self, name: str) -> Any:
        if name != "__dlpack_device__" or not self._has_device:
            raise AttributeError(name)

        def device() -> object:
            if isinstance(self._device, BaseException):
                raise self._device
            return self._device

        return device


def _used_capsule() -> object:
    cap = np.zeros(4, "float32").__dlpack__()
    np.from_dlpack(FakeTensor(cap))
    return cap


def _read_only() -> np.ndarray:
    a = np.zeros(4, "float32")
    a.flags.writeable = False
    return a


def _good_capsule() -> object:
    return np.zeros(4, "float32").__dlpack__()


PRODUCERS: dict[str, object] = {
    "raises ValueError": ValueError("bad"),
    "raises KeyError": KeyError("bad"),
    "raises TypeError": TypeError("bad"),
    "raises AttributeError": AttributeError("bad"),
    "raises IndexError": IndexError("bad"),
    "raises BufferError": BufferError("bad"),
    "raises ZeroDivisionError": ZeroDivisionError("bad"),
    "raises NotImplementedError": NotImplementedError("bad"),
    "returns int": 5,
    "returns None": None,
    "returns str": "capsule",
    "returns ndarray": np.zeros(4, "float32"),
    "capsule named foo": lambda: _capsule(b"foo"),
    "unnamed capsule": lambda: _capsule(None),
    "used capsule": _used_capsule,
    "float64 capsule": lambda: np.zeros(4, "float64").__dlpack__(),
    "2-d capsule": lambda: np.zeros((2, 2), "float32").__dlpack__(),
    "strided capsule": lambda: np.zeros(8, "float32")[::2].__dlpack__(),
    "0-d capsule": lambda: np.zeros((), "float32").__dlpack__(),
}
DEVICES: dict[str, object] = {
    "cuda (2, 0)": (2, 0),
    "unknown (13, 0)": (13, 0),
    "('cpu', 0)": ("cpu", 0),
    "(1,)": (1,),
    "(1, 0, 0)": (1, 0, 0),
    "None": None,
    "5": 5,
    "(1.5, 0)": (1.5, 0),
    "raises KeyError": KeyError("dev"),
    "raises ValueError": ValueError("dev"),
    "'ab'": "ab",
}
ARRAYS: dict[str, object] = {
    "0-d": np.zeros((), "float32"),
    "2-d": np.zeros((2, 2), "float32"),
    "shape (5,)": np.zeros(5, "float32"),
    "float64": np.zeros(4, "float64"),
    "int32": np.zeros(4, "int32"),
    "bool": np.zeros(4, "bool"),
    "complex64": np.zeros(4, "complex64"),
    "object": np.array([None] * 4, dtype=object),
    "str": np.array(["a"] * 4),
    "structured": np.zeros(4, "f4,i4"),
    "big-endian": np.zeros(4, ">f4"),
    "strided": np.zeros(8, "float32")[::2],
    "reversed": np.zeros(4, "float32")[::-1],
    "zero-size": np.zeros(0, "float32"),
    "broadcast view": np.broadcast_to(np.zeros(1, "float32"), (4,)),
    "float16": np.zeros(4, "float16"),
}
VALUES: dict[str, object] = {
    "None": None,
    "list": [0.0] * 4,
    "tuple": (0.0,) * 4,
    "int": 3,
    "str": "abcd",
    "bytes": b"abcd",
    "memoryview": memoryview(bytearray(16)),
    "dict": {},
    "np.float32 scalar": np.float32(1),
    "a capsule": np.zeros(4, "float32").__dlpack__(),
    "the ndarray class": np.ndarray,
}


def _malformed() -> dict[str, Callable[[], object]]:
    out: dict[str, Callable[[], object]] = {}
    for name, produced in PRODUCERS.items():
        out[f"__dlpack__ {name}"] = lambda p=produced: FakeTensor(p)
        out[f"__dlpack__ {name}, no device"] = lambda p=produced: FakeTensor(p, has_device=False)
    for name, device in DEVICES.items():
        out[f"device {name}"] = lambda d=device: FakeTensor(_good_capsule, d)
    for name, arr in ARRAYS.items():
        out[f"array {name}"] = lambda a=arr: a
    for name, value in VALUES.items():
        out[f"value {name}"] = lambda v=value: v
    return out


MALFORMED = _malformed()


@pytest.fixture(scope="module")
def lib() -> Any:
    a = te.placeholder((4,), "float32", name="A")
    b = te.compute((4,), lambda i: a[i] * 2.0, name="B")
    return tc.build(te.create_prim_func([a, b]))


def _outcome(call: Callable[[], object]) -> str:
    """Return "ok" or the tilecraft error's class name; a raw error propagates (test fails)."""
    try:
        call()
    except TilecraftError as e:
        return type(e).__name__
    return "ok"


@pytest.mark.parametrize("position", ["input", "output"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_cpu_call_rejects_malformed_argument(lib: Any, case: str, position: str) -> None:
    value = MALFORMED[case]()
    args = (value, np.zeros(4, "float32"))
    if position == "output":
        args = (np.zeros(4, "float32"), value)
    with pytest.raises(ArgumentError):
        lib["main"](*args)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_cuda_argument_path_raises_only_tilecraft_errors(case: str) -> None:
    # without a GPU numpy arrays fail in the driver (CUDAError); with one they are copied over
    assert _outcome(lambda: cuda_rt.device_view(MALFORMED[case](), "arg")) in (
        "ok", "ArgumentError", "ArgumentTypeError", "CUDAError",
    )  # fmt: skip


@pytest.mark.parametrize(
    "cai",
    [None, 5, {}, {"shape": (4,)}, {"shape": "ab", "typestr": "<f4", "data": (0, False)},
     {"shape": (4,), "typestr": "nonsense", "data": (0, False)},
     {"shape": (4,), "typestr": "<f4", "data": None},
     {"shape": (-4,), "typestr": "<f4", "data": (0, False)},
     {"shape": (4,), "typestr": "<f4", "data": (0, False), "strides": (8,)},
     {"shape": (4,), "typestr": "<f4", "data": (0, False), "strides": 5}],
)  # fmt: skip
def test_malformed_cuda_array_interface(cai: object) -> None:
    class Fake:
        __cuda_array_interface__ = cai

    if cai is None:
        with pytest.raises(ArgumentTypeError):
            cuda_rt.device_view(Fake(), "arg")
        return
    with pytest.raises(ArgumentError):
        cuda_rt.device_view(Fake(), "arg")


def test_a_cpu_dlpack_tensor_still_works(lib: Any) -> None:
    class Wrapped:  # a well-behaved producer, as PyTorch or CuPy tensors are
        def __init__(self, a: np.ndarray) -> None:
            self.a = a

        def __dlpack__(self, *args: Any, **kwargs: Any) -> object:
            return self.a.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self) -> tuple[int, int]:
            return self.a.__dlpack_device__()  # type: ignore[no-any-return]

    a, b = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    lib["main"](Wrapped(a), Wrapped(b))
    np.testing.assert_array_equal(b, a * 2)


def test_call_misuse_raises_tilecraft_errors(lib: Any) -> None:
    a, b = np.zeros(4, "float32"), np.zeros(4, "float32")
    with pytest.raises(ArgumentTypeError, match="positional"):
        lib["main"](A=a, B=b)
    with pytest.raises(ArgumentTypeError, match="positional"):
        lib["main"].bind(a, B=b)
    with pytest.raises(ArgumentError, match="expected 2 arguments"):
        lib["main"](a)
    for name in ("nope", 0, None):
        with pytest.raises(FunctionNotFoundError, match="has no function") as err:
            lib[name]
        assert isinstance(err.value, KeyError)  # still a KeyError for `except KeyError`
    with pytest.raises(FunctionNotFoundError):
        lib.time_evaluator("nope")
    with pytest.raises(ArgumentError, match="number must be >= 1"):
        lib.time_evaluator("main", number=0)
    with pytest.raises(ArgumentTypeError, match="repeat must be an integer"):
        lib.time_evaluator("main", repeat="3")
    with pytest.raises(ArgumentError, match="share memory"):
        lib["main"](a, a)


@pytest.mark.parametrize(
    "value", [None, "3", 3.5, float("nan"), 1j, [4], np.array(4), 2**40, np.float64(4)]
)
def test_bad_scalar_arguments(value: object) -> None:
    n = tc.ir.Var("k", "int32")
    a, b = tc.ir.Buffer("A", (4,), "float32"), tc.ir.Buffer("B", (4,), "float32")
    i = tc.ir.Var("i", "int32")
    body = tc.ir.For(
        i, 0, 4, tc.ir.ForKind.SERIAL,
        tc.ir.BufferStore(b, a[i] * tc.ir.op.cast(n, "float32"), (i,)),
    )  # fmt: skip
    lib = tc.build(tc.ir.PrimFunc((a, b, n), body, name="scaled"))
    with pytest.raises(ArgumentError):
        lib["scaled"](np.zeros(4, "float32"), np.zeros(4, "float32"), value)

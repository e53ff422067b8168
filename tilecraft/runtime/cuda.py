"""The CUDA runtime: build GPU functions to a cubin, call them, time them with CUDA events.

The CUDA backend (:class:`~tilecraft.runtime.backend.CUDABackend`, ``build_cuda(mod, target)``)
lowers and emits CUDA (:mod:`tilecraft.codegen.cuda`), compiles it (NVRTC through
``cuda-python`` when installed, else ``nvcc``) and loads it as a :class:`CUDAModule`;
``lib["main"](a, b, c)`` runs the function. Arguments may be

* CUDA tensors from PyTorch or CuPy (``__cuda_array_interface__`` or DLPack), used in place;
* :class:`DeviceArray` (``DeviceArray.from_numpy(x)``), used in place;
* numpy arrays: copied to the device for the call, and outputs copied back.

Importing this module needs neither a GPU nor cuda-python; the driver is opened on first call.
"""

from __future__ import annotations

import contextlib
import ctypes
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..arith import EvaluationError, evaluate
from ..codegen.cuda import CUDASource
from ..ir import Buffer, DataType, Expr, For, Node, PrimFunc, Stmt, Var, post_order_visit
from ..lower.gpu_split_host_device import (
    GPUProgram,
    HostAlloc,
    HostFree,
    HostLaunch,
    Kernel,
    dyn_shared_layout,
)
from ..lower.gpu_vectorize import VECTOR_ATTR
from ..target import Target
from .arguments import (
    PRODUCER_ERRORS,
    ArgumentError,
    ArgumentTypeError,
    check_timing,
    dlpack_device,
    eval_shape_expr,
    for_inference,
    missing_function,
    reject_keywords,
)
from .cuda_driver import CUDAError, Driver, get_driver
from .module import TimingResult, written_params

if TYPE_CHECKING:
    from .backend.base import Artifact

_DLPACK_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged
_STATIC_SMEM_DEFAULT = 48 * 1024


class DeviceArray:
    """A contiguous array in device memory (freed when garbage collected)."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype[Any] | str) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self._driver = get_driver()
        self.ptr = self._driver.alloc(self.nbytes)

    @staticmethod
    def from_numpy(array: np.ndarray) -> DeviceArray:
        """A device copy of ``array``."""
        host = np.ascontiguousarray(array)
        out = DeviceArray(host.shape, host.dtype)
        out._driver.copy_htod(out.ptr, host.ctypes.data, out.nbytes)
        return out

    def numpy(self) -> np.ndarray:
        """A host copy."""
        host = np.empty(self.shape, self.dtype)
        self._driver.copy_dtoh(host.ctypes.data, self.ptr, self.nbytes)
        return host

    def __del__(self) -> None:
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr:
            with contextlib.suppress(CUDAError):  # a finalizer must not raise
                self._driver.free(ptr)


@dataclass
class _DeviceView:
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    host: np.ndarray | None = None  # numpy argument copied to the device
    owner: DeviceArray | None = None
    keep: object = None


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_MAX_DLPACK_NDIM = 64


def _capsule_pointer(capsule: object, where: str) -> int:
    """The DLTensor address in a ``dltensor`` capsule; ArgumentTypeError for anything else."""
    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.restype = ctypes.c_int
    is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    if not is_valid(capsule, b"dltensor"):  # also rejects non-capsules and used capsules
        raise ArgumentTypeError(
            f"{where}: __dlpack__() must return an unused 'dltensor' capsule, got "
            f"{type(capsule).__name__}"
        )
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return int(get(capsule, b"dltensor"))


def _dlpack_dtype(t: _DLTensor, where: str) -> np.dtype[Any]:
    kinds = {0: "i", 1: "u", 2: "f", 4: "u"}  # bfloat (4) is carried as uint16 bit patterns
    if t.code not in kinds or t.lanes != 1 or t.bits not in (8, 16, 32, 64):
        raise ArgumentTypeError(
            f"{where}: unsupported DLPack dtype (code {t.code}, bits {t.bits}, lanes {t.lanes})"
        )
    return np.dtype(f"{kinds[t.code]}{t.bits // 8}")


def _dlpack_view(value: Any, where: str) -> _DeviceView:
    device = dlpack_device(value, where)
    if device is not None and device[0] not in _DLPACK_CUDA:
        raise ArgumentTypeError(f"{where}: DLPack tensor on device type {device[0]}, not CUDA")
    try:
        capsule = value.__dlpack__()
    except PRODUCER_ERRORS as e:
        raise ArgumentTypeError(
            f"{where}: the tensor's __dlpack__() failed: {type(e).__name__}: {e}"
        ) from e
    t = _DLTensor.from_address(_capsule_pointer(capsule, where))
    if t.device_type not in _DLPACK_CUDA:
        raise ArgumentTypeError(f"{where}: DLPack tensor on device type {t.device_type}, not CUDA")
    if not 0 <= t.ndim <= _MAX_DLPACK_NDIM or (t.ndim and not t.shape):
        raise ArgumentTypeError(f"{where}: malformed DLPack tensor (ndim {t.ndim})")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if any(d < 0 for d in shape):
        raise ArgumentTypeError(f"{where}: malformed DLPack tensor (shape {shape})")
    dt = _dlpack_dtype(t, where)
    if t.strides:
        expect = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != expect:
                raise ArgumentError(f"{where}: expected a contiguous tensor")
            expect *= shape[i]
    view = _DeviceView(int(t.data or 0) + int(t.byte_offset), shape, dt)
    view.keep = capsule  # the capsule keeps the producer's memory alive during the call
    return view


def _cai_view(cai: object, where: str) -> _DeviceView:
    """A view of a ``__cuda_array_interface__`` dict (v2/v3: shape, typestr, data, strides)."""
    try:
        d = cai if isinstance(cai, dict) else {}
        shape = tuple(int(s) for s in d["shape"])
        dt = np.dtype(d["typestr"])
        ptr = int(d["data"][0])
        strides = d.get("strides")
    except PRODUCER_ERRORS as e:
        raise ArgumentTypeError(
            f"{where}: malformed __cuda_array_interface__: {type(e).__name__}: {e}"
        ) from e
    if any(d < 0 for d in shape):
        raise ArgumentTypeError(f"{where}: malformed __cuda_array_interface__ shape {shape}")
    contiguous = tuple(
        int(np.prod(shape[i + 1 :], dtype=np.int64)) * dt.itemsize for i in range(len(shape))
    )
    if strides is not None and (
        not isinstance(strides, (tuple, list)) or tuple(strides) != contiguous
    ):
        raise ArgumentError(f"{where}: expected a C-contiguous tensor, got strides {strides}")
    return _DeviceView(ptr, shape, dt)


def device_view(value: Any, where: str) -> _DeviceView:
    """Device pointer, shape and dtype of a call argument (numpy arrays are copied over)."""
    if isinstance(value, DeviceArray):
        return _DeviceView(value.ptr, value.shape, value.dtype, owner=value)
    if isinstance(value, type):
        raise ArgumentTypeError(f"{where}: expected a tensor, got the class {value.__name__}")
    value = for_inference(value, where)
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai_view(cai, where)
    if isinstance(value, np.ndarray):
        host = np.ascontiguousarray(value)
        dev = DeviceArray.from_numpy(host)
        return _DeviceView(dev.ptr, host.shape, host.dtype, host=value, owner=dev)
    if hasattr(value, "__dlpack__"):
        return _dlpack_view(value, where)
    raise ArgumentTypeError(
        f"{where}: expected a CUDA tensor (PyTorch/CuPy), a DeviceArray or a numpy array, got "
        f"{type(value).__name__}"
    )


def _host_value(e: Expr, env: dict[int, Any], variables: dict[int, Var]) -> int:
    """Evaluate a launch extent or size on the host from the bound scalar values."""
    assignment = {variables[k]: v for k, v in env.items() if k in variables}
    try:
        return int(evaluate(e, assignment))
    except EvaluationError as err:
        raise ArgumentError(f"cannot evaluate {e!r} from the arguments: {err}") from err


def _uses_vectors(body: Stmt) -> bool:
    found = False

    def fn(n: Node) -> None:
        nonlocal found
        found = found or (isinstance(n, For) and bool(n.annotations.get(VECTOR_ATTR)))

    post_order_visit(body, fn)
    return found


def _expected_dtype(dt: DataType) -> np.dtype[Any]:
    return np.dtype(dt.numpy_name())


def _scalar_ctype(dt: DataType) -> Any:
    if dt.is_float:
        return ctypes.c_double if dt.bits == 64 else ctypes.c_float
    if dt.is_bool:
        return ctypes.c_bool
    signed = {8: ctypes.c_int8, 16: ctypes.c_int16, 32: ctypes.c_int32, 64: ctypes.c_int64}
    unsigned = {8: ctypes.c_uint8, 16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}
    return (unsigned if dt.is_uint else signed)[dt.bits]


@dataclass
class _Prepared:
    views: list[_DeviceView | None]
    env: dict[int, int | float]
    launches: list[Callable[[], None]]
    cleanup: list[int]


class CUDAFunction:
    """One compiled GPU function: call it with device tensors or numpy arrays."""

    def __init__(self, module: CUDAModule, func: PrimFunc, program: GPUProgram) -> None:
        self.module = module
        self.name = func.name
        self.func = func
        self.program = program
        self._kernels: dict[str, ctypes.c_void_p] = {}
        self._outputs = {id(b) for b in written_params(func)}
        self._align = 16 if any(_uses_vectors(k.body) for k in program.kernels) else 1
        self._vars = {id(p): p for p in program.func.params if isinstance(p, Var)}
        for p in func.params:
            if isinstance(p, Buffer):
                self._vars.update({id(v): v for v in p.shape_vars()})

    def _kernel(self, driver: Driver, k: Kernel) -> ctypes.c_void_p:
        fn = self._kernels.get(k.name)
        if fn is None:
            fn = driver.get_function(self.module.handle(driver), k.name)
            self._kernels[k.name] = fn
        return fn

    def _bind(self, args: tuple[Any, ...]) -> tuple[list[_DeviceView | None], dict[int, Any]]:
        params = self.func.params
        if len(args) != len(params):
            names = ", ".join(p.name for p in params)
            raise ArgumentError(
                f"{self.name}: expected {len(params)} arguments ({names}), got {len(args)}"
            )
        env: dict[int, Any] = {}
        views: list[_DeviceView | None] = []
        for i, (p, a) in enumerate(zip(params, args, strict=True)):
            where = f"{self.name}: argument {i} {p.name!r}"
            if isinstance(p, Var):
                if not isinstance(a, numbers.Number):
                    raise ArgumentTypeError(f"{where}: expected a number, got {a!r}")
                env[id(p)] = a
                views.append(None)
                continue
            dview = device_view(a, where)
            if dview.dtype != _expected_dtype(p.dtype):
                raise ArgumentTypeError(f"{where}: expected dtype {p.dtype}, got {dview.dtype}")
            if len(dview.shape) != p.ndim:
                raise ArgumentError(f"{where}: expected {p.ndim} dimensions, got {dview.shape}")
            if dview.ptr % self._align:
                raise ArgumentError(
                    f"{where}: the kernel uses {self._align}-byte vector accesses but the tensor "
                    f"starts at {dview.ptr:#x}; pass an aligned (e.g. freshly allocated) tensor"
                )
            for extent, got in zip(p.shape, dview.shape, strict=True):
                if isinstance(extent, Var) and id(extent) not in env:
                    env[id(extent)] = got
            views.append(dview)
        for i, (p, view) in enumerate(zip(params, views, strict=True)):
            if isinstance(p, Buffer) and view is not None:
                want = tuple(eval_shape_expr(e, env) for e in p.shape)
                if want != view.shape:
                    raise ArgumentError(
                        f"{self.name}: argument {i} {p.name!r}: expected shape "
                        f"{want}, got {view.shape}"
                    )
        return views, env

    def _prepare(self, args: tuple[Any, ...]) -> _Prepared:
        driver = get_driver()
        views, env = self._bind(args)
        lowered = self.program.func
        ptrs: dict[int, int] = {}
        buffer_params = [p for p in lowered.params if isinstance(p, Buffer)]
        orig_buffers = [v for v in views if v is not None]
        for p, view in zip(buffer_params, orig_buffers, strict=True):
            ptrs[id(p)] = view.ptr
        launches: list[Callable[[], None]] = []
        temps: list[int] = []
        for step in self.program.steps:
            if isinstance(step, HostAlloc):
                size = _host_value(step.buffer.shape[0], env, self._vars)
                ptrs[id(step.buffer)] = driver.alloc(size * step.buffer.dtype.itemsize)
                temps.append(ptrs[id(step.buffer)])
            elif isinstance(step, HostLaunch):
                launches.append(self._launcher(driver, step.kernel, ptrs, env))
            elif isinstance(step, HostFree):
                continue
        return _Prepared(views, env, launches, temps)

    def _launcher(
        self, driver: Driver, k: Kernel, ptrs: dict[int, int], env: dict[int, Any]
    ) -> Callable[[], None]:
        fn = self._kernel(driver, k)
        cargs: list[Any] = []
        for p in k.params:
            if isinstance(p, Buffer):
                cargs.append(ctypes.c_void_p(ptrs[id(p)]))
            else:
                if id(p) not in env:
                    raise ArgumentError(f"{self.name}: no value for {p.name!r}")
                cargs.append(_scalar_ctype(p.dtype)(env[id(p)]))
        grid = [_host_value(e, env, self._vars) for e in k.grid]
        block = [_host_value(e, env, self._vars) for e in k.block]
        _, total = dyn_shared_layout(k.dyn_shared)
        smem = _host_value(total, env, self._vars)
        if smem > _STATIC_SMEM_DEFAULT:
            driver.set_max_dynamic_shared(fn, smem)
        if any(g == 0 for g in (*grid, *block)):
            return lambda: None

        def run() -> None:
            driver.launch(fn, grid, block, smem, cargs)

        return run

    def _finish(self, prep: _Prepared) -> None:
        driver = get_driver()
        driver.synchronize()
        for view, param in zip(prep.views, self.func.params, strict=True):
            if view is None or view.host is None or id(param) not in self._outputs:
                continue
            if view.host.flags.writeable:
                out = np.empty(view.shape, view.dtype)
                driver.copy_dtoh(out.ctypes.data, view.ptr, out.nbytes)
                view.host[...] = out
        for ptr in prep.cleanup:
            driver.free(ptr)
        prep.cleanup.clear()

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Run the function; numpy outputs are copied back when it finishes."""
        reject_keywords(self.name, [p.name for p in self.func.params], kwargs)
        prep = self._prepare(args)
        for launch in prep.launches:
            launch()
        self._finish(prep)

    def time(self, args: tuple[Any, ...], number: int, repeat: int) -> TimingResult:
        """Seconds per call, measured with CUDA events around ``number`` calls per repeat."""
        driver = get_driver()
        prep = self._prepare(args)
        try:
            for launch in prep.launches:  # warm up
                launch()
            driver.synchronize()
            start, end = driver.event(), driver.event()
            results = []
            for _ in range(repeat):
                driver.record(start)
                for _ in range(number):
                    for launch in prep.launches:
                        launch()
                driver.record(end)
                results.append(driver.elapsed_ms(start, end) / 1e3 / number)
            driver.destroy_event(start)
            driver.destroy_event(end)
        finally:
            self._finish(prep)
        return TimingResult(tuple(results))


class CUDAModule:
    """Compiled GPU functions: ``lib["name"](*args)``, ``lib.source``, ``time_evaluator``."""

    def __init__(
        self, source: CUDASource, cubin: bytes, functions: dict[str, PrimFunc], target: Target
    ) -> None:
        self.source = source.text
        self.cubin = cubin
        self.target = target
        self.artifact: Artifact | None = None  # what its backend loaded it from (exported)
        self._handle: ctypes.c_void_p | None = None
        self._functions = {
            name: CUDAFunction(self, f.update(name=name), source.programs[name])
            for name, f in functions.items()
        }

    def handle(self, driver: Driver) -> ctypes.c_void_p:
        """The loaded module (loaded on first use)."""
        if self._handle is None:
            self._handle = driver.load_module(self.cubin)
        return self._handle

    @property
    def function_names(self) -> list[str]:
        """Names of the functions in this module."""
        return list(self._functions)

    def __getitem__(self, name: str) -> CUDAFunction:
        fn = self._functions.get(name) if isinstance(name, str) else None
        if fn is None:
            raise missing_function(name, self.function_names)
        return fn

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def show_source(self) -> None:
        """Print the CUDA source."""
        print(self.source)  # noqa: T201

    def time_evaluator(
        self, name: str, number: int = 10, repeat: int = 5, min_repeat_ms: float = 0
    ) -> Callable[..., TimingResult]:
        """A callable timing function ``name`` with CUDA events (seconds per call).

        ``min_repeat_ms`` is accepted for API symmetry with the CPU module and ignored.
        """
        del min_repeat_ms
        check_timing(number, repeat)
        fn = self[name]
        return lambda *args: fn.time(args, number, repeat)

    def __repr__(self) -> str:
        return f"<tilecraft CUDAModule {self.function_names} for {self.target}>"

"""A thin ctypes binding of the CUDA driver API (``libcuda``), loaded on first use.

Only what the runtime needs: the primary context of one device, module loading, kernel
launch, device memory, copies and events. Importing this module never touches the driver;
:func:`device_available` reports whether a device can be opened.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any

from ..errors import TilecraftError

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_LIB_NAMES = ("libcuda.so.1", "libcuda.so", "nvcuda.dll")


class CUDAError(TilecraftError):
    """A CUDA driver call failed (or no driver/device is available)."""


def _load_library() -> Any:
    """The driver library (CUDAError naming each name tried when none loads)."""
    errors = []
    for name in _LIB_NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(f"{name}: {e}")
    raise CUDAError("CUDA driver library not found (" + "; ".join(errors) + ")")


def _device_count(lib: Any) -> int:
    """``cuInit`` then ``cuDeviceGetCount`` (no context is created)."""
    rc = lib.cuInit(0)
    if rc != 0:
        raise CUDAError(f"cuInit failed: CUDA error {rc}")
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        raise CUDAError(f"cuDeviceGetCount failed: CUDA error {rc}")
    return count.value


class Driver:
    """The loaded driver library with one device's primary context made current."""

    def __init__(self, device: int = 0) -> None:
        lib = _load_library()
        self.lib = lib
        count = _device_count(lib)
        if count <= device:
            raise CUDAError(f"CUDA device {device} not present ({count} device(s))")
        dev = ctypes.c_int(0)
        self.check(lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        self.device = dev
        ctx = ctypes.c_void_p()
        self.check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self.ctx = ctx
        self.make_current()

    def make_current(self) -> None:
        """Make this device's primary context current on the calling thread."""
        self.check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def check(self, code: int, what: str) -> None:
        """Raise :class:`CUDAError` naming ``what`` unless ``code`` is CUDA_SUCCESS."""
        if code == 0:
            return
        text = ctypes.c_char_p()
        getter = getattr(self.lib, "cuGetErrorString", None)
        if getter is not None:
            getter(code, ctypes.byref(text))
        msg = text.value.decode() if text.value else "unknown error"
        raise CUDAError(f"{what} failed: CUDA error {code} ({msg})")

    # modules and launches -----------------------------------------------------------------
    def load_module(self, image: bytes) -> ctypes.c_void_p:
        """Load a cubin image; returns the module handle."""
        mod = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(mod), image), "cuModuleLoadData")
        return mod

    def get_function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        """The kernel ``name`` of ``module``."""
        fn = ctypes.c_void_p()
        self.check(
            self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()),
            f"cuModuleGetFunction({name})",
        )
        return fn

    def set_max_dynamic_shared(self, fn: ctypes.c_void_p, nbytes: int) -> None:
        """Allow ``fn`` to use ``nbytes`` of dynamic shared memory (needed above 48 KiB)."""
        self.check(
            self.lib.cuFuncSetAttribute(
                fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, ctypes.c_int(nbytes)
            ),
            "cuFuncSetAttribute",
        )

    def launch(
        self,
        fn: ctypes.c_void_p,
        grid: Sequence[int],
        block: Sequence[int],
        shared: int,
        args: Sequence[Any],
        stream: int = 0,
    ) -> None:
        """Launch ``fn``; ``args`` are ctypes scalars (pointers as ``c_void_p``)."""
        ptrs = (ctypes.c_void_p * max(len(args), 1))(
            *[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args]
        )
        self.check(
            self.lib.cuLaunchKernel(
                fn,
                ctypes.c_uint(grid[0]),
                ctypes.c_uint(grid[1]),
                ctypes.c_uint(grid[2]),
                ctypes.c_uint(block[0]),
                ctypes.c_uint(block[1]),
                ctypes.c_uint(block[2]),
                ctypes.c_uint(shared),
                ctypes.c_void_p(stream),
                ptrs,
                None,
            ),
            "cuLaunchKernel",
        )

    def synchronize(self) -> None:
        """Wait for all work on the context."""
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    # memory -------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        """Allocate ``nbytes`` of device memory (at least one byte); returns the address."""
        ptr = ctypes.c_uint64(0)
        self.check(
            self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1))),
            f"cuMemAlloc({nbytes})",
        )
        return int(ptr.value)

    def free(self, ptr: int) -> None:
        """Free device memory from :meth:`alloc`."""
        self.check(self.lib.cuMemFree_v2(ctypes.c_uint64(ptr)), "cuMemFree")

    def copy_htod(self, dst: int, src: int, nbytes: int) -> None:
        """Copy host memory at ``src`` to the device address ``dst``."""
        if nbytes:
            self.check(
                self.lib.cuMemcpyHtoD_v2(
                    ctypes.c_uint64(dst), ctypes.c_void_p(src), ctypes.c_size_t(nbytes)
                ),
                "cuMemcpyHtoD",
            )

    def copy_dtoh(self, dst: int, src: int, nbytes: int) -> None:
        """Copy device memory at ``src`` to host memory at ``dst``."""
        if nbytes:
            self.check(
                self.lib.cuMemcpyDtoH_v2(
                    ctypes.c_void_p(dst), ctypes.c_uint64(src), ctypes.c_size_t(nbytes)
                ),
                "cuMemcpyDtoH",
            )

    # events -------------------------------------------------------------------------------
    def event(self) -> ctypes.c_void_p:
        """A new event (default flags: timing enabled)."""
        ev = ctypes.c_void_p()
        self.check(self.lib.cuEventCreate(ctypes.byref(ev), 0), "cuEventCreate")
        return ev

    def record(self, ev: ctypes.c_void_p, stream: int = 0) -> None:
        """Record ``ev`` on ``stream``."""
        self.check(self.lib.cuEventRecord(ev, ctypes.c_void_p(stream)), "cuEventRecord")

    def elapsed_ms(self, start: ctypes.c_void_p, end: ctypes.c_void_p) -> float:
        """Milliseconds between two recorded events (waits for ``end``)."""
        self.check(self.lib.cuEventSynchronize(end), "cuEventSynchronize")
        ms = ctypes.c_float(0.0)
        self.check(self.lib.cuEventElapsedTime(ctypes.byref(ms), start, end), "cuEventElapsedTime")
        return float(ms.value)

    def destroy_event(self, ev: ctypes.c_void_p) -> None:
        """Destroy an event."""
        self.check(self.lib.cuEventDestroy_v2(ev), "cuEventDestroy")


_driver: Driver | None = None
_lock = threading.Lock()


def get_driver() -> Driver:
    """The process-wide :class:`Driver` (device 0), created on first use.

    Raises
    ------
    CUDAError
        When there is no driver library or no device.
    """
    global _driver
    with _lock:
        if _driver is None:
            _driver = Driver()
        else:
            _driver.make_current()
        return _driver


def why_no_device(device: int = 0) -> str | None:
    """Why CUDA device ``device`` cannot be used (no driver library, no device), or None when
    it is present. Creates no context: safe to ask in a process that never runs kernels."""
    try:
        lib = _load_library()
    except CUDAError:
        return "no CUDA driver library (libcuda) on this machine"
    try:
        count = _device_count(lib)
    except CUDAError as e:
        return str(e)
    return None if count > device else f"CUDA device {device} not present ({count} device(s))"


def device_available() -> bool:
    """True when a CUDA device can be opened through the driver."""
    try:
        get_driver()
    except CUDAError:
        return False
    return True

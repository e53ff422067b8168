"""The CUDA runtime: building needs no GPU; running (marked ``gpu``) needs one."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from kernels import ALL, make_scale_symbolic, make_transpose, make_vector_add

import tilecraft as tc
from tilecraft.runtime.cuda_compile import parse_ptxas_output
from tilecraft.runtime.cuda_driver import CUDAError, device_available

GPU = tc.Target("cuda -arch=sm_90")


def test_runtime_imports_without_gpu_or_cuda_python():
    code = (
        "import sys; import tilecraft.runtime.cuda, tilecraft.codegen.cuda; "
        "assert 'cuda.bindings' not in sys.modules and 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_parse_ptxas_output():
    log = (
        "ptxas info    : Compiling entry function 'k0' for 'sm_90'\n"
        "ptxas info    : Function properties for k0\n"
        "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 368 bytes cmem[0]\n"
    )
    (info,) = parse_ptxas_output(log).values()
    assert (info.kernel, info.registers, info.shared_bytes) == ("k0", 40, 4096)
    assert (info.stack_bytes, info.spill_stores, info.spill_loads, info.spills) == (8, 4, 4, True)


@pytest.mark.nvcc
def test_build_cuda_without_gpu_gives_a_module_with_source():
    from tilecraft.runtime import build_cuda

    lib = build_cuda(make_vector_add()[0], GPU)
    assert lib.function_names == ["vector_add"]
    assert "vector_add_kernel0" in lib.source
    assert lib.cubin[:4] == b"\x7fELF"


@pytest.mark.nvcc
@pytest.mark.skipif(device_available(), reason="checks the error raised when no GPU is present")
def test_calling_without_gpu_raises_a_cuda_error():
    from tilecraft.runtime import build_cuda

    lib = build_cuda(make_vector_add()[0], GPU)
    a = np.ones(4096, np.float32)
    with pytest.raises(CUDAError, match=r"CUDA driver|CUDA device"):
        lib["vector_add"](a, a.copy(), np.empty_like(a))


def _inputs(func, ref, rng, n=None):
    from tilecraft.runtime import written_params

    outs = {id(b) for b in written_params(func)}
    ins, res = [], []
    for p in func.buffer_params:
        shape = tuple(n if not hasattr(s, "value") else s.value for s in p.shape)
        if id(p) in outs:
            res.append(np.full(shape, np.nan, np.float32))
        else:
            ins.append(rng.uniform(-1, 1, shape).astype(np.float32))
    return ins, res, ref(*ins)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(n for n in ALL if n != "scale_symbolic"))
def test_kernel_runs_on_gpu_with_numpy_arrays(name):
    from tilecraft.runtime import build_cuda

    func, ref = ALL[name]()
    lib = build_cuda(func, GPU)
    ins, outs, want = _inputs(func, ref, np.random.default_rng(0))
    lib[func.name](*ins, *outs)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_symbolic_kernel_runs_on_gpu_for_several_lengths():
    from tilecraft.runtime import build_cuda

    func, ref = make_scale_symbolic()
    lib = build_cuda(func, GPU)
    for n in (1, 300, 5000):
        a = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
        b = np.full(n, np.nan, np.float32)
        lib["scale"](a, b)
        np.testing.assert_allclose(b, ref(a), rtol=1e-6)


@pytest.mark.gpu
def test_device_arrays_and_time_evaluator():
    from tilecraft.runtime import DeviceArray, build_cuda

    func, ref = make_vector_add(1 << 16, 128)
    lib = build_cuda(func, GPU)
    a = np.random.default_rng(1).uniform(-1, 1, 1 << 16).astype(np.float32)
    da, db, dc = DeviceArray.from_numpy(a), DeviceArray.from_numpy(a), DeviceArray(a.shape, a.dtype)
    lib["vector_add"](da, db, dc)
    np.testing.assert_allclose(dc.numpy(), ref(a, a), rtol=1e-6)
    timing = lib.time_evaluator("vector_add", number=5, repeat=3)(da, db, dc)
    assert len(timing.results) == 3
    assert all(t > 0 for t in timing.results)


@pytest.mark.gpu
def test_torch_cuda_tensors_are_used_in_place():
    torch = pytest.importorskip("torch")
    from tilecraft.runtime import build_cuda

    func, _ = make_vector_add(4096, 128)
    lib = build_cuda(func, GPU)
    a = torch.rand(4096, device="cuda")
    b = torch.rand(4096, device="cuda")
    c = torch.empty(4096, device="cuda")
    lib["vector_add"](a, b, c)
    torch.cuda.synchronize()
    assert torch.allclose(c, a + b)


class _RecordingDriver:
    """Stands in for the CUDA driver: records launches and copies, allocates fake addresses."""

    def __init__(self):
        self.next = 0
        self.launches = []
        self.copies_back = 0

    def alloc(self, nbytes):
        self.next += 1 << 20
        return self.next

    def free(self, ptr):
        del ptr

    def copy_htod(self, dst, src, nbytes):
        del dst, src, nbytes

    def copy_dtoh(self, dst, src, nbytes):
        del dst, src, nbytes
        self.copies_back += 1

    def load_module(self, image):
        return image[:4]

    def get_function(self, module, name):
        del module
        return name

    def set_max_dynamic_shared(self, fn, nbytes):
        del fn, nbytes

    def launch(self, fn, grid, block, shared, args):
        self.launches.append((fn, list(grid), list(block), shared, [a.value for a in args]))

    def synchronize(self):
        pass


@pytest.mark.nvcc
def test_host_side_launch_plan_with_symbolic_extent(monkeypatch):
    import tilecraft.runtime.cuda as rc

    driver = _RecordingDriver()
    monkeypatch.setattr(rc, "get_driver", lambda: driver)
    lib = tc.runtime.build_cuda(make_scale_symbolic()[0], GPU)
    lib["scale"](np.ones(700, np.float32), np.zeros(700, np.float32))
    ((name, grid, block, smem, args),) = driver.launches
    assert (name, grid, block, smem) == ("scale_kernel0", [3, 1, 1], [256, 1, 1], 0)
    assert args[2] == 700  # the shape variable n follows the two device pointers
    assert driver.copies_back == 1  # only the output is copied back


@pytest.mark.nvcc
def test_arguments_are_checked_before_launch(monkeypatch):
    import tilecraft.runtime.cuda as rc
    from tilecraft.runtime import ArgumentError

    monkeypatch.setattr(rc, "get_driver", _RecordingDriver)
    lib = tc.runtime.build_cuda(make_vector_add()[0], GPU)
    a = np.ones(4096, np.float32)
    with pytest.raises(ArgumentError, match="expected shape"):
        lib["vector_add"](a, a.copy(), np.zeros(100, np.float32))
    with pytest.raises(ArgumentError, match="expected dtype float32"):
        lib["vector_add"](a, a.copy(), np.zeros(4096, np.float64))


@pytest.mark.nvcc
def test_dynamic_shared_memory_size_is_passed_at_launch(monkeypatch):
    import tilecraft.runtime.cuda as rc

    driver = _RecordingDriver()
    monkeypatch.setattr(rc, "get_driver", lambda: driver)
    lib = tc.runtime.build_cuda(make_transpose(64, "shared.dyn")[0], GPU)
    lib["transpose"](np.ones((64, 64), np.float32), np.zeros((64, 64), np.float32))
    ((_, grid, block, smem, _),) = driver.launches
    assert (grid, block, smem) == ([2, 2, 1], [32, 8, 1], 32 * 33 * 4)


@pytest.mark.nvcc
def test_misaligned_tensor_is_rejected_for_vector_kernels(monkeypatch):
    import tilecraft.runtime.cuda as rc
    from tilecraft.runtime import ArgumentError

    class _Offset:
        def __init__(self, ptr):
            self.__cuda_array_interface__ = {
                "shape": (4096,), "typestr": "<f4", "data": (ptr, False), "version": 3,
            }  # fmt: skip

    monkeypatch.setattr(rc, "get_driver", _RecordingDriver)
    lib = tc.runtime.build_cuda(make_vector_add()[0], GPU)
    with pytest.raises(ArgumentError, match="16-byte vector accesses"):
        lib["vector_add"](_Offset(4096 + 4), _Offset(8192), _Offset(16384))

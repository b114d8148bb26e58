"""The CUDA driver through ctypes (smoke/cuda_driver.py), the code device-load's child runs. Without
a driver it says why in the words smoke reports; on an sm_90 GPU (marker `gpu`) it loads the
nvcc-built fixtures and answers as the driver does: the sm_90 cubin loads, the sm_80 one has no
code for the GPU (209), and compute_80 PTX is JIT-compiled."""

from __future__ import annotations

import ctypes

import pytest

from archaudit.smoke import cuda_driver
from helpers import CUDA_BIN, no_gpu_reason


def driver_present() -> bool:
    for name in cuda_driver.LIBRARY_NAMES:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            pass
    return False


def test_without_a_driver_it_names_each_library_it_tried():
    if driver_present():
        pytest.skip("a CUDA driver is installed here: the gpu tests below use it")
    with pytest.raises(cuda_driver.DriverUnavailable) as gone:
        cuda_driver.Driver()
    text = str(gone.value)
    assert text.startswith("no CUDA driver: ") and no_gpu_reason(text)
    assert all(name in text for name in cuda_driver.LIBRARY_NAMES)


@pytest.fixture(scope="module")
def sm90() -> cuda_driver.Driver:
    try:
        drv = cuda_driver.Driver()
        drv.init()
    except cuda_driver.DriverUnavailable as exc:
        pytest.skip(f"no GPU here: {exc}")
    devices = drv.devices()
    if not devices or devices[0]["sm"] != "sm_90":
        pytest.skip(f"these answers are an sm_90 GPU's; here: {devices}")
    drv.set_current(drv.retain_primary(drv.device(0)))
    return drv


@pytest.mark.gpu
def test_the_driver_describes_its_devices(sm90):
    major, minor = (int(x) for x in sm90.version().split("."))
    assert major >= 12 and 0 <= minor <= 9
    (first, *_) = sm90.devices()
    assert (first["ordinal"], first["cc"], first["sm"]) == (0, "9.0", "sm_90") and "NVIDIA" in str(first["name"])
    assert sm90.device_count() == len(sm90.devices())


@pytest.mark.gpu
def test_loads_answer_with_the_drivers_own_codes_and_names(sm90):
    code, seconds, module = sm90.load_data((CUDA_BIN / "kern_sm90.cubin").read_bytes())
    assert code == cuda_driver.CUDA_SUCCESS and module and seconds >= 0
    sm90.unload(module)
    code, _, module = sm90.load_data((CUDA_BIN / "kern_sm80.cubin").read_bytes())
    assert (code, module) == (cuda_driver.CUDA_ERROR_NO_BINARY_FOR_GPU, None)
    assert sm90.error_name(code) == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    with pytest.raises(cuda_driver.CudaError, match=r"^cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU \(209\)"):
        sm90.check("cuModuleLoadData", code)
    ptx = (CUDA_BIN / "kern_80.ptx").read_bytes() + b"\0"
    for level in (0, None):  # device-load's optimisation level, and the driver's default
        code, _, module = sm90.load_data(ptx, jit_level=level)
        assert code == cuda_driver.CUDA_SUCCESS and module, sm90.error_name(code)
        sm90.unload(module)

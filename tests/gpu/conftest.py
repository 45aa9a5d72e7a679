"""Fixtures of the GPU plugin tests: the OpenCL device (PoCL on a machine without
a GPU; a missing OpenCL driver fails these tests, it never skips them)."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def heuristic_kernels(monkeypatch):
    """The tests choose kernel variants themselves (the heuristic, a pinned
    configuration or an explicit search): a MO_CORE_GPU_TUNE or MO_CORE_GPU_STYLE
    of the caller's shell (or a GPU's default search) changes none of it."""
    monkeypatch.setenv("MO_CORE_GPU_TUNE", "0")
    for name in ("MO_CORE_GPU_STYLE", "MO_CORE_GPU_TUNE_S"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def gpu_device():
    from device_daemons.gpu import open_device
    return open_device("GPU")


@pytest.fixture
def mma(gpu_device, monkeypatch):
    """Tensor cores where the device has them, else their emulation (MO_CORE_GPU_MMA=emulate)."""
    if not gpu_device.tensor_cores:
        monkeypatch.setenv("MO_CORE_GPU_MMA", "emulate")


# the daemon tests of this directory use the daemon tests' private runtime directories,
# daemon-process lookup and tiny model (tests/daemon/conftest.py)
from tests.daemon.conftest import fresh_runtime, session_runtime, tiny  # noqa: E402,F401

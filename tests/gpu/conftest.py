"""Fixtures of the GPU plugin tests: the OpenCL device (PoCL on a machine without
a GPU; a missing OpenCL driver fails these tests, it never skips them)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def gpu_device():
    from device_daemons.gpu import open_device
    return open_device("GPU")

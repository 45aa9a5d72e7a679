"""Fixtures of the GPU plugin tests: the OpenCL device (PoCL on a machine without
a GPU; a missing OpenCL driver fails these tests, it never skips them)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def gpu_device():
    from device_daemons.gpu import open_device
    return open_device("GPU")


# the daemon tests of this directory use the daemon tests' private runtime directories,
# daemon-process lookup and tiny model (tests/daemon/conftest.py)
from tests.daemon.conftest import fresh_runtime, session_runtime, tiny  # noqa: E402,F401

"""Session fixtures of the IR v11 tests: one OpenVINO runtime Core."""
import pytest

from tests.ir_v11.v11_helpers import import_openvino


@pytest.fixture(scope="session")
def ov_core():
    return import_openvino().Core()

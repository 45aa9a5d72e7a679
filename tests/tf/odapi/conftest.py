"""Fixtures of the OD API tests: the exports of both code bases (benchmarks/odapi_exports.py:
built once by the OD API's own code in its venv, cached), a CPU daemon of this
session."""
from __future__ import annotations

import pytest

from benchmarks.odapi_exports import built


@pytest.fixture(scope="session")
def exports():
    return built()


@pytest.fixture(scope="session")
def ie():
    from tests.daemon.conftest import private_iecore
    with private_iecore("odapi-") as core:
        yield core

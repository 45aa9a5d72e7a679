"""The TF worker's RAW_SHARE closes each descriptor it is handed exactly once, refused or not
(a second close would close whatever file another thread of the worker opened under that
number in between). A unit test of the verb's handler beside test_shared_buffer.py's real
processes: no TensorFlow is needed before a graph is imported."""
from __future__ import annotations

import os
import sys

import pytest

from core.microkernel import RemoteError
from core.microkernel import shared_buffer
from core.microkernel.shared_buffer import SharedBuffer
from core.services import tf_worker as contract
from fallback_workers.tf_worker.subgraphs import Subgraphs


@pytest.fixture
def closes(monkeypatch):
    """The descriptors the worker's code (not pytest's own) closes, in order."""
    seen = []
    real = os.close
    ours = ("subgraphs.py", "shared_buffer.py", "direct.py")

    def recording(fd):
        if sys._getframe(1).f_code.co_filename.endswith(ours):
            seen.append(fd)
        real(fd)
    monkeypatch.setattr(os, "close", recording)
    return seen


def test_a_refused_descriptor_is_closed_once(closes, tmp_path):
    plain = os.open(str(tmp_path / "plain"), os.O_RDWR | os.O_CREAT)
    os.ftruncate(plain, 4096)
    spec = {"name": shared_buffer.PREFIX + "0123456789abcdef", "size": 4096}
    with pytest.raises(RemoteError, match="cannot map the shared buffer"):
        Subgraphs(None).share(contract.share_request(spec), [plain])
    assert closes == [plain]


def test_a_malformed_request_closes_every_descriptor_once(closes):
    r, w = os.pipe()
    with pytest.raises(RemoteError, match="exactly one descriptor"):
        Subgraphs(None).share(contract.share_request({"name": shared_buffer.PREFIX + "x", "size": 64}), [r, w])
    assert sorted(closes) == sorted([r, w])


def test_a_shared_buffer_is_mapped_and_its_descriptor_closed_once(closes):
    buf = SharedBuffer(4096)
    try:
        fd = os.dup(buf.fd)  # what the worker receives is a copy
        subgraphs = Subgraphs(None)
        assert contract.RUN_REPLY.unpack(subgraphs.share(contract.share_request(buf.spec), [fd]))[0] == contract.RUN_OK
        assert closes == [fd] and subgraphs.mapped(buf.spec["name"])
    finally:
        buf.close()


def test_a_request_naming_another_size_of_a_shared_buffer_is_refused(closes):
    """bind_run and run_subgraph check their spans against the size the request gives:
    the map must be that size (bind_run made views of a smaller map: a TypeError)."""
    buf = SharedBuffer(4096)
    try:
        subgraphs = Subgraphs(None)
        subgraphs.share(contract.share_request(buf.spec), [os.dup(buf.fd)])
        assert len(subgraphs.buffer(buf.spec)) == 4096
        with pytest.raises(RemoteError) as err:
            subgraphs.buffer(dict(buf.spec, size=8192))
        assert err.value.kind == contract.SHM and "has 4096 bytes, not 8192" in err.value.message
        with pytest.raises(RemoteError) as err:
            subgraphs.buffer(dict(buf.spec, name=shared_buffer.PREFIX + "other"))
        assert err.value.kind == contract.UNSHARED
    finally:
        buf.close()

"""Where the IR of a load_network request comes from, read safely (IRSource).

Two forms (see the CPU daemon's contract): file paths on the daemon's machine, or
the .xml text and .bin bytes sent in the request. Paths are untrusted input: a
FIFO or a device would block a pool thread forever in open() or read(), so each
file is opened with O_NONBLOCK (which never blocks, whatever the file is), must be
a regular file within the reader's size limits (fstat), and is then read through
that very descriptor (/proc/self/fd/N), so it cannot be swapped for something else
between the check and the read. Sent content goes to anonymous memory files
(memfd), never to the file system. Every tensor of the network must stay within
MAX_TENSOR_ELEMENTS (an IR may declare a 2^70 dim).
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import os
import stat

import numpy as np

from core.microkernel import RemoteError
from ir import IRError, Network, read_ir
from ir.reader import DEFAULT_MAX_BIN_BYTES, DEFAULT_MAX_XML_BYTES

from ..contract import MAX_TENSOR_ELEMENTS, NETWORK


def _fd_path(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def _open_regular(path: str, what: str, limit: int) -> int:
    """An fd of the regular file `path` (at most `limit` bytes); RemoteError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise RemoteError(NETWORK, f"cannot find the {what} {path} on the daemon's machine; "
                                     f"check the path") from None
    except OSError as exc:
        raise RemoteError(NETWORK, f"cannot open the {what} {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RemoteError(NETWORK, f"the {what} {path} is not a regular file (a FIFO, device or "
                                         f"directory); give the path of the IR file itself")
        if st.st_size > limit:
            raise RemoteError(NETWORK, f"the {what} {path} is {st.st_size} bytes, more than the "
                                         f"daemon's limit of {limit} bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _memfd_with(data, name: str) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_sizes(network: Network, where: str) -> None:
    """Refuse a network with a tensor of more than MAX_TENSOR_ELEMENTS elements."""
    for layer in network.layers:
        for port in list(layer.inputs) + list(layer.outputs):
            n = math.prod(int(d) for d in port.dims)
            if n > MAX_TENSOR_ELEMENTS:
                raise IRError(f"layer '{layer.name}' ({layer.type}) port {port.id} has dims "
                              f"{list(port.dims)}: {n} elements, more than this daemon's limit of "
                              f"{MAX_TENSOR_ELEMENTS}; the IR is damaged or the network is too big "
                              f"for it", where=where)


class IRSource:
    """The IR of one load_network request: `ident` (the cache key part), `description`
    (for messages and status), `load()` -> ir.Network, `close()`."""

    def __init__(self, ident: tuple, description: str, fds: dict[str, int], paths: dict[str, str]):
        self.ident = ident
        self.description = description
        self._fds = fds  # {"xml"|"bin": fd} read through /proc/self/fd
        self._paths = paths  # {"xml"|"bin": the name to show in messages}

    @classmethod
    def from_files(cls, xml: str, binp: str | None) -> "IRSource":
        """Paths checked by contract.parse_load."""
        xml = os.path.abspath(xml)
        binp = os.path.abspath(binp) if binp else os.path.splitext(xml)[0] + ".bin"
        fds: dict[str, int] = {}
        try:
            fds["xml"] = _open_regular(xml, "IR topology (.xml)", DEFAULT_MAX_XML_BYTES)
            if os.path.lexists(binp):
                fds["bin"] = _open_regular(binp, "IR weights (.bin)", DEFAULT_MAX_BIN_BYTES)
        except BaseException:
            for fd in fds.values():
                os.close(fd)
            raise
        ident = ["files"]
        for key, path in (("xml", xml), ("bin", binp)):
            if key in fds:
                st = os.fstat(fds[key])
                ident.append((path, st.st_size, st.st_mtime_ns, st.st_ino))
            else:
                ident.append((path,))
        return cls(tuple(ident), xml, fds, {"xml": xml, "bin": binp})

    @classmethod
    def from_content(cls, text: bytes, data: np.ndarray) -> "IRSource":
        """The IR sent in the request (types checked by contract.parse_load)."""
        if len(text) > DEFAULT_MAX_XML_BYTES:
            raise RemoteError(NETWORK, f"the sent .xml is {len(text)} bytes, more than the daemon's "
                                         f"limit of {DEFAULT_MAX_XML_BYTES} bytes")
        digest = (hashlib.sha256(text).hexdigest(), hashlib.sha256(data).hexdigest())
        description = f"<sent IR sha256 {digest[0][:12]}>"
        fds: dict[str, int] = {}
        try:
            fds["xml"] = _memfd_with(text, "mo-core-ir-xml")
            fds["bin"] = _memfd_with(data, "mo-core-ir-bin")
        except BaseException:
            for fd in fds.values():
                os.close(fd)
            raise
        return cls(("content",) + digest, description, fds, {"xml": description + ".xml",
                                                            "bin": description + ".bin"})

    def load(self) -> Network:
        """Read and validate the IR (raises IRError naming the request's files)."""
        xml = _fd_path(self._fds["xml"])
        binp = _fd_path(self._fds["bin"]) if "bin" in self._fds else self._paths["bin"]
        try:
            network = read_ir(xml, binp)
        except IRError as exc:
            raise self._renamed(exc) from None
        check_sizes(network, self._paths["xml"])
        return network

    def _renamed(self, exc: IRError) -> IRError:
        """The reader's error with the /proc/self/fd aliases replaced by the real names."""
        def fix(text):
            if text is None:
                return None
            for key, fd in self._fds.items():
                text = text.replace(_fd_path(fd), self._paths[key])
            return text
        return IRError(fix(exc.message), faq=exc.faq, where=fix(exc.where))

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)

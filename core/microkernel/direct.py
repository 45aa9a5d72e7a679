"""The local carrier: how a client on the server's machine reaches the verbs of its
local lane (Server.handle) - a Unix SOCK_SEQPACKET socket, one datagram per message,
each connection served by a thread of its own (server.py).

Why: ZeroMQ hands every message to an I/O thread on each side, so a request and its
reply cross four thread wake-ups besides the two processes'. On this project's 2-core
VM a 200-byte ping-pong between two processes took 74 us over ZeroMQ ipc and 17 us
over a Unix seqpacket socket (7 us with the receiver polling); for a sub-millisecond
network that difference is most of the daemon's round trip.

What travels is exactly a ZeroMQ message (protocol.py's frames, signed when
the server has a key), packed into one datagram:

    u32 n_frames | n_frames x u32 frame length | the frames, back to back

checked against the protocol's limits before anything is decoded. A datagram is at
most MAX_DATAGRAM bytes (within Linux's default socket buffers): a client sends a
larger request over ZeroMQ, and a reply that does not fit comes back as the error
kind TOO_LARGE, on which the client repeats the request over ZeroMQ (the carrier
serves only idempotent verbs). The socket file is made 0600 in the server's private
runtime directory, and both ends check the peer's uid (SO_PEERCRED): only the same
user (or root) talks over it.

Raw datagrams carry a server's own binary verbs (Server.handle_raw): requests whose
whole content is a few fixed-size fields, decoded with one struct call instead of
msgpack on either side. Their first word (RAW_MARK) is larger than any frame count,
which tells them apart:

    u32 RAW_MARK | u32 word | u64 request id | payload (at most MAX_RAW_PAYLOAD bytes)

`word` is the verb's tag in a request; in a reply RAW_OK, RAW_FAILED (the handler
failed: the payload is its message) or RAW_UNKNOWN (no verb with that tag here).
They are never signed: a server with a key serves none (the peer's uid is all
that vouches for the peer). A raw request may carry file descriptors (SCM_RIGHTS,
at most MAX_FDS): shared memory handed to a worker that cannot see its parent's
/proc (a sandboxed one); only verbs registered to take them get them, the server
closes every other.
"""
from __future__ import annotations

import array
import os
import socket
import struct

from .errors import ProtocolError
from .protocol import DEFAULT_LIMITS, Limits, frame_buffer

MAX_DATAGRAM = 48 * 1024
MAX_CONNECTIONS = 256  # per server; more are accepted and closed at once
MAX_PER_PEER = 16  # per client process (SO_PEERCRED's pid): one process cannot take every connection; a refused
# client sends over ZeroMQ instead (client.py)
TOO_LARGE = "direct_too_large"
_U32 = struct.Struct("<I")
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid

RAW_MARK = 0x574D4F52  # b"ROMW" little-endian; > any Limits.max_frames
RAW_HEAD = struct.Struct("<IIQ")
MAX_RAW_PAYLOAD = 4096
RAW_OK, RAW_FAILED, RAW_UNKNOWN = 0, 1, 2
MAX_FDS = 4
# plain ints: socket's flags are IntFlag members, and an `&` or `|` with one runs enum.py's Python on
# every datagram (a few us each on a request's path once a network's weights have evicted it from the caches)
_TRUNC = int(socket.MSG_TRUNC)
_CUT = int(socket.MSG_TRUNC | socket.MSG_CTRUNC)
_FDS_SPACE = socket.CMSG_SPACE(MAX_FDS * 4)
_SOL_SOCKET, _SCM_RIGHTS = int(socket.SOL_SOCKET), int(socket.SCM_RIGHTS)


def pack(frames) -> list:
    """The buffers of one datagram holding `frames` (for socket.sendmsg)."""
    bufs = [frame_buffer(f) for f in frames]
    head = struct.pack(f"<{len(bufs) + 1}I", len(bufs), *(b.nbytes for b in bufs))
    return [head, *bufs]


def packed_size(frames) -> int:
    return 4 * (len(frames) + 1) + sum(frame_buffer(f).nbytes for f in frames)


def unpack(data, limits: Limits = DEFAULT_LIMITS) -> list[memoryview]:
    """The frames of one received datagram (views of it); ProtocolError when it is
    malformed or above the limits."""
    buf = frame_buffer(data)
    if buf.nbytes < 4:
        raise ProtocolError("datagram without a frame count")
    (n,) = _U32.unpack_from(buf, 0)
    if n == 0 or n > limits.max_frames:
        raise ProtocolError(f"datagram with {n} frames (1 to {limits.max_frames})")
    start = 4 * (n + 1)
    if buf.nbytes < start:
        raise ProtocolError("datagram shorter than its frame table")
    lengths = struct.unpack_from(f"<{n}I", buf, 4)
    if start + sum(lengths) != buf.nbytes:
        raise ProtocolError(f"datagram of {buf.nbytes} bytes does not hold frames of {sum(lengths)} bytes")
    frames, pos = [], start
    for length in lengths:
        frames.append(buf[pos:pos + length])
        pos += length
    return frames


def is_raw(data) -> bool:
    """Is this received datagram a raw one (not frames)?"""
    return len(data) >= 4 and _U32.unpack_from(data, 0)[0] == RAW_MARK


def pack_raw(word: int, rid: int, payload=b"") -> list:
    """The buffers of a raw datagram (for socket.sendmsg)."""
    return [RAW_HEAD.pack(RAW_MARK, word, rid), payload]


def unpack_raw(data) -> tuple[int, int, memoryview]:
    """(word, request id, payload view) of a raw datagram; ProtocolError when it is
    malformed or its payload is above MAX_RAW_PAYLOAD."""
    buf = frame_buffer(data)
    if buf.nbytes < RAW_HEAD.size:
        raise ProtocolError(f"raw datagram of {buf.nbytes} bytes (its header alone is {RAW_HEAD.size})")
    if buf.nbytes - RAW_HEAD.size > MAX_RAW_PAYLOAD:
        raise ProtocolError(f"raw datagram payload of {buf.nbytes - RAW_HEAD.size} bytes "
                            f"(at most {MAX_RAW_PAYLOAD})")
    mark, word, rid = RAW_HEAD.unpack_from(buf, 0)
    if mark != RAW_MARK:
        raise ProtocolError("not a raw datagram")
    return word, rid, buf[RAW_HEAD.size:]


def peer_uid(sock: socket.socket) -> int:
    return peer_credentials(sock)[1]


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED)."""
    return _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))


def trusted_peer(sock: socket.socket) -> bool:
    """The process at the other end runs as our user (or as root)."""
    try:
        uid = peer_uid(sock)
    except OSError:
        return False
    return uid in (os.getuid(), 0)


def path_for(endpoint_path: str) -> str | None:
    """Where the local carrier of a server bound at this ipc path lives (None: the
    path would be too long for a Unix socket address)."""
    path = endpoint_path + ".direct"
    return path if len(os.fsencode(path)) <= 107 else None


class Listener:
    """The server's listening socket (non-blocking; owned by the server's I/O thread)."""

    def __init__(self, path: str):
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            if os.path.exists(path):
                os.unlink(path)  # a dead server's leftover: the ipc endpoint beside it is ours now
            sock.bind(path)
            os.chmod(path, 0o600)  # (in the server's private runtime directory anyway)
            sock.listen(64)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.sock = sock
        st = os.stat(path)
        self._file = (st.st_dev, st.st_ino)

    def fileno(self) -> int:
        return self.sock.fileno()

    def accept(self) -> socket.socket | None:
        """A new connection from a trusted peer, else None (an untrusted one is closed)."""
        try:
            conn, _ = self.sock.accept()
        except OSError:  # none waiting, or none to be had now (e.g. out of file descriptors)
            return None
        if not trusted_peer(conn):
            conn.close()
            return None
        conn.setblocking(False)
        return conn

    def close(self) -> None:
        self.sock.close()
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == self._file:
                os.unlink(self.path)  # ours, not a newer server's
        except OSError:
            pass


def connect(path: str) -> socket.socket:
    """A client's connection (blocking); OSError when it cannot be made or the
    server is not our user's."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        sock.connect(path)
        if not trusted_peer(sock):
            raise PermissionError(f"{path} is served by another user")
    except OSError:
        sock.close()
        raise
    return sock


def receive(sock: socket.socket, flags: int = 0):
    """One datagram (bytes), b"" when the peer closed; ProtocolError when it was cut
    (larger than MAX_DATAGRAM)."""
    data, _, msg_flags, _ = sock.recvmsg(MAX_DATAGRAM, 0, flags)
    if msg_flags & _TRUNC:
        raise ProtocolError(f"datagram larger than {MAX_DATAGRAM} bytes")
    return data


def receive_with_fds(sock: socket.socket, flags: int = 0) -> tuple[bytes, list[int]]:
    """receive() that also takes the descriptors a datagram carries (the caller owns
    them: it must close them); ProtocolError (the descriptors closed) when the
    datagram or its descriptors were cut."""
    data, ancillary, msg_flags, _ = sock.recvmsg(MAX_DATAGRAM, _FDS_SPACE, flags)
    if not ancillary and not msg_flags & _CUT:
        return data, []  # (every request but a slot's hand-over)
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if msg_flags & _CUT:
        close_all(fds)
        raise ProtocolError(f"datagram larger than {MAX_DATAGRAM} bytes or with more than {MAX_FDS} descriptors")
    return data, list(fds)


def fds_message(fds) -> list:
    """The ancillary data of socket.sendmsg that passes `fds`."""
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []


def close_all(fds) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass

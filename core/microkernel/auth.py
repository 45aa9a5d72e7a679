"""Message authentication with a shared HMAC key (the scheme Jupyter uses).

When a key is configured on both ends, every message travels as
`[signature, header, buf0, buf1, ...]` where

    signature = HMAC-SHA256(key, for each frame f in [header, buf0, ...]:
                                     len(f) as 8-byte little-endian || f)

The length prefixes bind the frame boundaries, so bytes cannot be moved between
the header and an array frame without breaking the signature. Verification uses
a constant-time comparison. Replies are signed with the same key, so a client
also knows it is talking to the real server. Not covered (as in Jupyter): replay
of a captured message and confidentiality - use ipc:// or loopback for secrets.

The key lives in a file readable only by its owner (mode 0600); only the bytes
(stripped of surrounding whitespace) are the key.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from typing import Sequence

from .errors import AuthenticationError, EndpointError
from .protocol import frame_buffer

SIGNATURE_BYTES = 32  # SHA-256 digest size
MIN_KEY_BYTES = 16


def _digest(key: bytes, frames: Sequence) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for f in frames:
        buf = frame_buffer(f)
        mac.update(buf.nbytes.to_bytes(8, "little"))
        mac.update(buf)
    return mac.digest()


def sign_frames(key: bytes, frames: Sequence) -> list:
    """`frames` with their signature frame prepended."""
    return [_digest(key, frames), *frames]


def verify_frames(key: bytes, frames: Sequence) -> list:
    """The message frames without the signature; raises AuthenticationError when
    the signature is missing or wrong."""
    if len(frames) < 2:
        raise AuthenticationError("message is not signed")
    sig = frame_buffer(frames[0])
    if sig.nbytes != SIGNATURE_BYTES:
        raise AuthenticationError("message is not signed (no signature frame)")
    if not hmac.compare_digest(_digest(key, frames[1:]), bytes(sig)):
        raise AuthenticationError("message signature is wrong (wrong or missing key)")
    return list(frames[1:])


def check_private_file(path: str, what: str) -> os.stat_result:
    """Refuse a file (or dir) that is a symlink, not ours, or group/world accessible."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise EndpointError(f"{what} {path} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise EndpointError(f"{what} {path} is a symbolic link; refusing to use it")
    if st.st_uid != os.getuid():
        raise EndpointError(f"{what} {path} is owned by uid {st.st_uid}, not by us "
                            f"(uid {os.getuid()}); refusing to use it")
    if st.st_mode & 0o077:
        raise EndpointError(
            f"{what} {path} is accessible by group/others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"run 'chmod {'700' if stat.S_ISDIR(st.st_mode) else '600'} {path}'")
    return st


def load_key_file(path: str) -> bytes:
    """Read an HMAC key file, refusing one that others could read."""
    st = check_private_file(path, "key file")
    if not stat.S_ISREG(st.st_mode):
        raise EndpointError(f"key file {path} is not a regular file")
    with open(path, "rb") as f:
        key = f.read(4096).strip()
    if len(key) < MIN_KEY_BYTES:
        raise EndpointError(f"key file {path} holds {len(key)} bytes; a key needs at least "
                            f"{MIN_KEY_BYTES}")
    return key


def create_key_file(path: str) -> bytes:
    """Write a new random key to `path` (mode 0600, must not exist) and return it."""
    key = secrets.token_hex(32).encode("ascii")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key + b"\n")
    return key

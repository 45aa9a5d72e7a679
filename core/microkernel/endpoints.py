"""Where processes meet: the per-user runtime directory and endpoint policy.

Default endpoints are ipc:// sockets in a private directory (mode 0700), so only
our user can connect. tcp:// on a loopback address is allowed (local users could
connect, as to any loopback port); any other tcp address, and an abstract ipc
socket (ipc://@NAME: no file, so no permissions), require an HMAC key (see
auth.py), and servers/clients refuse to start on one without a key.
"""
from __future__ import annotations

import ipaddress
import os
import re
import secrets
import stat

from .auth import check_private_file
from .errors import EndpointError

RUNTIME_DIR_ENV = "MO_CORE_RUNTIME_DIR"
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")
# sun_path is 108 bytes on Linux including the NUL; libzmq rejects longer paths.
MAX_IPC_PATH = 107


def runtime_dir() -> str:
    """The private runtime directory, created on first use and verified each time.

    `$MO_CORE_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/mo-core`, else
    `/tmp/mo-core-<uid>`. It must be a real directory owned by us with no group or
    world access; otherwise EndpointError (someone else could hijack our sockets).
    """
    path = os.environ.get(RUNTIME_DIR_ENV)
    if not path:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isdir(xdg):
            path = os.path.join(xdg, "mo-core")
        else:
            path = f"/tmp/mo-core-{os.getuid()}"
    path = os.path.abspath(path)
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)  # exact mode regardless of umask
    except FileExistsError:
        pass
    except OSError as exc:
        raise EndpointError(f"cannot create the runtime directory {path}: {exc}") from None
    st = check_private_file(path, "runtime directory")
    if not stat.S_ISDIR(st.st_mode):
        raise EndpointError(f"runtime directory {path} is not a directory")
    return path


def new_ipc_endpoint(name: str) -> str:
    """A fresh `ipc://<runtime dir>/<name>-<random>.sock` endpoint."""
    if not _NAME_RE.match(name):
        raise EndpointError(f"endpoint name {name!r} must be 1-40 of [A-Za-z0-9_.-]")
    path = os.path.join(runtime_dir(), f"{name}-{secrets.token_hex(6)}.sock")
    if len(path.encode()) > MAX_IPC_PATH:
        raise EndpointError(f"ipc socket path {path} is longer than {MAX_IPC_PATH} bytes; "
                            f"set {RUNTIME_DIR_ENV} to a shorter directory")
    return "ipc://" + path


def ipc_path(endpoint: str) -> str | None:
    """The filesystem path of an ipc:// endpoint, else None."""
    return endpoint[len("ipc://"):] if endpoint.startswith("ipc://") else None


def _tcp_host(endpoint: str) -> str:
    rest = endpoint[len("tcp://"):]
    if ";" in rest:  # "src;dst" connect syntax: judge the destination
        rest = rest.rsplit(";", 1)[1]
    if rest.startswith("["):
        host, sep, _ = rest[1:].partition("]")
        return host if sep else ""
    return rest.rpartition(":")[0]


def is_loopback(endpoint: str) -> bool:
    """True for tcp://127.x.x.x:port, tcp://localhost:port and tcp://[::1]:port."""
    if not endpoint.startswith("tcp://"):
        return False
    host = _tcp_host(endpoint)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # "*", interface names, other host names
        return False


def check_endpoint(endpoint: str, *, have_key: bool) -> None:
    """Refuse endpoints that would expose a service without authentication."""
    if not isinstance(endpoint, str):
        raise EndpointError(f"endpoint must be a str, got {type(endpoint).__name__}")
    if endpoint.startswith("ipc://@"):
        # a Linux abstract socket has no file, so no directory permissions guard it:
        # any local user could connect
        if have_key:
            return
        raise EndpointError(
            f"refusing {endpoint} without an authentication key: an abstract ipc socket "
            f"(ipc://@NAME) can be reached by every local user; use an ipc:// path (the "
            f"default, in the private runtime directory) or pass a key file (--key-file)")
    if endpoint.startswith(("ipc://", "inproc://")):
        return
    if endpoint.startswith("tcp://"):
        # loopback too: every local user can connect to a tcp port (stop the service, name files it then
        # opens with its rights); only an ipc path in the private runtime directory is guarded by its mode
        if have_key:
            return
        raise EndpointError(
            f"refusing {endpoint} without an authentication key: every local user can reach a tcp port "
            f"({'loopback too' if is_loopback(endpoint) else 'and other machines'}); use an ipc:// path (the "
            f"default, in the private runtime directory) or pass a key file (--key-file)")
    raise EndpointError(f"unsupported endpoint {endpoint!r}: use ipc:// or tcp://")

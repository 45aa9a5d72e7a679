"""The microkernel: how the core talks to its worker processes and device daemons.

* protocol   - message format (msgpack header + raw array frames), strict decoding
* auth       - HMAC-SHA256 message signing and key files
* endpoints  - private runtime directory, ipc endpoints, endpoint security policy
* mailbox    - hand-off to a socket-owning thread (sockets never cross threads)
* server     - Server (ROUTER request loop, a worker pool, the local
               carrier: direct.py, a Unix socket with a thread per connection) and
               serve_main (a worker's or daemon's __main__)
* client     - Client (thread-safe DEALER request/reply; same-thread direct calls)
* launcher   - one way to spawn, greet, watch and stop every process kind
* supervisor - WorkerProcess: the supervised-worker policy over the launcher
               (restart budget, hang detection); device_daemons/client/daemon.py is the
               long-lived-daemon policy

See DESIGN.md, "Wire protocol" and "Process lifecycle", and the README's
"Processes" section.
"""
from .auth import create_key_file, load_key_file, sign_frames, verify_frames
from .client import Client, PendingCall
from .endpoints import check_endpoint, is_loopback, new_ipc_endpoint, runtime_dir
from .errors import (AuthenticationError, EndpointError, MicrokernelError, MicrokernelTimeout,
                     ProtocolError, RemoteError, ServiceGone, WorkerError)
from .protocol import (ALLOWED_DTYPES, ARRAY_REF, DEFAULT_LIMITS, PROTOCOL_VERSION, Limits, Reply,
                       Request, decode_reply, decode_request, encode_error, encode_reply,
                       encode_request, unpack_limited)
from .server import Server, serve_main, sleep_after_reply
from .supervisor import WorkerProcess

__all__ = [
    "ALLOWED_DTYPES", "ARRAY_REF", "DEFAULT_LIMITS", "PROTOCOL_VERSION",
    "AuthenticationError", "Client", "EndpointError", "Limits", "MicrokernelError",
    "MicrokernelTimeout", "PendingCall", "ProtocolError", "RemoteError", "Reply", "Request",
    "Server", "ServiceGone", "WorkerError", "WorkerProcess",
    "check_endpoint", "create_key_file", "decode_reply", "decode_request", "encode_error",
    "encode_reply", "encode_request", "is_loopback", "load_key_file", "new_ipc_endpoint",
    "runtime_dir", "serve_main", "sign_frames", "sleep_after_reply", "unpack_limited", "verify_frames",
]

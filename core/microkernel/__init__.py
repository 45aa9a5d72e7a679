"""The microkernel: how the core talks to its worker processes and device daemons.

* protocol   - message format (msgpack header + raw array frames), strict decoding
* auth       - HMAC-SHA256 message signing and key files
* endpoints  - private runtime directory, ipc endpoints, endpoint security policy
* mailbox    - hand-off to a socket-owning thread (sockets never cross threads)
* server     - Server (ROUTER request loop) and serve_main (a worker's __main__)
* client     - Client (thread-safe DEALER request/reply)
* supervisor - WorkerProcess (spawn, handshake, restart budget, clean stop)

See DESIGN.md, "Wire protocol" and "Process lifecycle".
"""
from .auth import create_key_file, load_key_file, sign_frames, verify_frames
from .client import Client, PendingCall
from .endpoints import check_endpoint, is_loopback, new_ipc_endpoint, runtime_dir
from .errors import (AuthenticationError, EndpointError, MicrokernelError, MicrokernelTimeout,
                     ProtocolError, RemoteError, WorkerError)
from .protocol import (ALLOWED_DTYPES, ARRAY_REF, DEFAULT_LIMITS, PROTOCOL_VERSION, Limits, Reply,
                       Request, decode_reply, decode_request, encode_error, encode_reply,
                       encode_request, unpack_limited)
from .server import Server, serve_main
from .supervisor import WorkerProcess

__all__ = [
    "ALLOWED_DTYPES", "ARRAY_REF", "DEFAULT_LIMITS", "PROTOCOL_VERSION",
    "AuthenticationError", "Client", "EndpointError", "Limits", "MicrokernelError",
    "MicrokernelTimeout", "PendingCall", "ProtocolError", "RemoteError", "Reply", "Request",
    "Server", "WorkerError", "WorkerProcess",
    "check_endpoint", "create_key_file", "decode_reply", "decode_request", "encode_error",
    "encode_reply", "encode_request", "is_loopback", "load_key_file", "new_ipc_endpoint",
    "runtime_dir", "serve_main", "sign_frames", "unpack_limited", "verify_frames",
]

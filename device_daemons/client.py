"""The client of the device daemons, in the shape of the Inference Engine Python API:

    from device_daemons.client import IECore
    ie = IECore(policy="auto")          # "auto": start a daemon if none runs; "existing": never
    net = ie.read_network(model="m.xml", weights="m.bin")   # validated here with ir.read_ir
    net.batch_size = 4                  # optional; net.inputs / net.outputs: {name: shape}
    ie.add_extension("my_layers.py", "CPU")                  # custom CPU kernels, before load
    exec_net = ie.load_network(net, "CPU")
    res = exec_net.infer({"data": x})   # {output name: np.ndarray}
    req = exec_net.start_async({"data": x}); req.wait(); req.outputs

The daemon is found through its record in the runtime directory (registry.py) or
given explicitly (`IECore(endpoint=..., key_file=...)`, e.g. a daemon on another
machine behind an HMAC key). For a local daemon the IR travels as file paths; for
a remote one (or `transfer="content"`) the .xml text and the .bin bytes are sent.

Failure handling, every call has a timeout (IECore(timeout=...), default 120 s):
* while a request waits, the daemon process is watched (local daemons): if it dies,
  the request fails at once with DaemonDied saying so - with the exit status when
  this process started it, and its log - and whether the next request restarts it;
* the next request reconnects: to the daemon that runs now (someone restarted it)
  or, with the "auto" policy, to a newly started one; networks are re-loaded on the
  new daemon transparently (the client remembers how each was loaded);
* no reply in time: DaemonTimeout (the daemon is shared, so it is not killed);
* errors of the request itself (bad input name or shape, unknown layer type, a
  failing custom kernel) are InferenceError with the daemon's message.
All of these derive from core.errors.Error: the CLI prints them as `[ ERROR ]`.

Shared memory: with a local daemon, inputs and outputs go through a per-request
slot in /dev/shm instead of the socket (the daemon's `shm_attach`, see
device_daemons/cpu/server.py): only a small header travels over ZeroMQ, which
saves ~0.5 ms per 1x3x224x224 round trip. IECore(shared_memory=False) or
MO_CORE_SHM=0 turn it off; anything unusual (no /dev/shm, a daemon in another
container) falls back to array frames by itself.

Thread safety: an ExecutableNetwork may be used by any number of threads at once
(the transport multiplexes requests by id; each caller gets its own reply).
Outputs of the shared-memory path are views of the request's slot, which is
reused only after they are garbage; outputs that came as frames are read-only
arrays over the received message buffers (`.copy()` one to modify it).
"""
from __future__ import annotations

import collections
import itertools
import math
import mmap
import os
import secrets
import threading
import time
import weakref
from typing import Any

import msgpack
import numpy as np
import zmq

from core.errors import Error
from core.microkernel import (DEFAULT_LIMITS, PROTOCOL_VERSION, Client, MicrokernelError,
                              ProtocolError, RemoteError, decode_reply, encode_request,
                              is_loopback, sign_frames, verify_frames)
from core.microkernel.protocol import peek_id
from core.microkernel.supervisor import describe_exit
from ir import read_ir

from . import daemon as _daemon
from . import registry
from .daemon import DaemonDied, DaemonError, DaemonNotRunning, DaemonTimeout

__all__ = ["IECore", "IENetwork", "ExecutableNetwork", "InferRequest", "InferenceError",
           "DaemonError", "DaemonDied", "DaemonNotRunning", "DaemonTimeout", "StatusCode"]

POLICIES = ("auto", "existing")
_TICK = 0.1  # how often a waiting request looks at the daemon process
_ALIVE_CACHE_S = 0.05  # a liveness check this recent is trusted before a send
_HELLO_TIMEOUT = 10.0
_SHM_DIR = "/dev/shm"
_SHM_PREFIX = "mo-core-"  # the daemon accepts only /dev/shm/mo-core-*
_ALIGN = 64
_MAX_FREE_SLOTS = 16
_INLINE_MAX_US = 500.0
_gen = itertools.count(1)


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


class _ShmSlot:
    """A shared-memory buffer mapped by this process and by the daemon."""
    __slots__ = ("id", "mm", "size")

    def __init__(self, slot_id: int, mm: mmap.mmap, size: int):
        self.id, self.mm, self.size = slot_id, mm, size


class StatusCode:
    OK = 0
    RESULT_NOT_READY = -9


class InferenceError(Error):
    """The daemon refused a request: bad input, a network it cannot run, a failing
    custom kernel. `kind` is the daemon's error kind ("input", "network", ...)."""

    def __init__(self, message: str, kind: str = "", faq: int | None = None):
        super().__init__(message, faq=faq)
        self.kind = kind


def _remote_error(exc: RemoteError, device: str) -> Error:
    if exc.kind in ("internal", "protocol", "unknown_op"):
        text = f"{device} daemon failed: {exc.kind}: {exc.message}"
        if exc.traceback:
            text += "\n" + exc.traceback
        return DaemonError(text)
    return InferenceError(f"{device} daemon: {exc.message}", exc.kind, exc.faq)


# --------------------------------------------------------------------------- connection

class _Conn:
    """One connection to one daemon incarnation."""

    def __init__(self, client: Client, endpoint: str, pid: int | None, proc, log: str | None,
                 local: bool):
        self.client = client
        self.endpoint = endpoint
        self.pid = pid
        self.proc = proc  # subprocess.Popen when this process started the daemon
        self.log = log
        self.local = local
        self.gen = next(_gen)
        self.dead: str | None = None  # why it is considered dead
        self.checked = time.monotonic()
        self.shm_ok: bool | None = None if local else False  # False: use array frames
        self.shm_free: list[_ShmSlot] = []
        self.shm_lock = threading.Lock()
        # slots lent to the caller with outputs that were collected since: appended
        # by a finalizer (any thread, any time: so nothing but an atomic append)
        self.shm_returned: collections.deque = collections.deque()

    def alive(self, max_age: float = 0.0) -> bool:
        if self.dead is not None:
            return False
        now = time.monotonic()
        if max_age and now - self.checked < max_age:
            return True
        if self.proc is not None:
            ok = self.proc.poll() is None  # also reaps it
        elif self.local and self.pid is not None:
            ok = registry.is_daemon_process(self.pid)
        else:
            ok = True  # a remote daemon: only timeouts tell
        if ok:
            self.checked = now
        return ok


class _FastChannel:
    """A DEALER socket owned by one calling thread, for synchronous requests.

    The microkernel Client hands every request to its I/O thread and every reply
    back (two thread hand-offs, ~0.1 ms on a small VM); a synchronous infer() sends
    and receives on its own thread's socket instead. Only the owning thread ever
    touches the socket; it is replaced when the connection changes and closed with
    the thread (garbage collection of the thread-local)."""

    def __init__(self, conn: _Conn, key: bytes | None):
        self.gen = conn.gen
        self.key = key
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, DEFAULT_LIMITS.max_message_bytes)
        self.sock.connect(conn.endpoint)
        self.rcvtimeo = -1
        self.ids = itertools.count(1)

    def close(self) -> None:
        self.sock.close(0)

    def __del__(self):  # the owning thread ended
        try:
            self.sock.close(0)
        except Exception:  # noqa: BLE001
            pass


class _Link:
    """An IECore's way to the daemon of one device: connects, starts, reconnects."""

    def __init__(self, core: "IECore", device: str):
        self.core = core
        self.device = device
        self._lock = threading.Lock()
        self._conn: _Conn | None = None
        self.closed = False
        self._local = threading.local()  # the calling thread's _FastChannel
        self.key: bytes | None = None

    # ----------------------------------------------------------------- connect
    def connection(self) -> _Conn:
        conn = self._conn
        if conn is not None and conn.alive(_ALIVE_CACHE_S):
            return conn
        with self._lock:
            if self.closed:
                raise DaemonError("this IECore was closed")
            conn = self._conn
            if conn is not None and conn.alive():
                return conn
            if conn is not None:
                self._drop(conn, conn.dead or "gone")
            self._conn = self._connect()
            return self._conn

    def _connect(self) -> _Conn:
        core = self.core
        proc = None
        started = False
        if core.endpoint:
            endpoint, key_file, pid, log = core.endpoint, core.key_file, None, None
        else:
            record = registry.read_record(self.device)
            if record is None:
                if core.policy != "auto":
                    raise DaemonNotRunning(
                        f"no {self.device} daemon is running and the policy is '{core.policy}'; "
                        f"start one with 'mo-core daemon start --device {self.device}' (or allow "
                        f"starting one: IECore(policy='auto'), no --no-auto-start)")
                launch = _daemon.launch(self.device, startup_timeout=core.startup_timeout)
                record, proc, started = launch.record, launch.proc, launch.started
            endpoint, key_file = record["endpoint"], record.get("key_file")
            pid, log = record["pid"], record.get("log")
        key = self.key = _daemon.load_key(key_file)
        local = endpoint.startswith("ipc://") or is_loopback(endpoint)
        try:
            client = Client(endpoint, timeout=core.timeout, key=key)
        except MicrokernelError as exc:
            raise DaemonError(f"cannot connect to the {self.device} daemon at {endpoint}: {exc}") from None
        conn = _Conn(client, endpoint, pid, proc, log, local and (pid is not None))
        if not core.shared_memory:
            conn.shm_ok = False
        if not started:
            self._hello(conn)
        return conn

    def _hello(self, conn: _Conn) -> None:
        timeout = min(_HELLO_TIMEOUT, self.core.timeout)
        try:
            info, _ = self.wait(conn, conn.client.call_async("hello"), "hello",
                                time.monotonic() + timeout)
        except DaemonTimeout:
            conn.client.close()
            raise DaemonError(
                f"the {self.device} daemon (pid {conn.pid}) at {conn.endpoint} does not answer "
                f"within {timeout:g} s; restart it: 'mo-core daemon stop --device {self.device}' "
                f"then 'mo-core daemon start --device {self.device}'") from None
        except BaseException:
            conn.client.close()
            raise
        if info.get("version") != PROTOCOL_VERSION:
            conn.client.close()
            raise DaemonError(f"the {self.device} daemon at {conn.endpoint} speaks protocol "
                              f"{info.get('version')!r}, this client {PROTOCOL_VERSION}; restart it")
        if conn.pid is not None and info.get("pid") != conn.pid:
            conn.client.close()
            raise DaemonError(f"the daemon at {conn.endpoint} is pid {info.get('pid')}, not the "
                              f"recorded pid {conn.pid}; restart it with 'mo-core daemon stop' and "
                              f"'mo-core daemon start'")
        if conn.pid is None:
            conn.pid = info.get("pid")

    def _drop(self, conn: _Conn, why: str) -> None:
        """Forget a dead or unwanted connection (call with self._lock held)."""
        if conn.dead is None:
            conn.dead = why
        conn.client.close()  # a daemon we started is long-lived: it keeps running
        if self._conn is conn:
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self.closed = True
            if self._conn is not None:
                self._drop(self._conn, "closed")

    # ----------------------------------------------------------------- requests
    def send(self, conn: _Conn, op: str, args: dict | None = None, arrays=None):
        try:
            return conn.client.call_async(op, args, arrays)
        except RemoteError:
            raise
        except MicrokernelError as exc:
            if conn.dead is not None:
                raise self._died_error(conn, op) from None
            raise DaemonError(f"cannot send '{op}' to the {self.device} daemon at "
                              f"{conn.endpoint}: {exc}") from None

    def wait(self, conn: _Conn, pending, op: str, deadline: float) -> tuple[dict, list]:
        """The reply of `pending`, watching the daemon; raises DaemonDied / DaemonTimeout
        / RemoteError (the daemon's error reply)."""
        while True:
            now = time.monotonic()
            if pending.wait(max(0.0, min(_TICK, deadline - now))):
                break
            if not conn.alive():
                if pending.wait(0.05):  # answered just before dying
                    break
                pending.cancel()
                raise self._died(conn, op)
            if time.monotonic() >= deadline:
                pending.cancel()
                raise self._timeout(conn, op)
        try:
            return pending.result(0)
        except RemoteError:
            raise
        except MicrokernelError as exc:
            if conn.dead is not None or not conn.alive():
                raise self._died(conn, op) from None
            raise DaemonError(f"'{op}' to the {self.device} daemon failed: {exc}") from None

    def _died(self, conn: _Conn, op: str) -> DaemonDied:
        with self._lock:
            first = conn.dead is None
            if first:
                if conn.proc is not None:
                    conn.proc.poll()
                    status = describe_exit(conn.proc.returncode)
                else:
                    status = "is gone"
                conn.dead = f"{status} during '{op}'"
            self._drop(conn, conn.dead)
        return self._died_error(conn, op)

    def _died_error(self, conn: _Conn, op: str) -> DaemonDied:
        msg = f"the {self.device} daemon (pid {conn.pid}) {conn.dead}"
        if "during" not in (conn.dead or ""):
            msg += f" (request '{op}')"
        msg += "; the request was lost."
        if conn.log:
            msg += f" Its log: {conn.log}."
        if self.core.policy == "auto" and not self.core.endpoint:
            msg += " The next request starts a new daemon and loads the network again."
        else:
            msg += (f" Start a new one with 'mo-core daemon start --device {self.device}'; the "
                    f"next request then loads the network again.")
        return DaemonDied(msg)

    # ----------------------------------------------------------------- shared memory
    def take_slot(self, conn: _Conn, need: int) -> _ShmSlot | None:
        """A free shared-memory slot of at least `need` bytes (made and attached when
        there is none); None when shared memory cannot be used with this daemon."""
        if conn.shm_ok is False or not self.core.shared_memory:
            return None
        while conn.shm_returned:
            try:
                self.give_back(conn, conn.shm_returned.popleft())
            except IndexError:
                break
        with conn.shm_lock:
            for i, slot in enumerate(conn.shm_free):
                if slot.size >= need:
                    return conn.shm_free.pop(i)
        size = max(_align(need), 1 << 16)
        path = os.path.join(_SHM_DIR, f"{_SHM_PREFIX}{os.getuid()}-{secrets.token_hex(8)}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            conn.shm_ok = False
            return None
        try:
            try:
                os.ftruncate(fd, size)
                mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            pending = self.send(conn, "shm_attach", {"path": path, "size": size})
            result, _ = self.wait(conn, pending, "shm_attach",
                                  time.monotonic() + min(_HELLO_TIMEOUT, self.core.timeout))
        except (OSError, RemoteError):  # e.g. the daemon sees another /dev/shm
            conn.shm_ok = False
            return None
        finally:
            try:
                os.unlink(path)  # both sides have it mapped: the name is not needed
            except OSError:
                pass
        conn.shm_ok = True
        return _ShmSlot(int(result["slot"]), mm, size)

    def give_back(self, conn: _Conn, slot: _ShmSlot) -> None:
        """Return a slot the daemon is done with."""
        with conn.shm_lock:
            if conn.dead is None and len(conn.shm_free) < _MAX_FREE_SLOTS:
                conn.shm_free.append(slot)
                return
        self.discard(conn, slot)

    def discard(self, conn: _Conn, slot: _ShmSlot) -> None:
        """Forget a slot (the daemon may still write to it: never reuse it)."""
        if conn.dead is None:
            try:
                conn.client.call_async("shm_detach", {"slot": slot.id})  # fire and forget
            except MicrokernelError:
                pass

    def fast_call(self, conn: _Conn, verb: str, args: dict, deadline: float, op: str = "") -> dict:
        """Request/reply of `verb` on the calling thread's own socket (see _FastChannel):
        the result; raises RemoteError, DaemonDied, DaemonTimeout like wait(). `op`
        names the request in messages (default: the verb)."""
        op = op or verb
        chan = getattr(self._local, "chan", None)
        if chan is None or chan.gen != conn.gen:
            if chan is not None:
                chan.close()
            if conn.dead is not None:
                raise self._died_error(conn, op)
            chan = self._local.chan = _FastChannel(conn, self.key)
        req_id = next(chan.ids)
        try:
            frames = encode_request(req_id, verb, args)
        except ProtocolError as exc:
            raise DaemonError(f"cannot send '{op}': {exc}") from None
        if chan.key is not None:
            frames = sign_frames(chan.key, frames)
        sock = chan.sock
        try:
            sock.send_multipart(frames, copy=False)
            while True:
                # a blocking receive with a timeout (RCVTIMEO) is cheaper than a poll()
                wait_ms = max(1, int(min(_TICK, deadline - time.monotonic()) * 1000))
                if wait_ms != chan.rcvtimeo:
                    sock.setsockopt(zmq.RCVTIMEO, wait_ms)
                    chan.rcvtimeo = wait_ms
                try:
                    reply = sock.recv_multipart(copy=False)
                except zmq.Again:
                    reply = None
                if reply is not None:
                    if chan.key is not None:
                        try:
                            reply = verify_frames(chan.key, reply)
                        except ProtocolError:
                            continue  # not from our daemon: ignore
                    try:
                        decoded = decode_reply(reply)
                    except ProtocolError as exc:
                        if peek_id(reply) == req_id:
                            raise DaemonError(f"malformed reply from the {self.device} daemon: {exc}") from None
                        continue
                    if decoded.id != req_id:
                        continue  # a late reply to a request that timed out
                    return decoded.unwrap()[0]
                if not conn.alive():
                    raise self._died(conn, op)
                if time.monotonic() >= deadline:
                    raise self._timeout(conn, op)
        except zmq.ZMQError as exc:
            self._local.chan = None
            chan.close()
            raise DaemonError(f"'{op}' to the {self.device} daemon failed: {exc}") from None

    def _timeout(self, conn: _Conn, op: str) -> DaemonTimeout:
        return DaemonTimeout(
            f"no reply from the {self.device} daemon (pid {conn.pid}) to '{op}' within "
            f"{self.core.timeout:g} s; it is still running (busy or hung). Raise the timeout "
            f"(IECore(timeout=...)) or restart it: 'mo-core daemon stop --device "
            f"{self.device}' then 'mo-core daemon start --device {self.device}'")

    def call(self, op: str, args: dict | None = None, arrays=None, timeout: float | None = None):
        """Connect (start) as needed and call `op`: (result, arrays)."""
        conn = self.connection()
        t = self.core.timeout if timeout is None else timeout
        pending = self.send(conn, op, args, arrays)
        try:
            return self.wait(conn, pending, op, time.monotonic() + t)
        except RemoteError as exc:
            raise _remote_error(exc, self.device) from None


# --------------------------------------------------------------------------- network

def _output_names(network) -> dict[str, list]:
    """{output name: dims} named as the CPU plan names them ("layer" / "layer.port")."""
    per_layer: dict[int, list] = {}
    for layer, port in network.outputs():
        per_layer.setdefault(layer.id, []).append((layer, port))
    out = {}
    for items in per_layer.values():
        for layer, port in items:
            out[layer.name if len(items) == 1 else f"{layer.name}.{port.id}"] = list(port.dims)
    return out


class IENetwork:
    """An IR read and validated locally (ir.read_ir): names, shapes, batch."""

    def __init__(self, model: str, weights: str | None = None):
        self.model = os.path.abspath(os.fspath(model))
        self.weights = os.path.abspath(os.fspath(weights)) if weights else \
            os.path.splitext(self.model)[0] + ".bin"
        self._ir = read_ir(self.model, self.weights)
        self.name = self._ir.name
        self._ir_inputs = {layer.name: list(layer.outputs[0].dims) for layer in self._ir.inputs()}
        self._ir_outputs = _output_names(self._ir)
        first = next(iter(self._ir_inputs.values()), None)
        self._ir_batch = first[0] if first else self._ir.batch
        self._batch: int | None = None
        self._shapes: dict[str, list] = {}

    @property
    def inputs(self) -> dict[str, list]:
        """{input name: shape} with the batch size and reshape() applied."""
        out = {}
        for name, dims in self._ir_inputs.items():
            dims = list(self._shapes.get(name, dims))
            if self._batch is not None:
                dims[0] = self._batch
            out[name] = dims
        return out

    @property
    def outputs(self) -> dict[str, list]:
        """{output name: shape} as the IR gives them (the batch applied to dim 0); the
        exact shapes after a reshape are on the ExecutableNetwork."""
        out = {}
        for name, dims in self._ir_outputs.items():
            dims = list(dims)
            if self._batch is not None and dims and dims[0] == self._ir_batch:
                dims[0] = self._batch
            out[name] = dims
        return out

    @property
    def batch_size(self) -> int:
        return self._batch if self._batch is not None else self._ir_batch

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise Error("batch_size must be a positive integer, got {!r}", value)
        self._batch = int(value)

    def reshape(self, input_shapes: dict[str, Any]) -> None:
        """New input shapes {name: dims} (IE's IENetwork.reshape)."""
        for name, dims in input_shapes.items():
            if name not in self._ir_inputs:
                raise Error("reshape: no input named {!r}; the network's inputs are {}", name,
                            ", ".join(map(repr, self._ir_inputs)))
            try:
                dims = [int(d) for d in dims]
            except (TypeError, ValueError):
                raise Error("reshape: the shape of input {!r} must be integers, got {!r}",
                            name, dims) from None
            if not dims or any(d < 1 for d in dims):
                raise Error("reshape: the shape of input {!r} must be positive integers, got {}",
                            name, dims)
            self._shapes[name] = dims
        self._batch = None

    def _load_args(self) -> dict:
        args: dict = {}
        if self._batch is not None:
            args["batch"] = self._batch
        if self._shapes:
            args["shapes"] = {k: list(v) for k, v in self._shapes.items()}
        return args

    def __repr__(self) -> str:
        return f"<IENetwork {self.name!r} inputs={self.inputs} outputs={list(self.outputs)}>"


class _Job:
    """One inference request: sent through the link's thread-safe Client (async) or
    on the calling thread's own socket (sync, see _FastChannel)."""

    def __init__(self, exec_net: "ExecutableNetwork", inputs: dict, timeout: float | None,
                 sync: bool = False):
        self.exec_net = exec_net
        self.inputs = inputs
        self.timeout = exec_net._link.core.timeout if timeout is None else timeout
        self.deadline = time.monotonic() + self.timeout
        self.sync = sync
        self.retried = False
        self.use_shm = True
        self.slot: _ShmSlot | None = None
        self.pending = None
        self._outputs: dict | None = None
        self._error: BaseException | None = None
        if not sync:
            self._send()

    def _args(self) -> tuple[str, dict]:
        """(verb, args) of the request; takes a shared-memory slot when it can."""
        exec_net = self.exec_net
        link = exec_net._link
        conn, handle = exec_net._ensure_loaded(self.deadline)
        self.conn, self.handle = conn, handle
        verb = "infer_fast" if exec_net._fast else "infer"
        if self.use_shm and conn.shm_ok is not False:
            need = sum(_align(a.nbytes) for a in self.inputs.values()) + exec_net._out_bytes
            slot = link.take_slot(conn, need)
            if slot is not None:
                spec, pos = {}, 0
                for name, arr in self.inputs.items():
                    np.copyto(np.ndarray(arr.shape, np.float32, buffer=slot.mm, offset=pos), arr)
                    spec[name] = [pos, list(arr.shape)]
                    pos = _align(pos + arr.nbytes)
                self.slot = slot
                return verb, {"handle": handle,
                              "shm": msgpack.packb({"slot": slot.id, "inputs": spec,
                                                    "out": [pos, slot.size - pos]})}
        return verb, {"handle": handle, "inputs": self.inputs}

    def _send(self) -> None:
        verb, args = self._args()
        try:
            self.pending = self.exec_net._link.send(self.conn, verb, args)
        except BaseException:
            self._drop_slot(False)
            raise

    def _exchange(self) -> dict:
        """One attempt: the reply's result (raises RemoteError, DaemonDied, ...)."""
        link = self.exec_net._link
        if self.sync:
            verb, args = self._args()
            return link.fast_call(self.conn, verb, args, self.deadline, "infer")
        if self.pending is None:
            self._send()
        return link.wait(self.conn, self.pending, "infer", self.deadline)[0]

    def _lend_slot(self, placed: dict) -> dict:
        """The outputs as views of the slot, which is lent to them: it is reused
        only once all of them are garbage (no copy of the outputs is made)."""
        slot, conn = self.slot, self.conn
        holder = np.ndarray((slot.size,), np.uint8, buffer=slot.mm)
        try:
            outputs = {}
            for name, (off, shape) in placed.items():
                shape = tuple(int(d) for d in shape)
                n = 4 * math.prod(shape)
                if not 0 <= off <= slot.size - n:
                    raise ValueError(f"output {name!r} lies outside the slot")
                outputs[name] = holder[off:off + n].view(np.float32).reshape(shape)
        except (TypeError, ValueError) as exc:
            self._drop_slot(False)
            raise DaemonError(f"the {self.exec_net._link.device} daemon sent a bad shared memory "
                              f"reply: {exc}") from None
        self.slot = None
        # every output's .base is `holder`: when the last output dies, so does holder
        weakref.finalize(holder, conn.shm_returned.append, slot).atexit = False
        return outputs

    def _drop_slot(self, reusable: bool) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            link = self.exec_net._link
            (link.give_back if reusable else link.discard)(self.conn, slot)

    def result(self, timeout: float | None = None) -> dict | None:
        """Outputs, or None when `timeout` (s) ran out first; raises the request's error."""
        if self._error is not None:
            raise self._error
        if self._outputs is not None:
            return self._outputs
        link = self.exec_net._link
        if timeout is not None and self.pending is not None and not self.pending.wait(timeout):
            if time.monotonic() < self.deadline:
                return None
        try:
            while True:
                try:
                    result = self._exchange()
                    break
                except RemoteError as exc:
                    self.pending = None
                    if exc.kind == "shm" and self.use_shm:
                        # the daemon dropped our slot (too many clients): use frames
                        self.use_shm = False
                        self._drop_slot(False)
                        continue
                    self._drop_slot(True)  # the daemon is done with it
                    if exc.kind == "handle" and not self.retried:
                        # the daemon no longer knows the network (restarted at the same
                        # endpoint): load it again and retry once
                        self.retried = True
                        self.exec_net._forget(self.conn, self.handle)
                        continue
                    raise _remote_error(exc, link.device) from None
        except BaseException as exc:
            self._drop_slot(False)  # died / timed out: the daemon may still write to it
            self._error = exc
            raise
        self.exec_net._observe(result.get("compute_us"))
        placed = result.get("outputs_shm")
        if isinstance(placed, bytes) and self.slot is not None:
            try:
                placed = msgpack.unpackb(placed, raw=False, max_ext_len=0)
            except Exception:  # noqa: BLE001 - reported below
                placed = None
            outputs = self._lend_slot(placed if isinstance(placed, dict) else {"?": None})
        else:
            outputs = result.get("outputs")
            self._drop_slot(True)
        if not isinstance(outputs, dict):
            self._error = DaemonError(f"the {link.device} daemon sent a reply without outputs")
            raise self._error
        self._outputs = outputs
        return outputs


class InferRequest:
    """A reusable inference request slot (IE's InferRequest)."""

    def __init__(self, exec_net: "ExecutableNetwork", index: int = -1):
        self._exec_net = exec_net
        self.index = index
        self._job: _Job | None = None
        self._t0 = 0.0
        self.latency: float | None = None  # ms of the last completed request
        self.outputs: dict[str, np.ndarray] = {}

    def async_infer(self, inputs: dict | None = None, timeout: float | None = None) -> None:
        """Send the request; wait() for it."""
        self.outputs = {}
        self.latency = None
        self._t0 = time.perf_counter()
        self._job = None
        self._job = _Job(self._exec_net, self._exec_net._prepare(inputs), timeout)

    def wait(self, timeout: float | None = -1) -> int:
        """Block until the request completes (timeout -1 / None: up to the request's own
        timeout; else at most `timeout` s). StatusCode.OK when done,
        StatusCode.RESULT_NOT_READY when `timeout` ran out first; a failed request raises."""
        if self._job is None:
            if self.outputs:
                return StatusCode.OK
            raise Error("wait(): the request was not started (call async_infer first)")
        outputs = self._job.result(None if timeout is None or timeout < 0 else timeout)
        if outputs is None:
            return StatusCode.RESULT_NOT_READY
        if not self.outputs:
            self.latency = (time.perf_counter() - self._t0) * 1e3
            self.outputs = outputs
        return StatusCode.OK

    def infer(self, inputs: dict | None = None, timeout: float | None = None) -> dict:
        """Synchronous request (sent from this thread); returns the outputs."""
        self.outputs = {}
        self.latency = None
        t0 = time.perf_counter()
        self._job = None
        self.outputs = _Job(self._exec_net, self._exec_net._prepare(inputs), timeout, sync=True).result()
        self.latency = (time.perf_counter() - t0) * 1e3
        return self.outputs


class ExecutableNetwork:
    """A network loaded on a device daemon (IE's ExecutableNetwork)."""

    def __init__(self, core: "IECore", network: IENetwork, link: _Link, num_requests: int):
        self._core = core
        self._link = link
        self.name = network.name
        self._network = network
        self._lock = threading.Lock()
        self._loaded: tuple[_Conn, int] | None = None
        self._args = network._load_args()
        self.inputs: dict[str, list] = {}
        self.outputs: dict[str, list] = {}
        self.warnings: list[str] = []
        self.cached = False
        self._box: dict = {}  # what the finalizer unloads (it must not reference self)
        self._out_bytes = 0
        self._fast = False  # run in the daemon's I/O thread (see _observe)
        self._inline_ok = False  # the daemon allows it: no custom kernel (unpredictable time)
        self._compute_us: float | None = None
        self._ensure_loaded(time.monotonic() + core.timeout)
        self.requests = [InferRequest(self, i) for i in range(max(1, int(num_requests)))]
        self._finalizer = weakref.finalize(self, ExecutableNetwork._unload_quietly, self._box)

    @property
    def device(self) -> str:
        return self._link.device

    @property
    def input_info(self) -> dict[str, list]:
        return self.inputs

    # ----------------------------------------------------------------- loading
    def _source_args(self, conn: _Conn) -> tuple[dict, list]:
        net = self._network
        if self._core.transfer == "paths" or (self._core.transfer == "auto" and conn.local):
            args = {"xml": net.model, "bin": net.weights}
        else:
            try:
                with open(net.model, "rb") as f:
                    xml_text = f.read()
                with open(net.weights, "rb") as f:
                    bin_data = np.frombuffer(f.read(), np.uint8)
            except OSError as exc:
                raise Error("cannot read the IR to send it to the daemon: {}", exc) from None
            args = {"xml_text": xml_text, "bin_data": bin_data}
        args.update(self._args)
        kernels = self._core._extensions.get(self._link.device, [])
        if kernels:
            args["kernels"] = list(kernels)
        return args, []

    def _ensure_loaded(self, deadline: float) -> tuple[_Conn, int]:
        link = self._link
        conn = link.connection()
        loaded = self._loaded
        if loaded is not None and loaded[0] is conn:
            return loaded
        with self._lock:
            conn = link.connection()
            loaded = self._loaded
            if loaded is not None and loaded[0] is conn:
                return loaded
            args, arrays = self._source_args(conn)
            pending = link.send(conn, "load_network", args, arrays)
            try:
                result, _ = link.wait(conn, pending, "load_network", deadline)
            except RemoteError as exc:
                raise _remote_error(exc, link.device) from None
            self.inputs = {n: list(i["shape"]) for n, i in result["inputs"].items()}
            self.outputs = {n: list(i["shape"]) for n, i in result["outputs"].items()}
            self._out_bytes = sum(_align(4 * int(np.prod(shape, dtype=np.int64)))
                                  for shape in self.outputs.values())
            self.warnings = list(result.get("warnings") or [])
            self.cached = bool(result.get("cached"))  # the daemon had it compiled already
            self._inline_ok = bool(result.get("inline_ok"))
            self._fast = False
            self._loaded = (conn, int(result["handle"]))
            self._box["loaded"] = self._loaded
            return self._loaded

    def _observe(self, compute_us) -> None:
        """Track how long the daemon computes this network (moving average): a network
        that takes less than _INLINE_MAX_US is run with `infer_fast`, in the daemon's
        I/O thread, saving the two thread hand-offs of its worker pool (they cost more
        than such a network takes); slower ones keep the pool (parallel, never
        delaying other clients' replies by more than _INLINE_MAX_US). Networks with
        custom kernels always use the pool: their time may depend on the data."""
        if not isinstance(compute_us, (int, float)):
            return
        avg = self._compute_us
        avg = float(compute_us) if avg is None else 0.8 * avg + 0.2 * float(compute_us)
        self._compute_us = avg
        self._fast = self._inline_ok and avg < _INLINE_MAX_US

    def _forget(self, conn: _Conn, handle: int) -> None:
        with self._lock:
            if self._loaded == (conn, handle):
                self._loaded = None

    @staticmethod
    def _unload_quietly(box: dict) -> None:
        loaded = box.pop("loaded", None)
        if loaded is None:
            return
        conn, handle = loaded
        try:
            if conn.dead is None and not conn.client.closed:
                conn.client.call_async("unload", {"handle": handle})  # fire and forget
        except Exception:  # noqa: BLE001 - best effort (also runs at interpreter exit)
            pass

    def close(self) -> None:
        """Unload the network from the daemon (also done when this object is collected)."""
        loaded = self._loaded
        self._loaded = None
        self._box.pop("loaded", None)
        if loaded is None:
            return
        conn, handle = loaded
        try:
            if conn.dead is None and not conn.client.closed:
                conn.client.call("unload", {"handle": handle}, timeout=5.0)
        except MicrokernelError:
            pass

    def __enter__(self) -> "ExecutableNetwork":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----------------------------------------------------------------- inference
    def _prepare(self, inputs: dict | None) -> dict:
        expected = ", ".join(f"'{n}' {s}" for n, s in self.inputs.items())
        if inputs is None:
            raise InferenceError(f"infer: no inputs given; the network's inputs are {expected}", "input")
        if not isinstance(inputs, dict):
            raise InferenceError(f"infer takes a dict {{input name: array}}, got {type(inputs).__name__}; "
                                 f"the network's inputs are {expected}", "input")
        out = {}
        for name, value in inputs.items():
            if not isinstance(name, str):
                raise InferenceError(f"infer: input names must be str, got {name!r}", "input")
            arr = np.asarray(value)
            if arr.dtype != np.float32:
                if arr.dtype.kind not in "fiub":
                    raise InferenceError(f"infer: input {name!r} has dtype {arr.dtype}; give numbers "
                                         f"(float32)", "input")
                arr = arr.astype(np.float32)
            out[name] = arr
        return out

    def infer(self, inputs: dict | None = None, timeout: float | None = None) -> dict[str, np.ndarray]:
        """Run one request: {output name: array}. Thread-safe."""
        return _Job(self, self._prepare(inputs), timeout, sync=True).result()

    def start_async(self, inputs: dict | None = None, request_id: int | None = None,
                    timeout: float | None = None) -> InferRequest:
        """Start a request; returns its InferRequest (`wait()`, then `.outputs`).
        IE's order `start_async(request_id, inputs)` works too."""
        if isinstance(inputs, int) and not isinstance(inputs, bool):
            inputs, request_id = request_id, inputs
        req = self.requests[request_id] if request_id is not None else InferRequest(self)
        req.async_infer(inputs, timeout)
        return req

    def __repr__(self) -> str:
        return f"<ExecutableNetwork {self.name!r} on {self.device}>"


# --------------------------------------------------------------------------- core

class IECore:
    """Entry point (IE's IECore): reads networks, loads them on device daemons."""

    def __init__(self, policy: str = "auto", *, timeout: float = 120.0, startup_timeout: float = 60.0,
                 endpoint: str | None = None, key_file: str | None = None, transfer: str = "auto",
                 shared_memory: bool | None = None):
        if policy not in POLICIES:
            raise Error("IECore policy must be one of {}, got {!r}", ", ".join(POLICIES), policy)
        if transfer not in ("auto", "paths", "content"):
            raise Error("IECore transfer must be 'auto', 'paths' or 'content', got {!r}", transfer)
        if not timeout or timeout <= 0:
            raise Error("IECore timeout must be > 0 s, got {!r}", timeout)
        if endpoint:
            _daemon.check_daemon_endpoint(endpoint, bool(key_file))
        self.policy = policy
        self.timeout = float(timeout)
        self.startup_timeout = float(startup_timeout)
        self.endpoint = endpoint
        self.key_file = os.path.abspath(key_file) if key_file else None
        self.transfer = transfer
        if shared_memory is None:
            shared_memory = os.environ.get("MO_CORE_SHM", "1") != "0" and os.path.isdir(_SHM_DIR)
        self.shared_memory = bool(shared_memory)
        self._links: dict[str, _Link] = {}
        self._links_lock = threading.Lock()
        self._extensions: dict[str, list[str]] = {}

    @property
    def available_devices(self) -> list[str]:
        return sorted(_daemon.DEVICES)

    def _link(self, device: str) -> _Link:
        device = _daemon.normalize_device(device)
        with self._links_lock:
            link = self._links.get(device)
            if link is None:
                link = self._links[device] = _Link(self, device)
            return link

    def read_network(self, model: str, weights: str | None = None) -> IENetwork:
        return IENetwork(model, weights)

    def add_extension(self, extension_path: str, device_name: str = "CPU") -> list[str]:
        """Custom kernels (a Python file of CPU kernel classes) for every later
        load_network on `device_name`. The daemon imports the file now, so a broken
        file is reported here. Returns the layer types it provides."""
        link = self._link(device_name)
        path = os.fspath(extension_path)
        if not self.endpoint or is_loopback(self.endpoint) or self.endpoint.startswith("ipc://"):
            path = os.path.abspath(path)  # the daemon runs in another directory
            if not os.path.isfile(path):
                raise InferenceError(f"cannot find the custom kernel file {path}", "kernel")
        result, _ = link.call("add_extension", {"path": path, "check_only": True})
        paths = self._extensions.setdefault(link.device, [])
        if path not in paths:
            paths.append(path)
        return list(result.get("types", []))

    def load_network(self, network: IENetwork, device_name: str = "CPU", config: dict | None = None,
                     num_requests: int = 1) -> ExecutableNetwork:
        if not isinstance(network, IENetwork):
            raise Error("load_network takes an IENetwork (from IECore.read_network), got {}",
                        type(network).__name__)
        return ExecutableNetwork(self, network, self._link(device_name), num_requests)

    def get_versions(self, device_name: str = "CPU") -> dict:
        link = self._link(device_name)
        info, _ = link.call("status")
        return {link.device: {"version": info.get("version"), "pid": info.get("pid")}}

    def daemon_pid(self, device_name: str = "CPU") -> int | None:
        """Pid of the daemon this core talks to for `device_name` (connecting if needed)."""
        return self._link(device_name).connection().pid

    def close(self) -> None:
        """Close the connections (running daemons keep running)."""
        with self._links_lock:
            links = list(self._links.values())
        for link in links:
            link.close()

    def __enter__(self) -> "IECore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

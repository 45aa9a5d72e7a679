"""How an inference request travels to its daemon: decided here, and only here, for
every request (ExecutableNetwork.infer, InferRequest.infer and async_infer).

* The local carrier, when this client may use it: the daemon is on this machine and
  offers one (its hello's direct.path: a Unix socket, core/microkernel/direct.py),
  shared memory is allowed (IECore(shared_memory=...), MO_CORE_SHM) and the daemon
  needs no key (raw verbs are never signed). The request is a bound request
  (bound_client.py): the inputs copied into the binding's shared-memory slot, a
  small datagram each way, the outputs views of the slot; the daemon computes it on
  the thread of the calling thread's own connection, with no hand-off.
* The fallback, when the carrier is not there or does not take the request
  (per-layer counts asked, no slot or binding to be had, inputs of other names or
  shapes, which the fallback's error reply then names): `infer` to the daemon's
  main socket over ZeroMQ, the arrays as message frames, sent from the calling
  thread; a handle the daemon does not know (restarted at the same endpoint) loads
  the network again, once.
A request that failed on the carrier raises its error there; none is run twice.

A request to the carrier polls for its reply before sleeping when the daemon's last
reply said that its request left a CPU free (bound_protocol.SPARE_CPU: a one-thread
team) and computed in less than MO_CORE_SPIN_US (default 500 us; waking a sleeping
thread costs ~0.1 ms on a VM, more than such a request): for that compute time plus
MO_CORE_SPIN_US, so that a reply a little later than the last still finds it polling
(the OD API SSD export computes in ~0.42 ms: polling 0.5 ms from the send, its client
often slept through its reply, 0.49-0.50 ms a request on one thread against 0.44-0.46
polling past the compute). Else it sleeps at once, leaving the cores to
the computation - a client polling beside a team of every CPU took one of its CPUs
(the SSD export, 2 CPUs: 1.03 ms a request instead of 0.47).
"""
from __future__ import annotations

from typing import Protocol

from core.microkernel import ProtocolError, RemoteError

from .. import bound_protocol as bound
from .. import contract
from .bound_client import BoundRequests
from .daemon import DaemonError
from .errors import remote_error
from .transport import Connection, Deadline, Link

SPIN_S = bound.SPIN_S


class LoadedNetwork(Protocol):
    """A network requests can run on (see ExecutableNetwork)."""

    link: Link
    perf_count: bool  # ask the daemon for per-step times (the reply's "perf")
    inputs: dict  # {name: shape} on the daemon
    output_bytes: int  # bytes of all outputs, each aligned as in a slot
    bound: BoundRequests | None  # its bound requests on the current connection (set here)
    compute_us: int | None  # the daemon's compute time of its last request on the carrier (set here)
    poll_s: float  # how long its next request polls for the reply (set here from the last reply; 0: it sleeps)

    def loaded(self, deadline: Deadline) -> tuple[Connection, int]:
        """(connection, handle) of the network on the current daemon, loading it
        there first when needed."""

    def forget(self, conn: Connection, handle: int) -> None:
        """The daemon no longer knows `handle`: load again on the next request."""


def carrier_usable(conn: Connection) -> bool:
    """Can requests on this connection take the local carrier?"""
    return (conn.carrier is not None and conn.carrier.direct_usable and conn.slots.ok is not False
            and bound.INFER_BIND in conn.carrier_ops and bound.RAW_INFER in conn.carrier_raw)


def run(net: LoadedNetwork, inputs: dict, deadline: Deadline) -> tuple[dict, list]:
    """(outputs, the daemon's per-layer rows or []) of one request (module doc)."""
    if not net.perf_count:
        conn, handle = net.loaded(deadline)
        b = net.bound
        if b is None or not b.serves(conn, handle, net.inputs):
            # (made anew after a reload or a reshape; a carrier that became unusable since makes
            # b.run return None: the fallback then)
            b = _bind(net, conn, handle) if carrier_usable(conn) else None
        if b is not None:
            done = b.run(inputs, deadline, net.poll_s)
            if done is not None:
                outputs, compute_us, spare_cpu = done
                net.compute_us = compute_us
                net.poll_s = SPIN_S + compute_us / 1e6 if spare_cpu and compute_us < SPIN_S * 1e6 else 0.0
                return outputs, []
    return _fallback(net, inputs, deadline)


def _bind(net: LoadedNetwork, conn: Connection, handle: int) -> BoundRequests:
    """New bound requests of the network on this connection (the old ones closed)."""
    if net.bound is not None:
        net.bound.close()
    b = net.bound = BoundRequests(net.link, conn, handle, net.inputs, net.output_bytes)
    return b


def _fallback(net: LoadedNetwork, inputs: dict, deadline: Deadline) -> tuple[dict, list]:
    link = net.link
    retried = False
    while True:
        conn, handle = net.loaded(deadline)
        args = contract.infer_request(handle, inputs, perf=net.perf_count)
        try:
            result = link.call_here(conn, contract.INFER, args, deadline)
        except RemoteError as exc:
            if exc.kind == contract.HANDLE and not retried:
                # the daemon no longer knows the network (restarted at the same endpoint):
                # load it again and retry once
                retried = True
                net.forget(conn, handle)
                continue
            raise remote_error(exc, link.device) from None
        try:
            outputs = contract.check_infer_result(result)
            # the caller owns its outputs, as on the carrier: frames decode read-only (protocol.py)
            outputs = {name: value if value.flags.writeable else value.copy() for name, value in outputs.items()}
            return outputs, contract.check_perf(result) or []
        except ProtocolError as exc:
            raise DaemonError(f"the {link.device} daemon broke the contract: {exc}") from None


def deadline_of(link: Link, timeout: float | None) -> Deadline:
    """When a request given `timeout` (None: the IECore's) must be done."""
    return Deadline.after(link.settings.timeout if timeout is None else timeout)

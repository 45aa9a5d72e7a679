"""The shared memory of the local carrier between a client and a daemon on the same
machine: what both sides must agree on (how a slot is made and found, how tensors
are laid out in it, how the nested specs are decoded). The client's side is
client/shm_client.py, the daemons' service/shm_slots.py; both import these names,
so the layout is defined once.

Moving a 1x3x224x224 float32 tensor through a ZeroMQ ipc socket and back costs
~0.5 ms of socket copies, more than many networks take to run. A local client
instead asks the daemon for a slot (`shm_create {size}`): the DAEMON makes an
anonymous memory file (memfd) of that size, seals it so that its size can never
change (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), maps it and answers `{slot,
path, name}`; the client opens `path` (`/proc/<daemon pid>/fd/<n>`, so only the
daemon's own user can), checks that the file it got is that memfd (`name`, a random
token, in the link of its own fd) and maps it too. Because of the seals, no client
can truncate a slot under the daemon's feet (a truncated mapping would kill the
daemon with SIGBUS on its next read).

A binding (bound_protocol.py: `infer_bind {handle, shm: msgpack({slot, inputs:
{name: [offset, shape]}, out: [offset, capacity]})}`) says where in the slot a
network's inputs are and where its outputs may go; the reply's placed spec
(msgpack {name: [offset, shape]}) where each output will be. Tensors are float32,
each starting at a multiple of ALIGN bytes. Remote clients use frames. The nested
msgpack is decoded with the protocol's limits (`unpack_spec`), as strictly as a
header.
"""
from __future__ import annotations

from core.microkernel import DEFAULT_LIMITS, ProtocolError, unpack_limited

ALIGN = 64
MEMFD_PREFIX = "mo-core-slot-"  # + a random token: the memfd's name, seen in /proc links
MAX_SPEC_BYTES = 64 << 10  # an `shm` argument or `outputs` result of infer_bind


def align(n: int) -> int:
    """`n` rounded up to a multiple of ALIGN (where the next tensor of a slot starts)."""
    return -(-n // ALIGN) * ALIGN


def memfd_link(name: str) -> str:
    """What readlink(/proc/.../fd/N) shows for the memfd called `name`."""
    return f"/memfd:{name} (deleted)"


def unpack_spec(packed, what: str):
    """A nested msgpack spec (infer_bind's `shm` / `outputs`), decoded with the protocol's
    size and element limits; raises ProtocolError."""
    if not isinstance(packed, bytes):
        raise ProtocolError(f"'{what}' must be msgpack bytes, got {type(packed).__name__}")
    return unpack_limited(packed, DEFAULT_LIMITS, what=f"'{what}'", max_bytes=MAX_SPEC_BYTES)


def tensor_span(offset, shape, where: str) -> tuple[int, tuple, int]:
    """(offset, shape, bytes) of a float32 tensor placed in a slot, checked: offset a
    non-negative multiple of 4, shape a list of at most 8 non-negative ints."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or offset % 4:
        raise ProtocolError(f"{where}: bad offset {offset!r:.40}")
    if not isinstance(shape, list) or len(shape) > DEFAULT_LIMITS.max_rank or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ProtocolError(f"{where}: bad shape {shape!r:.80}")
    nbytes = 4
    for d in shape:
        nbytes *= d
    return offset, tuple(shape), nbytes

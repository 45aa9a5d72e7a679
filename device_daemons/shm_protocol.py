"""The shared-memory fast path between a client and a daemon on the same machine:
what both sides must agree on (where slot files live, how tensors are laid out in
a slot). The client's side is shm_client.py, the CPU daemon's cpu/shm_slots.py;
both import these names, so the layout is defined once.

Moving a 1x3x224x224 float32 tensor through a ZeroMQ ipc socket and back costs
~0.5 ms of socket copies, more than many networks take to run. A client on the
same machine may instead create a file in /dev/shm (mode 0600, random name),
`shm_attach` it (the daemon maps it, then the client unlinks it: the memory lives
while both map it), and send `infer {handle, shm: msgpack({slot, inputs: {name:
[offset, shape]}, out: [offset, capacity]})}`: the inputs are read from the slot
and the outputs written back to it, the reply is `{outputs_shm: msgpack({name:
[offset, shape]})}` (or plain `outputs` arrays when they do not fit). Only the
small header travels over the socket. Tensors are float32, each starting at a
multiple of ALIGN bytes. Remote clients always use frames.
"""
from __future__ import annotations

SHM_DIR = "/dev/shm"
SHM_PREFIX = "mo-core-"  # the daemon accepts only /dev/shm/mo-core-*
ALIGN = 64


def align(n: int) -> int:
    """`n` rounded up to a multiple of ALIGN (where the next tensor of a slot starts)."""
    return -(-n // ALIGN) * ALIGN

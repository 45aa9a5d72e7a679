"""The daemons' shared-memory slots (device_daemons/service/shm_slots.py) and their owners'
pidfds: a pidfd is held only while its process owns a slot, so a client that names pid after
pid cannot make the daemon hold one for every process of the machine; an ended owner's
slots go at the next create. Real processes (sleep), real memfds and pidfds."""
from __future__ import annotations

import os
import subprocess

from device_daemons.service.shm_slots import ShmSlots


def pidfds() -> int:
    """How many pidfds this process holds."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[pidfd]"
        except OSError:  # (the listing's own descriptor)
            pass
    return count


def test_owner_pidfds_are_bounded_by_the_slots():
    sleepers = [subprocess.Popen(["sleep", "60"]) for _ in range(12)]
    slots = ShmSlots(max_slots=2)
    try:
        before = pidfds()
        for p in sleepers:  # each create names another owner; the oldest slot is evicted
            slot = slots.create(4096, p.pid)
        assert len(slots) == 2
        assert pidfds() - before == 2  # the two owners of slots, not all twelve
        slots.detach(slot["slot"])
        assert len(slots) == 1 and pidfds() - before == 1
    finally:
        slots.close()
        for p in sleepers:
            p.kill()
            p.wait()


def test_the_slots_of_an_ended_owner_go_at_the_next_create():
    owner = subprocess.Popen(["sleep", "60"])
    slots = ShmSlots()
    try:
        slots.create(4096, owner.pid)
        slots.create(4096, owner.pid)
        assert len(slots) == 2
        owner.kill()
        owner.wait()
        slots.create(4096, os.getpid())
        assert len(slots) == 1
    finally:
        slots.close()

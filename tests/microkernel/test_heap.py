"""The daemons' plans and the serving front end keep freed buffers (core/microkernel/heap.py):
a request-sized buffer allocated and freed again and again page-faults once, not
every time. Each case in a fresh interpreter: mallopt changes the whole process."""
import subprocess
import sys

PROGRAM = """
import resource, sys
from core.microkernel.heap import keep_freed_buffers
if sys.argv[1] == "kept":
    assert keep_freed_buffers()
def request():  # what a request does: a body-sized buffer, a copy of it, both freed
    body = bytearray(600_000)
    body[::4096] = b"x" * len(body[::4096])
    copy = bytes(body)
    del body, copy
for _ in range(20):
    request()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    request()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 200)
"""


def faults_per_request(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True)
    return float(out.stdout)


def test_freed_request_buffers_are_reused_without_page_faults():
    assert faults_per_request("glibc") > 100  # (600 KB: 147 pages, faulted in each time)
    assert faults_per_request("kept") < 2

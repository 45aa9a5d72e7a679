"""The C loop that executes a run of oneDNN primitives (sequence.c; used by
onednn/sequence.py)."""
from __future__ import annotations

import os

from ...native_build import load_native

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sequence.c")
CDEF = """
int64_t mo_run_sequence(uintptr_t execute, const uintptr_t *prims, uintptr_t stream, const int32_t *nargs,
                        const uintptr_t *args, int64_t count, int32_t *status);
"""


def library():
    """(ffi, lib), built / loaded now (NativeUnavailable says why it cannot)."""
    return load_native(SOURCE, CDEF)


def load():
    library()

"""Compiling the daemons' C sources once per machine and loading them (cffi ABI
mode): the CPU daemon's native kernels (cpu/native/), the GPU plugin's enqueue
loop (gpu/native/); what every device's plan may use, so it sits beside plan_io.py.

A source is built with the system C compiler (`$CC`, else gcc / cc; the set-up
installs one for pycaffe) into $MO_CORE_HOME/native/<name>-<hash>.so, the hash
covering the source, the flags and the compiler binary (path, size, mtime), so a
changed source or compiler builds anew and concurrent first uses each see a whole file (atomic rename).
Later processes only dlopen it. No compiler, or a failed build: NativeUnavailable
with the reason, and the layer keeps its numpy kernel.

    from device_daemons.native_build import load_native
    ffi, lib = load_native("path/to/nms.c", "int mo_nms_classes(...);")   # cached per process
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading


class NativeUnavailable(RuntimeError):
    """A native library (oneDNN, or one of our C sources) cannot be loaded here; the
    message says why and what to install."""


# no -ffast-math: results must be IEEE's, as numpy's; -fno-trapping-math only lets
# the compiler evaluate a division whose result a select then drops (vectorizing)
FLAGS = ("-O3", "-std=c99", "-shared", "-fPIC", "-fno-math-errno", "-fno-trapping-math")
OPENMP = ("-fopenmp",)  # for a source with OpenMP pragmas: libgomp, the runtime oneDNN's build links
LIBS = ("-lm",)
SPIN_COUNT = 30000  # pause-instruction spins of an OpenMP thread at a barrier before it sleeps
_INCLUDE = re.compile(rb'^#include "([A-Za-z0-9_]+\.[ch])"', re.M)
_LOCK = threading.Lock()
_LOADED: dict[str, tuple | NativeUnavailable] = {}  # a failure too: not rebuilt by every plan


def openmp_environment() -> None:
    """libgomp's wait policy, set before the first library that links it loads (it reads
    the environment then): OpenMP threads that reach a barrier spin (SPIN_COUNT: 0.5-0.7 ms
    on the EPYC VM - `perf sched`: a team thread's run after a request's end), then sleep.
    Sleeping threads cost a futex wake per region (MobileNetV3Small 4.4 -> 0.75 ms on 2
    quiet cores with a short spin). The spin covers a
    whole request's barriers even when the machine has idled: after 100 ms idle, with
    3000 spins (~0.07 ms), GoogLeNet's threads slept inside the request and were woken
    again (`perf stat`, in-process: ~140 context switches a request instead of ~3; on a VM
    a halted vCPU's wake-up crosses the hypervisor), 16 -> 30-45 ms, where OpenVINO stays
    at 17-22; with 30000, 16-22 ms. The price: ~0.6 ms of one core spun after a request ends (OpenVINO's
    threads: ~1 ms), and while other processes keep every core busy a spinning thread
    can hold a core its partner needs (two busy-loop processes beside GoogLeNet: a
    phase of 155 ms requests, then 32-40 ms as with 3000; OpenVINO 52-60; libgomp's own
    default, 300000, made it 5-7x slower for good). The policy "active" because
    libgomp spins only 100 times (1000 when active) once a process has more team threads
    than CPUs - a daemon serving several connections, each running requests on a thread
    of its own (MobileNetV3Small 5.9 -> 2.2 ms then). OMP_WAIT_POLICY or GOMP_SPINCOUNT
    in the environment decide instead (passive: sleep at once)."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "ACTIVE"
        os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)


def _cache_dir() -> str:
    home = os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))
    return os.path.join(home, "native")


def _compiler() -> str:
    for name in (os.environ.get("CC"), "gcc", "cc"):
        path = shutil.which(name) if name else None
        if path:
            return path
    raise NativeUnavailable("a C compiler is needed once to build the CPU backend's native kernels; install gcc "
                            "(apt-get install gcc)")


def _source_text(source: str) -> bytes:
    """The source with the local files it includes (#include "x.c" beside it): what a
    build depends on."""
    with open(source, "rb") as f:
        text = f.read()
    for name in _INCLUDE.findall(text):
        text += b"\0" + _source_text(os.path.join(os.path.dirname(source), name.decode()))
    return text


def _build(name: str, source: str) -> str:
    cc = _compiler()
    real = os.path.realpath(cc)
    st = os.stat(real)  # the compiler itself, without running it: a cached build costs no process
    text = _source_text(source)
    flags = FLAGS + (OPENMP if _uses_openmp(text) else ())
    digest = hashlib.sha256(text + "\0".join(flags + LIBS + (real, str(st.st_size), str(st.st_mtime_ns))).encode()
                            ).hexdigest()[:16]
    cache = _cache_dir()
    path = os.path.join(cache, f"{name}-{digest}.so")
    if os.path.isfile(path):
        return path
    os.makedirs(cache, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=f".{name}-", suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run([cc, *flags, "-o", tmp, source, *LIBS], capture_output=True, text=True, timeout=300)
        if done.returncode:
            raise NativeUnavailable(f"building {os.path.basename(source)} failed: {done.stderr.strip()[-500:]}")
        os.replace(tmp, path)
    except (OSError, subprocess.SubprocessError) as err:
        raise NativeUnavailable(f"building {os.path.basename(source)} with {cc} failed: {err}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _uses_openmp(text: bytes) -> bool:
    return re.search(rb"^\s*#pragma omp ", text, re.M) is not None


def load_native(source: str, cdef: str):
    """(ffi, lib) of the C file `source`, built on first use (cached per process)."""
    name = os.path.splitext(os.path.basename(source))[0]
    with _LOCK:
        if name not in _LOADED:
            try:
                _LOADED[name] = _load(name, source, cdef)
            except NativeUnavailable as err:
                _LOADED[name] = err
        loaded = _LOADED[name]
        if isinstance(loaded, NativeUnavailable):
            raise loaded
        return loaded


def build_native(source: str) -> str:
    """The path of the shared library built from the C file `source` (built once
    per machine; NativeUnavailable says why it cannot be): for a caller that loads
    it itself (the GPU plugin's enqueue loop, with ctypes)."""
    return _build(os.path.splitext(os.path.basename(source))[0], source)


def _load(name: str, source: str, cdef: str):
    try:
        import cffi
    except ImportError:
        raise NativeUnavailable("the cffi package is not installed: pip install cffi (requirements.txt)") from None
    path = _build(name, source)
    openmp_environment()  # (a source with OpenMP may be the first to load libgomp: no oneDNN here)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    try:
        lib = ffi.dlopen(path)
    except OSError as err:
        raise NativeUnavailable(f"loading {path} failed: {err}") from None
    return ffi, lib

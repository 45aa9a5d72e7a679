"""Loading oneDNN (v3 C API) through cffi in ABI mode: no compiler at install time.

The library is the PyPI wheel `onednn-cpu-gomp` (oneDNN 3.2, GNU OpenMP runtime:
`libdnnl.so.3` in the environment's lib/); the declarations come from its own
headers (`onednn-devel-cpu-gomp`, include/oneapi/dnnl/). On first use the headers
are run through the C preprocessor (`gcc -E -P` with empty stddef/stdint/stdbool
stand-ins, so only oneDNN's own declarations remain, which cffi's parser takes as
they are) and the DNNL_ARG_* macros are read with `gcc -dM`; both are cached under
$MO_CORE_HOME/onednn keyed by the header's hash, so later processes need no compiler.

    from device_daemons.cpu.onednn.library import load
    dnnl = load()            # raises NativeUnavailable with the reason and what to do
    dnnl.ffi, dnnl.lib, dnnl.engine, dnnl.arg("DNNL_ARG_SRC"), dnnl.check(status, "what")

`MO_CORE_DNNL_LIB` names the shared library and `MO_CORE_DNNL_INCLUDE` the include
directory when they are not in this Python environment.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

from ...native_build import NativeUnavailable  # noqa: F401  (what load() raises; callers import it here too)
from ...native_build import openmp_environment

_LOCK = threading.Lock()
_LOADED = None
_FAILED: str | None = None

_STATUS = {1: "out of memory", 2: "invalid arguments", 3: "unimplemented", 4: "last implementation reached",
           5: "runtime error", 6: "not required"}


def affinity_cpus() -> int:
    """The CPUs this process may run on (a container or `taskset` gives fewer than os.cpu_count())."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


CPUS = affinity_cpus()  # read once: a per-request call costs ~10 us


class DnnlError(RuntimeError):
    """A oneDNN call failed (status != success)."""

    def __init__(self, what: str, status: int):
        super().__init__(f"{what}: oneDNN status {status} ({_STATUS.get(status, 'unknown')})")
        self.status = status


def _prefixes() -> list[str]:
    seen = []
    for p in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))):
        if p not in seen:
            seen.append(p)
    return seen


def _installed_file(distribution: str, suffix: str) -> str | None:
    """Where pip put a file of `distribution` (its wheel installs into the
    environment's lib/ and include/, outside site-packages)."""
    from importlib import metadata
    try:
        files = metadata.distribution(distribution).files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).replace(os.sep, "/").endswith(suffix):
            path = os.path.normpath(str(f.locate()))
            if os.path.isfile(path):
                return path
    return None


def _find_library() -> str:
    explicit = os.environ.get("MO_CORE_DNNL_LIB")
    if explicit:
        if not os.path.isfile(explicit):
            raise NativeUnavailable(f"MO_CORE_DNNL_LIB={explicit} does not exist")
        return explicit
    found = _installed_file("onednn-cpu-gomp", "/libdnnl.so.3")
    if found:
        return found
    for prefix in _prefixes():
        for name in ("libdnnl.so.3", "libdnnl.so"):
            path = os.path.join(prefix, "lib", name)
            if os.path.isfile(path):
                return path
    raise NativeUnavailable("oneDNN (libdnnl.so.3) is not installed in this Python environment: pip install "
                            "onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 cffi (requirements.txt), "
                            "or set MO_CORE_DNNL_LIB")


def _find_header() -> str:
    explicit = os.environ.get("MO_CORE_DNNL_INCLUDE")
    if not explicit:
        found = _installed_file("onednn-devel-cpu-gomp", "oneapi/dnnl/dnnl.h")
        if found:
            return found
    candidates = [explicit] if explicit else [os.path.join(p, "include") for p in _prefixes()]
    for inc in candidates:
        header = os.path.join(inc, "oneapi", "dnnl", "dnnl.h")
        if os.path.isfile(header):
            return header
    raise NativeUnavailable("oneDNN's headers (include/oneapi/dnnl/dnnl.h) are not installed: pip install "
                            "onednn-devel-cpu-gomp==2023.2.0, or set MO_CORE_DNNL_INCLUDE")


def _cache_dir() -> str:
    home = os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))
    return os.path.join(home, "onednn")


def _header_digest(include_dir: str) -> str:
    h = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(include_dir, "oneapi", "dnnl", "*.h"))):
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def _preprocess(header: str) -> tuple[str, str]:
    """(declarations for cffi, `NAME value` lines of the DNNL_ARG_* macros)."""
    gcc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise NativeUnavailable("a C preprocessor (gcc) is needed once to read oneDNN's headers; install gcc "
                                "(apt-get install gcc)")
    include = os.path.dirname(os.path.dirname(os.path.dirname(header)))
    with tempfile.TemporaryDirectory(prefix="mo-dnnl-") as stubs:
        for name in ("stddef.h", "stdint.h", "stdbool.h"):
            open(os.path.join(stubs, name), "w").close()
        base = [gcc, "-E", "-nostdinc", "-I", stubs, "-I", include, header]
        try:
            decls = subprocess.run(base[:2] + ["-P"] + base[2:], capture_output=True, text=True, check=True).stdout
            macros = subprocess.run(base[:2] + ["-dM"] + base[2:], capture_output=True, text=True, check=True).stdout
        except subprocess.CalledProcessError as err:
            raise NativeUnavailable(f"preprocessing {header} failed: {err.stderr.strip()[-500:]}") from None
    args = _resolve_args(macros)
    return decls, "\n".join(f"{k} {v}" for k, v in sorted(args.items()))


def _resolve_args(macros: str) -> dict[str, int]:
    """DNNL_ARG_* macros that are integers or aliases of others (not function-like)."""
    raw = {}
    for m in re.finditer(r"^#define (DNNL_ARG_\w+) (.+)$", macros, re.M):
        raw[m.group(1)] = m.group(2).strip()
    values: dict[str, int] = {}

    def value(name, depth=0):
        if name in values:
            return values[name]
        text = raw.get(name)
        if text is None or depth > 10:
            return None
        if re.fullmatch(r"\d+", text):
            v = int(text)
        elif re.fullmatch(r"DNNL_ARG_\w+", text):
            v = value(text, depth + 1)
        else:
            return None
        if v is not None:
            values[name] = v
        return v
    for name in raw:
        value(name)
    return values


def _cdef_files() -> tuple[str, str]:
    header = _find_header()
    cache = os.path.join(_cache_dir(), _header_digest(os.path.dirname(os.path.dirname(os.path.dirname(header)))))
    decl_path, args_path = os.path.join(cache, "dnnl_cdef.h"), os.path.join(cache, "dnnl_args.txt")
    if not (os.path.isfile(decl_path) and os.path.isfile(args_path)):
        decls, args = _preprocess(header)
        os.makedirs(cache, exist_ok=True)
        for path, text in ((decl_path, decls), (args_path, args)):
            fd, tmp = tempfile.mkstemp(dir=cache, prefix=".tmp-")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)  # atomic: concurrent first uses see whole files
    with open(decl_path) as f:
        decls = f.read()
    with open(args_path) as f:
        args = f.read()
    return decls, args


class Dnnl:
    """The loaded library: ffi, lib, one CPU engine, DNNL_ARG_* values, status checks."""

    def __init__(self):
        try:
            import cffi
        except ImportError:
            raise NativeUnavailable("the cffi package is not installed: pip install cffi (requirements.txt)") from None
        path = _find_library()
        decls, args = _cdef_files()
        openmp_environment()  # (read by libgomp when libdnnl loads it)
        self.ffi = cffi.FFI()
        self.ffi.cdef(decls)
        # never unloaded: OpenMP's worker threads outlive the interpreter's teardown, and one
        # still spinning at a barrier (OMP_WAIT_POLICY=active) crashed the exit when cffi
        # closed libdnnl/libgomp under it
        self._flags = self.ffi.RTLD_NOW | getattr(self.ffi, "RTLD_NODELETE", 0)
        try:
            self.lib = self.ffi.dlopen(path, self._flags)
        except OSError as err:
            raise NativeUnavailable(f"cannot load {path}: {err} (oneDNN's GNU OpenMP build needs libgomp1: "
                                    "apt-get install libgomp1)") from None
        self.path = path
        self.args = {}
        for line in args.splitlines():
            name, _, value = line.partition(" ")
            self.args[name] = int(value)
        engine = self.ffi.new("dnnl_engine_t *")
        self.check(self.lib.dnnl_engine_create(engine, self.lib.dnnl_cpu, 0), "creating the CPU engine")
        self.engine = engine[0]
        version = self.lib.dnnl_version()
        self.version = f"{version.major}.{version.minor}.{version.patch}"
        self.isa = self._isa_name(self.lib.dnnl_get_effective_cpu_isa())
        # OpenMP's per-thread team size: primitives size their work for the team of the
        # thread that creates them (set_threads around compiling and running a program)
        self._omp = cffi.FFI()
        self._omp.cdef("void omp_set_num_threads(int); int omp_get_max_threads(void); "
                       "int omp_pause_resource_all(int);")
        try:
            self._gomp = self._omp.dlopen("libgomp.so.1", self._flags)  # the runtime libdnnl is linked with
        except OSError:
            self._gomp = None
        # at most the affinity mask's CPUs (libgomp's own default follows it too)
        self.default_threads = min(self._gomp.omp_get_max_threads(), CPUS) if self._gomp else CPUS

    def _isa_name(self, value: int) -> str:
        names = [n for n in dir(self.lib) if n.startswith("dnnl_cpu_isa_") and getattr(self.lib, n) == value]
        return names[0][len("dnnl_cpu_isa_"):] if names else str(value)

    def set_threads(self, n: int | None):
        """OpenMP threads of this thread's next parallel regions (None: the default)."""
        if self._gomp is not None:
            self._gomp.omp_set_num_threads(int(n or self.default_threads))

    def release_team(self) -> bool:
        """Free the calling thread's OpenMP team (OpenMP 5's omp_pause_resource_all, soft:
        libgomp ends the team's threads; the thread's next parallel region makes them
        again). False where the runtime has no such call."""
        if self._gomp is None:
            return False
        try:
            pause = self._gomp.omp_pause_resource_all
        except AttributeError:  # (a libgomp before GCC 10)
            return False
        return pause(1) == 0  # omp_pause_soft

    @contextlib.contextmanager
    def one_thread(self):
        """Primitives run here run on the calling thread alone (weights reordered at load):
        libgomp keeps a team of threads for every thread that ever opened a parallel
        region, and once a process has more of those than CPUs it hardly spins at
        barriers any more - the loading thread's team made every request of the thread
        that runs them 5x slower on a small network (MobileNetV3Small 0.75 -> 4.2 ms)."""
        if self._gomp is None:
            yield
            return
        before = self._gomp.omp_get_max_threads()
        self._gomp.omp_set_num_threads(1)
        try:
            yield
        finally:
            self._gomp.omp_set_num_threads(before)

    def arg(self, name: str) -> int:
        return self.args[name]

    @staticmethod
    def check(status: int, what: str):
        if status != 0:
            raise DnnlError(what, status)

    def new_stream(self):
        stream = self.ffi.new("dnnl_stream_t *")
        self.check(self.lib.dnnl_stream_create(stream, self.engine, self.lib.dnnl_stream_default_flags),
                   "creating a stream")
        return self.ffi.gc(stream[0], self.lib.dnnl_stream_destroy)


def load() -> Dnnl:
    """The process-wide library (loaded once); NativeUnavailable says why not."""
    global _LOADED, _FAILED
    if _LOADED is not None:
        return _LOADED
    with _LOCK:
        if _LOADED is None:
            if _FAILED is not None:
                raise NativeUnavailable(_FAILED)
            try:
                _LOADED = Dnnl()
            except NativeUnavailable as err:
                _FAILED = str(err)
                raise
    return _LOADED

"""The OS sandbox of framework workers (TensorFlow, Caffe): the second wall behind
the allow-list of what TensorFlow may run (core/services/tf_ops.py), so a model
that gets past it still cannot reach the host.

Built on bubblewrap (Debian `bubblewrap`, `bwrap`: the tool Flatpak uses; no
daemon, no setuid here, user namespaces) rather than namespaces of our own, plus
a seccomp filter (libseccomp through `pyseccomp`, compiled here and handed to
bwrap's --seccomp) and resource limits (util-linux `prlimit` before bwrap):

  namespaces   user, pid, network, ipc, uts, cgroup (bwrap --unshare-all): no
               network at all (only a loopback that is down), no other process
               visible or signalable, a fresh /proc of its own
  files        only the system's /usr (and the /bin, /lib links), a few files of
               /etc (the loader's cache, passwd/group, localtime; not /etc as a
               whole: it holds secrets), the interpreter's installation, this
               checkout, read-only; a private /tmp; the worker's own directory
               in the runtime directory (its sockets) writable; and the paths
               the caller names (the model's files read-only, an output
               directory writable). Nothing else of the host exists inside.
  seccomp      socket() of any family but AF_UNIX, connect(), and the calls a
               worker never needs (ptrace, process_vm_*, mount, unshare/setns,
               bpf, perf_event_open, keyctl, userfaultfd, kexec, module and
               reboot calls) fail with EPERM
  limits       address space (MO_CORE_SANDBOX_MEMORY_MB, default 16384: TensorFlow
               reserves much more than it uses), CPU seconds over the worker's
               life (MO_CORE_SANDBOX_CPU_S, default 3600), open files
               (MO_CORE_SANDBOX_FILES, default 4096), no core dumps; a worker
               past them dies, and its supervisor reports and restarts it

The worker talks to its parent over its own sockets (bound in its directory) and
gets shared memory as file descriptors (SCM_RIGHTS), never through /proc: a
worker sees its parent nowhere. It follows its parent's life through a pipe
(launcher: the lifeline) and bwrap's --die-with-parent.

MO_CORE_SANDBOX: "auto" (default: the sandbox where bwrap can make namespaces,
else a warning once per process and the worker runs unsandboxed - the allow-list
still applies), "require" (no worker starts without it), "off" (never; a
warning). MO_CORE_SANDBOX_READ: more directories to show read-only (colon
separated), e.g. a Python installation elsewhere.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass

from .errors import WorkerError

log = logging.getLogger("mo_core.microkernel.sandbox")

MODE_ENV = "MO_CORE_SANDBOX"
READ_ENV = "MO_CORE_SANDBOX_READ"
MEMORY_ENV, CPU_ENV, FILES_ENV = "MO_CORE_SANDBOX_MEMORY_MB", "MO_CORE_SANDBOX_CPU_S", "MO_CORE_SANDBOX_FILES"
TMP_ENV = "MO_CORE_SANDBOX_TMP_MB"  # the sandbox's /tmp (a tmpfs: host memory)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf", "passwd",
              "group")
_CLONE_THREAD = 0x00010000
_DENIED_CALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot",
                 "unshare", "setns", "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
                 "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
                 "swapon", "swapoff", "acct", "open_by_handle_at", "io_uring_setup")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    try:
        return int(value) if value else default
    except ValueError:
        raise WorkerError(f"{name}={value!r} is not a whole number") from None


@dataclass(frozen=True)
class Sandbox:
    """What one worker may see besides the system: `read_only` paths (the model's
    files) and `writable` directories (where it writes its results); its limits
    (None: the MO_CORE_SANDBOX_* defaults)."""
    read_only: tuple = ()
    writable: tuple = ()
    memory_mb: int | None = None
    cpu_s: int | None = None
    open_files: int | None = None

    def limits(self) -> tuple[int, int, int]:
        return (self.memory_mb or _env_int(MEMORY_ENV, 16384), self.cpu_s or _env_int(CPU_ENV, 3600),
                self.open_files or _env_int(FILES_ENV, 4096))

    def view(self) -> tuple:
        """What tells two sandboxes apart (a worker is reused only for the same view)."""
        return (tuple(sorted(self.read_only)), tuple(sorted(self.writable)))


# --------------------------------------------------------------------------- availability
_state: dict = {}
_lock = threading.Lock()


def mode() -> str:
    value = (os.environ.get(MODE_ENV) or "auto").strip().lower()
    if value in ("0", "off", "no", "false"):
        return "off"
    if value in ("1", "on", "require", "yes", "true"):
        return "require"
    if value != "auto":
        raise WorkerError(f"{MODE_ENV}={value!r}: use auto, require or off")
    return "auto"


def probe() -> str | None:
    """None when bwrap can build the sandbox here, else why not (checked once)."""
    with _lock:
        if "why_not" not in _state:
            _state["why_not"] = _probe()
        return _state["why_not"]


def _probe() -> str | None:
    bwrap, prlimit = shutil.which("bwrap"), shutil.which("prlimit")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    if prlimit is None:
        return "prlimit (util-linux) is not installed"
    try:
        proc = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                               *_system_args(), "--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run: {exc}"
    if proc.returncode != 0:
        return "bwrap cannot create namespaces here ({}); user namespaces may be off (sysctl " \
               "kernel.unprivileged_userns_clone / user.max_user_namespaces)".format(proc.stderr.strip()[:300])
    return None


def active(sandbox: Sandbox | None) -> bool:
    """Whether a worker with this sandbox spec runs sandboxed (WorkerError under
    MO_CORE_SANDBOX=require when it cannot)."""
    if sandbox is None:
        return False
    how = mode()
    if how == "off":
        _warn_once("off", f"{MODE_ENV}=off: framework workers run without the OS sandbox (only the allow-list of "
                          f"what TensorFlow may run applies)")
        return False
    why = probe()
    if why is None:
        return True
    if how == "require":
        raise WorkerError(f"the framework worker sandbox is required ({MODE_ENV}=require) but unavailable: {why}")
    _warn_once("unavailable", f"framework workers run without the OS sandbox: {why}. The allow-list of what "
                              f"TensorFlow may run still applies; set {MODE_ENV}=require to refuse to run then")
    return False


def _warn_once(key: str, message: str) -> None:
    with _lock:
        if _state.get("warned-" + key):
            return
        _state["warned-" + key] = True
    log.warning(message)
    print(f"[ WARNING ] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the command
def _system_args() -> list[str]:
    args = []
    for path in _SYSTEM_DIRS:
        if path == "/usr" or not os.path.lexists(path):
            continue
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in _ETC_FILES:
        path = os.path.join("/etc", name)
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def python_roots(interpreter: str) -> list[str]:
    """The directories an interpreter needs: its venv and the installation behind it."""
    roots = {os.path.dirname(os.path.dirname(os.path.realpath(interpreter)))}
    venv = os.path.dirname(os.path.dirname(os.path.abspath(interpreter)))
    cfg = os.path.join(venv, "pyvenv.cfg")
    if os.path.isfile(cfg):
        roots.add(venv)
        with open(cfg) as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    roots.add(os.path.dirname(os.path.realpath(value.strip())))
    if os.path.realpath(interpreter) == os.path.realpath(sys.executable):
        roots.update({sys.prefix, sys.base_prefix, sys.exec_prefix})
    return sorted(r for r in roots if r not in ("/", "/usr"))


def _seccomp_program() -> bytes | None:
    """The compiled filter (cached), None without pyseccomp (a warning, once)."""
    with _lock:
        if "bpf" in _state:
            return _state["bpf"]
    try:
        import pyseccomp as sc
    except ImportError:
        _warn_once("seccomp", "pyseccomp is not installed: framework workers run without the seccomp filter (the "
                              "namespaces and limits still apply); pip install pyseccomp")
        program = None
    else:
        program = _compile(sc)
    with _lock:
        _state["bpf"] = program
    return program


def _compile(sc) -> bytes:
    import tempfile
    rules = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    rules.add_rule(deny, "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    rules.add_rule(deny, "connect")
    # no new processes (a model's Python layer forked 1000, past every per-process limit): threads stay (clone
    # with CLONE_THREAD); clone3 answers ENOSYS, so the C library makes its threads with clone
    rules.add_rule(deny, "fork")
    rules.add_rule(deny, "vfork")
    rules.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for call in _DENIED_CALLS:
        try:
            rules.add_rule(deny, call)
        except (RuntimeError, ValueError, OSError):  # a call this kernel/libseccomp does not know
            pass
    with tempfile.TemporaryFile() as f:
        rules.export_bpf(f)
        f.seek(0)
        return f.read()


def _mounts(paths, flag: str) -> list[str]:
    args = []
    for path in sorted({os.path.abspath(p) for p in paths if p}, key=lambda p: p.count(os.sep)):
        if os.path.lexists(path):
            real = os.path.realpath(path)
            args += [flag, real, path]
    return args


def command(argv: list[str], sandbox: Sandbox, interpreter: str, own_dir: str, repo_root: str,
            keep_fds: list[int]) -> tuple[list[str], list[int]]:
    """(the command that runs `argv` in the sandbox, descriptors to hand over and close
    after the spawn). `own_dir`: the worker's directory (its sockets), writable;
    `keep_fds`: descriptors argv names, passed through."""
    memory, cpu, files = sandbox.limits()
    args = [shutil.which("prlimit") or "prlimit", f"--as={memory << 20}", f"--cpu={cpu}", f"--nofile={files}",
            "--core=0", "--", shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent",
            "--new-session", "--hostname", "sandbox", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr",
            *_system_args(), "--proc", "/proc", "--dev", "/dev",
            # sized: a tmpfs is the host's memory, outside the address-space limit (2 GB in /tmp, 1 GB in /dev/shm)
            "--size", str(_env_int(TMP_ENV, 256) << 20), "--tmpfs", "/tmp", "--size", str(64 << 20), "--tmpfs",
            "/dev/shm"]
    extra = [p for p in (os.environ.get(READ_ENV) or "").split(":") if p]
    args += _mounts(python_roots(interpreter) + [repo_root] + extra + list(sandbox.read_only), "--ro-bind")
    args += _mounts([own_dir] + list(sandbox.writable), "--bind")
    args += ["--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp", "--chdir", "/tmp"]
    passed = []
    program = _seccomp_program()
    if program is not None:
        fd = os.memfd_create("mo-core-seccomp", os.MFD_CLOEXEC)
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        args += ["--seccomp", str(fd)]
        passed.append(fd)
    return args + ["--", *argv], passed + list(keep_fds)

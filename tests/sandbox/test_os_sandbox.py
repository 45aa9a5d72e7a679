"""The OS sandbox holds even if the allow-list were bypassed (issue 21, acceptance):
a worker started the production way (WorkerProcess with a Sandbox: the launcher's
bwrap + seccomp + prlimit, as the TF and Caffe workers are) that tries to get out
(escape_worker.py) cannot open a file outside its view, cannot open a socket or
reach another process, and dies on its limits while its parent (this test
process) carries on. Without a sandbox on the machine: a warning, and the
allow-list still refuses."""
from __future__ import annotations

import os
import secrets
import sys

import pytest

from core.microkernel import WorkerError, WorkerProcess, runtime_dir
from core.microkernel.sandbox import Sandbox, python_roots
from tests.sandbox.conftest import CANARY_TEXT
from tests.support import REPO, run_cli

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def escaper(tmp_path_factory):
    model = tmp_path_factory.mktemp("model")
    (model / "weights.bin").write_text("the model's own bytes")
    secret = tmp_path_factory.mktemp("secret") / "canary.txt"
    secret.write_text(CANARY_TEXT)
    saved = os.environ.get("MO_CORE_SANDBOX")
    os.environ["MO_CORE_SANDBOX"] = "require"  # no silent fallback: this test is about the sandbox
    worker = WorkerProcess("tests.sandbox.escape_worker", name="escape", startup_timeout=60, request_timeout=60,
                           sandbox=Sandbox(read_only=(str(model),), memory_mb=1024))
    try:
        worker.start()
        yield worker, model, secret
    finally:
        worker.stop()
        if saved is None:
            os.environ.pop("MO_CORE_SANDBOX", None)
        else:
            os.environ["MO_CORE_SANDBOX"] = saved


def attempt(worker, verb, **args):
    return worker.call(verb, args)[0]


def test_it_sees_only_its_view(escaper):
    worker, model, secret = escaper
    assert attempt(worker, "read", path=str(model / "weights.bin")) == {"ok": True, "result": "the model's own bytes"}
    for path in (str(secret), "/etc/shadow", os.path.expanduser("~/.bashrc"), "/proc/{}/environ".format(os.getpid())):
        assert attempt(worker, "read", path=path)["ok"] is False, path
    # beside the checkout only what the view needs (the checkout, the interpreter's roots), not its siblings
    parent = os.path.dirname(REPO)
    # (with the checkout in /tmp, the view's private /tmp holds the model's and the worker's directories too)
    shown = [REPO, *python_roots(sys.executable), str(model), os.path.dirname(worker.endpoint[len("ipc://"):])]
    needed = {os.path.relpath(root, parent).split(os.sep)[0] for root in shown if root.startswith(parent + os.sep)}
    seen = attempt(worker, "listdir", path=parent)["result"]
    assert set(seen) <= needed, (seen, needed)
    hidden = [name for name in os.listdir(parent) if name not in needed]
    for name in hidden[:3]:
        assert name not in seen and attempt(worker, "read", path=os.path.join(parent, name))["ok"] is False, name
    assert attempt(worker, "read", path=str(secret)) == {"ok": False, "errno": "ENOENT"}
    # the runtime directory holds only its own directory (the daemons' sockets are not there)
    own = os.path.basename(os.path.dirname(worker.endpoint[len("ipc://"):]))
    assert attempt(worker, "listdir", path=runtime_dir()) == {"ok": True, "result": [own]}
    assert sorted(os.listdir(runtime_dir())) != [own]  # (while the host's has more)
    # nothing of the host is writable: the system, the checkout, the model; /tmp is its own
    for path in ("/usr/pwned", os.path.join(REPO, "pwned"), str(model / "pwned")):
        assert attempt(worker, "write", path=path) == {"ok": False, "errno": "EROFS"}, path
    private = "/tmp/sandbox-{}".format(secrets.token_hex(4))
    assert attempt(worker, "write", path=private)["ok"] is True
    assert not os.path.exists(private)
    assert not os.path.exists(str(model / "pwned")) and not os.path.exists("/usr/pwned")


def test_it_cannot_open_a_socket_or_reach_a_process(escaper):
    worker, _, _ = escaper
    for family in ("AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"):
        assert attempt(worker, "open_socket", family=family) == {"ok": False, "errno": "EPERM"}, family
    # a Unix socket it can see (its own): connect() is refused too
    assert attempt(worker, "open_socket", family="AF_UNIX", connect=worker.endpoint[len("ipc://"):]) == \
        {"ok": False, "errno": "EPERM"}
    # no other process exists for it: not its parent, not pid 1 of the host
    assert attempt(worker, "signal_process", pid=os.getpid())["errno"] == "ESRCH"
    procs = [p for p in attempt(worker, "listdir", path="/proc")["result"] if p.isdigit()]
    assert len(procs) <= 3, procs  # bwrap's init, the worker (and a thread-less helper at most)
    assert worker.service_info["whoami"]["pid"] != worker.pid


def test_it_cannot_start_processes_or_fill_the_hosts_memory_through_a_tmpfs(escaper):
    """A model's Python layer forked 1000 processes (each within its own limits) and pinned 2 GB
    in /tmp and 1 GB in /dev/shm (tmpfs: host memory, outside the address-space limit)."""
    worker, _, _ = escaper
    assert attempt(worker, "start_process") == {"ok": False, "errno": "EPERM", "thread": ["thread ran"]}
    for path, mb in (("/tmp/fill", 300), ("/dev/shm/fill", 100)):
        assert attempt(worker, "fill_tmpfs", path=path, mb=mb) == {"ok": False, "errno": "ENOSPC"}, path
    assert attempt(worker, "fill_tmpfs", path="/tmp/fill", mb=16)["ok"] is True


def test_it_dies_on_its_limits_and_its_parent_carries_on(escaper, tmp_path):
    worker, _, _ = escaper
    assert attempt(worker, "allocate", mb=2048) == {"ok": False, "errno": "MemoryError"}  # address space
    assert attempt(worker, "allocate", mb=64)["ok"] is True
    many = attempt(worker, "open_many", n=10000)
    assert many["errno"] == "EMFILE" and many["opened"] < 4096, many
    spinner = WorkerProcess("tests.sandbox.escape_worker", name="escape", startup_timeout=60, request_timeout=60,
                            restart_budget=1, sandbox=Sandbox(cpu_s=3))
    try:
        with pytest.raises(WorkerError) as err:
            spinner.call("spin", {"seconds": 60})
        assert "in its sandbox" in str(err.value) and ("SIGXCPU" in str(err.value) or "SIGKILL" in str(err.value))
        assert spinner.call("spin", {"seconds": 0.1})[0]["ok"]  # restarted; this process never noticed more
    finally:
        spinner.stop()
    assert worker.ping()["pid"] == worker.service_info["whoami"]["pid"]


def test_without_a_sandbox_a_warning_and_the_allow_list_still_refuses(canaries, tmp_path):
    """A machine without bubblewrap (here: a PATH without it): the converter says so once
    and the allow-list still refuses what would write."""
    saved = {key: os.environ.get(key) for key in ("PATH", "MO_CORE_SANDBOX")}
    os.environ.update(PATH=str(tmp_path), MO_CORE_SANDBOX="auto")  # (run_cli starts this very python by its path)
    try:
        code, out, err = run_cli("convert", "--output_dir", str(tmp_path / "out"), "--input_model",
                                 canaries.path("validate_control_write"), "--output", "y", "--validate")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert code == 1 and "framework workers run without the OS sandbox" in err, err
    assert "bwrap" in err and "op 'WriteFile' (node 'write')" in err, err


PROBE_LAYER = '''import os
import caffe


def _readable(path):
    try:
        with open(path, "rb") as f:
            return 2 if f.read(1) else 1
    except OSError:
        return 1


class Probe(caffe.Layer):
    """Its output shape says what it could read: 2 where a file was readable, else 1."""
    def setup(self, bottom, top):
        here = os.path.dirname(os.path.abspath(__file__))
        self.dims = [_readable(os.path.join(here, "sibling.txt")), _readable(os.environ["PROBE_OTHER"])]

    def reshape(self, bottom, top):
        top[0].reshape(*self.dims)

    def forward(self, bottom, top):
        pass

    def backward(self, top, propagate_down, bottom):
        pass
'''
PROBE_NET = '''name: "probe"
input: "data"
input_shape { dim: 1 dim: 3 }
layer { name: "probe" type: "Python" bottom: "data" top: "probe" python_param { module: "probe_layer" layer: "Probe" } }
'''


def test_the_converters_caffe_fallback_sees_the_layers_module_not_its_neighbours(tmp_path, monkeypatch):
    """A model's Python layer runs in the sandboxed Caffe worker at conversion
    (--use-caffe-fallback): it is shown its own module file and the weights, not the
    other files of the model's directories (before, it saw them whole)."""
    from ir import read_ir
    from tests.support import make_caffemodel, write_text
    model, weights_dir = tmp_path / "model", tmp_path / "weights"
    model.mkdir()
    weights_dir.mkdir()
    write_text(str(model / "probe_layer.py"), PROBE_LAYER)
    (model / "sibling.txt").write_text("a file next to the prototxt")
    (weights_dir / "other.txt").write_text("a file next to the weights")
    proto = write_text(str(model / "probe.prototxt"), PROBE_NET)
    weights = str(weights_dir / "probe.caffemodel")
    monkeypatch.setenv("PROBE_OTHER", str(weights_dir / "other.txt"))  # (the worker inherits our environment)
    monkeypatch.setenv("MO_CORE_SANDBOX", "require")
    monkeypatch.syspath_prepend(str(model))  # pycaffe here imports the module to make the caffemodel
    make_caffemodel(proto, weights)
    mapping = write_text(str(tmp_path / "map.xml"), '<CustomLayersMapping><CustomLayer NativeType="Python" '
                                                    'hasParam="true" protoParamName="python_param"/>'
                                                    '</CustomLayersMapping>')
    code, out, err = run_cli("convert", "--input_model", weights, "--input_proto", proto, "-k", mapping,
                             "--use-caffe-fallback", "--output_dir", str(tmp_path / "ir"), "--silent")
    assert code == 0, err
    dims = read_ir(str(tmp_path / "ir" / "probe.xml")).layer_by_name("probe").outputs[0].dims
    assert list(dims) == [1, 1], dims  # neither neighbour was readable

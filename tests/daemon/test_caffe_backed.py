"""A legacy IR (CustomLayersMapping.xml + --use-caffe-fallback) with a layer only
Caffe knows runs end to end on the CPU daemon started with --caffe-fallback:
that layer goes through a Caffe worker, and the result equals pycaffe's forward.

The IR is self-contained: it runs after the model files are deleted, the daemon
reads nothing of the source model (nor imports the converter), and `Python`
layers import modules only from the daemon's --python-path directories, never
from a place an IR names."""
import ast
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from core.services.caffe_worker import DEFINITION_ATTR
from tests.daemon.conftest import F32, daemon_processes, run_mo
from tests.support import REPO, import_caffe, make_caffemodel, write_text

CUSTOM = os.path.join(REPO, "tests", "custom_layers")
PYLAYERS = os.path.join(CUSTOM, "pylayers")
FRCNN = os.path.join(CUSTOM, "faster_rcnn_head.prototxt")
MAPPING = '<CustomLayersMapping><CustomLayer NativeType="Python" hasParam="true" protoParamName="python_param"/>' \
          '</CustomLayersMapping>'

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def legacy_ir(tmp_path, monkeypatch):
    """(pycaffe's reference rois for the input, the input, the .xml) of the Faster R-CNN
    head converted to a legacy IR; the .prototxt and .caffemodel are gone afterwards."""
    monkeypatch.syspath_prepend(PYLAYERS)  # pycaffe here imports the Python layer's module
    src = tmp_path / "model"
    src.mkdir()
    proto = str(src / "frcnn.prototxt")
    shutil.copy(FRCNN, proto)
    weights = str(src / "frcnn.caffemodel")
    make_caffemodel(proto, weights, scale=0.5)
    mapping = write_text(str(tmp_path / "map.xml"), MAPPING)
    res = run_mo("convert", "--input_model", weights, "--input_proto", proto, "-k", mapping, "--use-caffe-fallback",
                 "--output_dir", str(tmp_path / "ir"), "--silent", env={"PYTHONPATH": os.pathsep.join([PYLAYERS, REPO])})
    assert res.returncode == 0, res.stderr
    caffe = import_caffe()
    net = caffe.Net(proto, weights, caffe.TEST)
    rng = np.random.default_rng(7)
    inputs = {"data": rng.uniform(0, 1, (1, 3, 64, 80)).astype(np.float32),
              "im_info": np.array([[64, 80, 1]], np.float32)}
    for name, value in inputs.items():
        net.blobs[name].data[...] = value
    ref = net.forward()["rois"].copy()
    shutil.rmtree(src)  # the IR must not need them
    return ref, inputs, str(tmp_path / "ir" / "frcnn.xml")


def caffe_workers_of(runtime):
    """Caffe worker processes started under this runtime dir (the daemon's)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open("/proc/{}/cmdline".format(pid), "rb").read()
            env = open("/proc/{}/environ".format(pid), "rb").read()
        except OSError:
            continue
        if b"fallback_workers.caffe_worker" in cmd and runtime.encode() in env:
            found.append(int(pid))
    return found


def test_the_ir_keeps_the_layer_definition(legacy_ir):
    from ir import read_ir
    _, _, xml = legacy_ir
    layer = read_ir(xml).layer_by_name("proposal")
    text = layer.data[DEFINITION_ATTR]
    assert text.startswith("layer { ") and 'name: "proposal"' in text and 'module: "rpn.proposal_layer"' in text
    assert "blobs" not in text and "\n" not in text
    assert not any(key == DEFINITION_ATTR for other in read_ir(xml).layers if other.name != "proposal"
                   for key in other.data)


def test_caffe_backed_layer_runs_on_the_daemon_without_the_source_files(fresh_runtime, legacy_ir):
    from device_daemons.client import daemon
    from device_daemons.client import IECore
    ref, inputs, xml = legacy_ir
    daemon.launch("CPU", caffe_fallback=True, python_path=[PYLAYERS])
    try:
        ie = IECore(policy="existing")
        exec_net = ie.load_network(ie.read_network(model=xml), "CPU", config=F32)  # compared with pycaffe
        out = exec_net.infer(inputs)
        assert set(out) == {"proposal"}
        assert out["proposal"].shape == (20, 5)
        np.testing.assert_allclose(out["proposal"], ref, rtol=1e-4, atol=1e-3)
        exec_net.close()
    finally:
        daemon.stop("CPU")
    assert daemon_processes(fresh_runtime) == []
    assert caffe_workers_of(fresh_runtime) == []


CLIENT = """
import json, sys
import numpy as np
from device_daemons.client import IECore
ie = IECore(policy="existing")
exec_net = ie.load_network(ie.read_network(model=sys.argv[1]), "CPU", config={"INFERENCE_PRECISION_HINT": "f32"})
inputs = dict(np.load(sys.argv[2]))
out = exec_net.infer(inputs)["proposal"]
exec_net.close()
print(json.dumps(out.tolist()))
"""


def test_the_caffe_worker_outlives_the_clients_that_started_it(fresh_runtime, legacy_ir, tmp_path):
    """The worker is started for the first client's request, on that client's
    connection thread; it must not end with that thread (bwrap's --die-with-parent
    follows the thread that forked it): four clients one after the other all get
    pycaffe's answer from the same worker."""
    from device_daemons.client import daemon
    ref, inputs, xml = legacy_ir
    np.savez(tmp_path / "inputs.npz", **inputs)
    daemon.launch("CPU", caffe_fallback=True, python_path=[PYLAYERS])
    try:
        seen = []
        for _ in range(4):
            proc = subprocess.run([sys.executable, "-c", CLIENT, xml, str(tmp_path / "inputs.npz")],
                                  capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=REPO))
            assert proc.returncode == 0, proc.stderr[-2000:]
            np.testing.assert_allclose(np.array(json.loads(proc.stdout)), ref, rtol=1e-4, atol=1e-3)
            seen.append(sorted(caffe_workers_of(fresh_runtime)))  # (bwrap's processes and the worker's)
        assert seen[0] and all(pids == seen[0] for pids in seen), seen  # the same ones: never restarted
    finally:
        daemon.stop("CPU")
    assert caffe_workers_of(fresh_runtime) == []


EVIL = """
import os
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "IMPORTED"), "w").close()
import caffe


class Evil(caffe.Layer):
    def setup(self, bottom, top): pass
    def reshape(self, bottom, top): top[0].reshape(*bottom[0].data.shape)
    def forward(self, bottom, top): top[0].data[...] = 0
    def backward(self, top, propagate_down, bottom): pass
"""


@pytest.mark.parametrize("module", ["evil_layer", "tests.custom_layers.pylayers.rpn.identity_layer", "os"])
def test_an_ir_never_chooses_the_module_to_import(fresh_runtime, tmp_path, module):
    """The IR names an attacker's directory (in its meta data, as the converter used
    to record the model's place) and a Python layer of a module found there, or
    elsewhere on the daemon's sys.path: refused, nothing imported."""
    from device_daemons.client import daemon
    from device_daemons.client import IECore, InferenceError
    from ir import Edge, Layer, Network, Port, write_ir
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (attacker / "evil_layer.py").write_text(EVIL)
    definition = ('layer {{ name: "evil" type: "Python" bottom: "data" top: "evil" '
                  'python_param {{ module: "{}" layer: "Evil" }} }}'.format(module))
    dims = (1, 4)
    net = Network("evil", [Layer(0, "data", "Input", outputs=[Port(0, dims)]),
                           Layer(1, "evil", "Python", data={DEFINITION_ATTR: definition}, inputs=[Port(0, dims)],
                                 outputs=[Port(1, dims)])], [Edge(0, 0, 1, 0)])
    net.meta = {"input_proto": str(attacker / "evil.prototxt"), "input_model": str(attacker / "evil.caffemodel")}
    xml = str(tmp_path / "evil.xml")
    write_ir(net, xml)
    daemon.launch("CPU", caffe_fallback=True, python_path=[PYLAYERS])
    try:
        ie = IECore(policy="existing")
        exec_net = ie.load_network(ie.read_network(model=xml), "CPU")
        with pytest.raises(InferenceError) as err:
            exec_net.infer({"data": np.ones(dims, np.float32)})
        assert err.value.kind == "kernel"
        text = str(err.value)
        assert "python_layer_refused" in text and module in text and "--python-path" in text
    finally:
        daemon.stop("CPU")
    assert not (attacker / "IMPORTED").exists()


def test_python_path_needs_caffe_fallback(fresh_runtime, tmp_path):
    proc = run_mo("daemon", "start", "--python-path", str(tmp_path))
    assert proc.returncode == 1 and "needs --caffe-fallback" in proc.stderr
    proc = run_mo("daemon", "start", "--caffe-fallback", "--python-path", str(tmp_path / "none"))
    assert proc.returncode == 1 and "is not a directory" in proc.stderr
    assert "Traceback" not in proc.stderr and daemon_processes(fresh_runtime) == []


def test_without_the_option_the_layer_is_a_clear_error(fresh_runtime, legacy_ir):
    from core.errors import Error
    from device_daemons.client import IECore
    _, _, xml = legacy_ir
    ie = IECore(policy="auto")
    with pytest.raises(Error) as err:
        ie.load_network(ie.read_network(model=xml), "CPU")
    assert "Python" in str(err.value) and "-l" in str(err.value)


def test_device_daemons_never_import_the_converter():
    """No module of device_daemons/ imports core.front (the converter) or caffe:
    neither in its source nor when the daemon's and the client's modules load."""
    offenders = []
    for root, _, files in os.walk(os.path.join(REPO, "device_daemons")):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            for node in ast.walk(ast.parse(open(path).read(), path)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
                offenders += ["{}:{} {}".format(path, node.lineno, n) for n in names
                              if n == "core.front" or n.startswith("core.front.")]
    assert offenders == []
    script = ("import sys, json\n"
              "import device_daemons.cpu.server, device_daemons.cpu.caffe_backed, device_daemons.client\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('core.front', 'caffe')))))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


MAPPED_BUILTIN = """name: "mapped"
input: "data"
input_shape { dim: 1 dim: 3 dim: 4 dim: 4 }
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool" pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
"""
POOLING_MAPPING = ('<CustomLayersMapping><CustomLayer NativeType="Pooling" hasParam="true" '
                   'protoParamName="pooling_param"/></CustomLayersMapping>')


def mapped_pooling_ir(tmp_path):
    """(the .xml of a Pooling mapped in CustomLayersMapping.xml, an input, pycaffe's output)."""
    proto = write_text(str(tmp_path / "mapped.prototxt"), MAPPED_BUILTIN)
    weights = str(tmp_path / "mapped.caffemodel")
    make_caffemodel(proto, weights)
    mapping = write_text(str(tmp_path / "map.xml"), POOLING_MAPPING)
    res = run_mo("convert", "--input_model", weights, "--input_proto", proto, "-k", mapping, "--use-caffe-fallback",
                 "--output_dir", str(tmp_path / "ir"), "--silent")
    assert res.returncode == 0, res.stderr
    x = np.random.default_rng(3).standard_normal((1, 3, 4, 4)).astype(np.float32)
    caffe = import_caffe()
    net = caffe.Net(proto, weights, caffe.TEST)
    net.blobs["data"].data[...] = x
    return str(tmp_path / "ir" / "mapped.xml"), x, net.forward()["pool"].copy()


def test_a_layer_that_kills_the_caffe_worker_is_quarantined(fresh_runtime, tmp_path):
    """A layer whose definition makes Caffe abort (a CHECK on kernel_size 0): after the first
    crash its runs are refused at once, without spending the restart budget every client's
    Caffe-backed layers share (four such requests refused them all for a minute); another
    layer still runs."""
    import time
    from device_daemons.client import IECore, InferenceError, daemon
    xml, x, ref = mapped_pooling_ir(tmp_path)
    with open(xml) as f:
        text = f.read()
    assert "kernel_size: 2" in text
    bad = str(tmp_path / "ir" / "bad.xml")
    with open(bad, "w") as f:
        f.write(text.replace("kernel_size: 2", "kernel_size: 0"))
    shutil.copy(xml[:-4] + ".bin", bad[:-4] + ".bin")
    daemon.launch("CPU", caffe_fallback=True)
    try:
        ie = IECore(policy="existing")
        hostile = ie.load_network(ie.read_network(model=bad), "CPU", config=F32)
        with pytest.raises(InferenceError, match="the Caffe worker failed to run it"):
            hostile.infer({"data": x})
        for _ in range(4):
            t0 = time.monotonic()
            with pytest.raises(InferenceError, match="quarantined for .* the Caffe worker died running it"):
                hostile.infer({"data": x})
            assert time.monotonic() - t0 < 5
        out = ie.load_network(ie.read_network(model=xml), "CPU", config=F32).infer({"data": x})
        np.testing.assert_allclose(out["pool"], ref, rtol=1e-5, atol=1e-6)
        ie.close()
    finally:
        daemon.stop("CPU")


def test_a_mapped_builtin_type_runs_through_caffe(fresh_runtime, tmp_path):
    """A type the daemon has a kernel for (Pooling), mapped in CustomLayersMapping.xml:
    the layer keeps Caffe's parameters, not the IR's, so Caffe runs it (equal to
    pycaffe); a daemon without --caffe-fallback says to start one with it."""
    from device_daemons.client import IECore, InferenceError, daemon
    xml, x, ref = mapped_pooling_ir(tmp_path)
    daemon.launch("CPU")
    try:
        ie = IECore(policy="existing")
        with pytest.raises(InferenceError, match="mapped in CustomLayersMapping.xml.*--caffe-fallback"):
            ie.load_network(ie.read_network(model=xml), "CPU", config=F32)
        ie.close()
    finally:
        daemon.stop("CPU")
    daemon.launch("CPU", caffe_fallback=True)
    try:
        ie = IECore(policy="existing")
        out = ie.load_network(ie.read_network(model=xml), "CPU", config=F32).infer({"data": x})
        np.testing.assert_allclose(out["pool"], ref, rtol=1e-5, atol=1e-6)
        ie.close()
    finally:
        daemon.stop("CPU")

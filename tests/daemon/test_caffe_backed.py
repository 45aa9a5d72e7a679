"""A legacy IR (CustomLayersMapping.xml + --use-caffe-fallback) with a layer only
Caffe knows runs end to end on the CPU daemon started with --caffe-fallback:
that layer goes through a Caffe worker, and the result equals pycaffe's forward."""
import os

import numpy as np
import pytest

from tests.daemon.conftest import daemon_processes, run_mo
from tests.support import REPO, import_caffe, make_caffemodel, write_text

CUSTOM = os.path.join(REPO, "tests", "custom_layers")
PYLAYERS = os.path.join(CUSTOM, "pylayers")
FRCNN = os.path.join(CUSTOM, "faster_rcnn_head.prototxt")
MAPPING = '<CustomLayersMapping><CustomLayer NativeType="Python" hasParam="true" protoParamName="python_param"/>' \
          '</CustomLayersMapping>'


@pytest.fixture
def legacy_ir(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([PYLAYERS, REPO]))
    monkeypatch.syspath_prepend(PYLAYERS)
    weights = str(tmp_path / "frcnn.caffemodel")
    make_caffemodel(FRCNN, weights, scale=0.5)
    mapping = write_text(str(tmp_path / "map.xml"), MAPPING)
    res = run_mo("convert", "--input_model", weights, "--input_proto", FRCNN, "-k", mapping, "--use-caffe-fallback",
                 "--output_dir", str(tmp_path / "ir"), "--silent", env={"PYTHONPATH": os.pathsep.join([PYLAYERS, REPO])})
    assert res.returncode == 0, res.stderr
    return weights, str(tmp_path / "ir" / "frcnn.xml")


def test_caffe_backed_layer_runs_on_the_daemon(fresh_runtime, legacy_ir):
    from device_daemons.client import IECore
    from device_daemons import daemon
    weights, xml = legacy_ir
    caffe = import_caffe()
    net = caffe.Net(FRCNN, weights, caffe.TEST)
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, (1, 3, 64, 80)).astype(np.float32)
    info = np.array([[64, 80, 1]], np.float32)
    net.blobs["data"].data[...] = x
    net.blobs["im_info"].data[...] = info
    ref = net.forward()["rois"].copy()

    daemon.launch("CPU", caffe_fallback=True)
    try:
        ie = IECore(policy="existing")
        exec_net = ie.load_network(ie.read_network(model=xml), "CPU")
        out = exec_net.infer({"data": x, "im_info": info})
        assert set(out) == {"proposal"}
        np.testing.assert_allclose(out["proposal"], ref, rtol=1e-4, atol=1e-3)
        assert out["proposal"].shape == (20, 5)
        exec_net.close()
    finally:
        daemon.stop("CPU")
    assert daemon_processes(fresh_runtime) == []
    assert caffe_workers_of(fresh_runtime) == []


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


def test_without_the_option_the_layer_is_a_clear_error(fresh_runtime, legacy_ir):
    from core.errors import Error
    from device_daemons.client import IECore
    _, xml = legacy_ir
    ie = IECore(policy="auto")
    with pytest.raises(Error) as err:
        ie.load_network(ie.read_network(model=xml), "CPU")
    assert "Python" in str(err.value) and "-l" in str(err.value)

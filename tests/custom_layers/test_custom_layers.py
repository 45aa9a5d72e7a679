"""Custom Caffe layers: extensions, CustomLayersMapping.xml and the Caffe fallback
worker, checked against real pycaffe."""
import os
import subprocess
import sys
import time

import pytest

from core.errors import Error
from core.services.caffe_worker import DEFINITION_ATTR
from tests.support import REPO, convert_api, import_caffe, ir_shapes, make_caffemodel, write_text

HERE = os.path.dirname(os.path.abspath(__file__))
PYLAYERS = os.path.join(HERE, "pylayers")
REF_NET = os.path.join(HERE, "reference_example.prototxt")
REF_MAP = os.path.join(HERE, "reference_mapping.xml")
EXAMPLE_EXT = os.path.join(HERE, "example_ext")
FRCNN = os.path.join(HERE, "faster_rcnn_head.prototxt")
PROPOSAL_EXT = os.path.join(HERE, "proposal_ext")


# Marks the processes this test session starts (workers inherit the environment),
# so that caffe_workers() never counts another run's workers on the same machine.
RUN_MARK = "MO_CORE_TEST_RUN={}-{}".format(os.getpid(), time.time_ns())


@pytest.fixture(autouse=True)
def python_layers_on_path(monkeypatch):
    """pycaffe imports `Python` layer modules from sys.path / PYTHONPATH (the worker inherits it)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([PYLAYERS, REPO]))
    monkeypatch.syspath_prepend(PYLAYERS)
    monkeypatch.setenv(*RUN_MARK.split("=", 1))


def caffe_workers():
    """pids of the Caffe worker processes of this test session still alive."""
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open("/proc/{}/cmdline".format(pid), "rb").read()
                env = open("/proc/{}/environ".format(pid), "rb").read().split(b"\0")
            except OSError:
                continue
            if b"fallback_workers.caffe_worker" in cmd and RUN_MARK.encode() in env:
                pids.append(int(pid))
    return pids


def test_caffe_workers_sees_this_sessions_workers():
    """caffe_workers() is what the tests below use to prove no worker is left over:
    it must find a worker this session starts (and only while it runs)."""
    from core.microkernel import WorkerProcess
    worker = WorkerProcess("fallback_workers.caffe_worker", name="caffe", startup_timeout=120).start()
    try:
        assert caffe_workers() == [worker.pid]
    finally:
        worker.stop()
    assert caffe_workers() == []


@pytest.fixture(scope="module")
def ref_model(tmp_path_factory):
    weights = str(tmp_path_factory.mktemp("ref") / "ref.caffemodel")
    make_caffemodel(REF_NET, weights)
    return weights


def pycaffe_shapes(proto, weights, batch=None):
    caffe = import_caffe()
    net = caffe.Net(proto, weights, caffe.TEST)
    if batch:
        for name in net.inputs:
            shape = list(net.blobs[name].data.shape)
            net.blobs[name].reshape(batch, *shape[1:])
        net.reshape()
    net.forward()
    return {layer: [tuple(net.blobs[t].data.shape) for t in net.top_names[layer]] for layer in net._layer_names}


@pytest.mark.parametrize("batch", [None, 3])
def test_reference_example_network(ref_model, batch):
    net = convert_api(input_model=ref_model, input_proto=REF_NET, custom_layers_mapping=REF_MAP,
                      use_caffe_fallback=True, extensions=EXAMPLE_EXT, batch=batch)
    ref = pycaffe_shapes(REF_NET, ref_model, batch)
    assert ir_shapes(net) == ref
    layers = {layer.name: layer for layer in net.layers}
    assert [layer.type for layer in net.layers] == ["Input", "BNLL", "Reduction", "FullyConnected", "Threshold"]
    assert layers["bnll"].data == {"beta": "1"}                    # the extension's attributes only
    # a mapped layer also carries its own Caffe definition (a self-contained IR)
    assert layers["reduce"].data.pop(DEFINITION_ATTR).startswith('layer { name: "reduce" type: "Reduction"')
    assert layers["reduce"].data == {"operation": "caffe.ReductionParameter.MEAN", "axis": "2", "coeff": "1"}
    assert layers["threshold"].data == {"threshold": "0.25"}
    assert layers["fc"].data == {"out-size": "4"}
    assert caffe_workers() == []


def test_mapping_without_params(ref_model, tmp_path):
    mapping = write_text(str(tmp_path / "m.xml"), '<CustomLayersMapping><CustomLayer NativeType="Reduction" '
                                                  'hasParam="false"/></CustomLayersMapping>')
    net = convert_api(input_model=ref_model, input_proto=REF_NET, custom_layers_mapping=mapping,
                      use_caffe_fallback=True, extensions=EXAMPLE_EXT)
    assert list(net.layer_by_name("reduce").data) == [DEFINITION_ATTR]  # no parameters, its definition
    assert net.layer_by_name("reduce").outputs[0].dims == (2, 3)


def test_removing_the_mapping_entry_fails_with_faq_44(ref_model, tmp_path):
    mapping = write_text(str(tmp_path / "m.xml"), "<CustomLayersMapping/>")
    with pytest.raises(Error) as err:
        convert_api(input_model=ref_model, input_proto=REF_NET, custom_layers_mapping=mapping,
                    use_caffe_fallback=True, extensions=EXAMPLE_EXT)
    assert err.value.faq == 44 and '"reduce"' in str(err.value) and "Reduction" in str(err.value)


def test_mapped_layer_without_fallback_or_extension(ref_model):
    with pytest.raises(Error) as err:
        convert_api(input_model=ref_model, input_proto=REF_NET, custom_layers_mapping=REF_MAP,
                    extensions=EXAMPLE_EXT)
    assert err.value.faq == 14 and "--use-caffe-fallback" in str(err.value)


def test_optional_and_nested_parameters(tmp_path):
    """Map a Convolution: unset optionals without default are omitted unless asked;
    nested messages are flattened only when asked; clashing names are renamed."""
    proto = write_text(str(tmp_path / "c.prototxt"), """
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 dim: 5 dim: 5 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: "xavier" } } }
""")
    weights = str(tmp_path / "c.caffemodel")
    make_caffemodel(proto, weights)
    mapping = write_text(str(tmp_path / "m.xml"), '<CustomLayersMapping><CustomLayer NativeType="Convolution" '
                                                  'hasParam="true" protoParamName="convolution_param"/>'
                                                  '</CustomLayersMapping>')
    common = dict(input_model=weights, input_proto=proto, custom_layers_mapping=mapping, use_caffe_fallback=True)
    plain = convert_api(**common).layer_by_name("conv")
    assert plain.type == "Convolution" and plain.outputs[0].dims == (1, 3, 3, 3)
    assert plain.data["num_output"] == "3" and plain.data["kernel_size"] == "3" and plain.data["bias_term"] == "1"
    assert plain.data["engine"] == "caffe.ConvolutionParameter.DEFAULT"
    assert "kernel_h" not in plain.data and "weight_filler" not in plain.data and "convolution_type" not in plain.data
    assert set(plain.blobs) == {"weights", "biases"} and plain.blobs["weights"].size == 54
    full = convert_api(**common, disable_omitting_optional=True).layer_by_name("conv")
    assert full.data["kernel_h"] == "0" and full.data["pad"] == ""
    flat = convert_api(**common, enable_flattening_nested_params=True).layer_by_name("conv")
    assert flat.data["convolution_type"] == "xavier"   # weight_filler.type: reserved name, renamed


def test_python_proposal_extension(tmp_path):
    weights = str(tmp_path / "frcnn.caffemodel")
    make_caffemodel(FRCNN, weights, scale=0.5)
    for batch in (None, 2):
        net = convert_api(input_model=weights, input_proto=FRCNN, extensions=PROPOSAL_EXT, batch=batch)
        layer = net.layer_by_name("proposal")
        assert layer.type == "Python"
        assert layer.outputs[0].dims == ((batch or 1) * 20, 5)
        assert layer.data["ratio"] == "0.5,1,2" and layer.data["scale"] == "8,16,32"
        assert layer.data["feat_stride"] == "16" and layer.data["post_nms_topn"] == "20"


def test_python_proposal_through_mapping_and_fallback(tmp_path):
    weights = str(tmp_path / "frcnn.caffemodel")
    make_caffemodel(FRCNN, weights, scale=0.5)
    mapping = write_text(str(tmp_path / "m.xml"), '<CustomLayersMapping><CustomLayer NativeType="Python" '
                                                  'hasParam="true" protoParamName="python_param"/>'
                                                  '</CustomLayersMapping>')
    net = convert_api(input_model=weights, input_proto=FRCNN, custom_layers_mapping=mapping, use_caffe_fallback=True)
    ref = pycaffe_shapes(FRCNN, weights)
    ours = {k: v for k, v in ir_shapes(net).items() if k not in ("data", "im_info")}  # net-level inputs
    assert ours == {k: v for k, v in ref.items() if k in ours} and len(ours) == len(net.layers) - 2
    layer = net.layer_by_name("proposal")
    assert layer.outputs[0].dims == (20, 5)
    assert layer.data["module"] == "rpn.proposal_layer" and layer.data["layer"] == "ProposalLayer"


def test_caffe_never_loads_into_the_core(ref_model, tmp_path):
    script = (
        "import sys, json\n"
        "from cli.main import main\n"
        "code = main(['convert', '--input_model', {w!r}, '--input_proto', {p!r}, '-k', {k!r}, '--use-caffe-fallback',"
        " '--extensions', {e!r}, '--output_dir', {o!r}, '--silent'])\n"
        "print(json.dumps({{'code': code, 'caffe': sorted(m for m in sys.modules if m.split('.')[0] == 'caffe')}}))\n"
    ).format(w=ref_model, p=REF_NET, k=REF_MAP, e=EXAMPLE_EXT, o=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    import json
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "caffe": []}
    from ir import read_ir
    assert read_ir(str(tmp_path / "ref.xml")).layer_by_name("reduce").outputs[0].dims == (2, 3)


def _cli_fault(tmp_path, prototxt_text, env=None, weights_from=None):
    proto = write_text(str(tmp_path / "f.prototxt"), prototxt_text)
    weights = str(tmp_path / "f.caffemodel")
    make_caffemodel(weights_from or proto, weights)
    out = tmp_path / "out"
    cmd_env = dict(os.environ, **(env or {}))
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "cli", "convert", "--input_model", weights, "--input_proto", proto,
                           "-k", os.path.join(HERE, "fault_mapping.xml"), "--use-caffe-fallback",
                           "--output_dir", str(out)], capture_output=True, text=True, cwd=REPO, env=cmd_env,
                          timeout=120)
    return proc, out, time.time() - start


BASE = 'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }\n'


def assert_fault(proc, out, *needles):
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[ ERROR ]" in proc.stderr and "Traceback" not in proc.stderr
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)
    assert not out.exists() or os.listdir(out) == []
    assert caffe_workers() == []


def test_caffe_check_failure(tmp_path):
    text = BASE + 'layer { name: "bad_reduce" type: "Reduction" bottom: "data" top: "r" reduction_param { axis: 7 } }\n'
    good = BASE + 'layer { name: "bad_reduce" type: "Reduction" bottom: "data" top: "r" reduction_param { axis: 1 } }\n'
    proc, out, _ = _cli_fault(tmp_path, text, weights_from=write_text(str(tmp_path / "g.prototxt"), good))
    assert_fault(proc, out, "bad_reduce", "Check failed", "#13")


def test_caffe_segfault(tmp_path):
    text = BASE + ('layer { name: "crash" type: "Python" bottom: "data" top: "c" '
                   'python_param { module: "fault_layers" layer: "Segfault" } }\n')
    good = BASE + 'layer { name: "crash" type: "ReLU" bottom: "data" top: "c" }\n'
    proc, out, _ = _cli_fault(tmp_path, text, weights_from=write_text(str(tmp_path / "g.prototxt"), good))
    assert_fault(proc, out, "crash", "SIGSEGV")


def test_caffe_hang(tmp_path):
    text = BASE + ('layer { name: "stuck" type: "Python" bottom: "data" top: "s" '
                   'python_param { module: "fault_layers" layer: "Hang" } }\n')
    good = BASE + 'layer { name: "stuck" type: "ReLU" bottom: "data" top: "s" }\n'
    proc, out, took = _cli_fault(tmp_path, text, env={"MO_CORE_FALLBACK_TIMEOUT": "3"},
                                 weights_from=write_text(str(tmp_path / "g.prototxt"), good))
    # the message says the layer timed out, after the time given, and how to give more
    assert_fault(proc, out, "layer(s) stuck failed", "did not answer within 3 s ('infer_shapes'); it was killed",
                 "MO_CORE_FALLBACK_TIMEOUT=SECONDS (now 3)", "#13")
    assert took < 60


def test_pycaffe_not_importable(tmp_path):
    hidden = tmp_path / "hide" / "caffe"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('No module named caffe (hidden by the test)')\n")
    text = BASE + 'layer { name: "reduce" type: "Reduction" bottom: "data" top: "r" reduction_param { axis: 1 } }\n'
    # (the sandboxed worker is shown the directory of the fake caffe: MO_CORE_SANDBOX_READ)
    proc, out, _ = _cli_fault(tmp_path, text, env={"PYTHONPATH": os.pathsep.join([str(hidden.parent), REPO]),
                                                   "MO_CORE_SANDBOX_READ": str(hidden.parent)})
    assert_fault(proc, out, "reduce", "no Caffe available", "#14")


def test_n_fallback_layers_cost_one_round_trip(tmp_path):
    from core.pipeline import ConvertOptions, convert
    lines = [BASE.replace('top: "data"', 'top: "x0"')]
    for i in range(6):
        lines.append('layer {{ name: "r{0}" type: "Reduction" bottom: "x{0}" top: "x{1}" '
                     'reduction_param {{ axis: 3 }} }}\n'.format(i, i + 1) if i == 0 else
                     'layer {{ name: "r{0}" type: "Python" bottom: "x{0}" top: "x{1}" '
                     'python_param {{ module: "rpn.identity_layer" layer: "Identity" }} }}\n'.format(i, i + 1))
    proto = write_text(str(tmp_path / "n.prototxt"), "".join(lines))
    weights = str(tmp_path / "n.caffemodel")
    make_caffemodel(proto, weights)
    ctx = convert(ConvertOptions(input_model=weights, input_proto=proto, use_caffe_fallback=True,
                                 custom_layers_mapping=os.path.join(HERE, "fault_mapping.xml")))
    assert ctx.caffe_fallback.stats == {"round_trips": 1, "layers": 6}
    assert [layer.outputs[0].dims for layer in ctx.network.layers][1:] == [(1, 3, 4)] * 6


@pytest.mark.parametrize("text, needle", [
    ("<CustomLayersMapping><CustomLayer NativeType=\"X\" hasParam=\"true\"", "not valid XML"),
    ("<CustomLayersMapping><CustomLayer hasParam=\"false\"/></CustomLayersMapping>", "no NativeType"),
    ("<CustomLayersMapping><CustomLayer NativeType=\"X\" hasParam=\"maybe\"/></CustomLayersMapping>",
     "hasParam must be"),
    ("<CustomLayersMapping><CustomLayer NativeType=\"X\" hasParam=\"true\"/></CustomLayersMapping>",
     "needs protoParamName"),
    ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
     '<CustomLayersMapping><CustomLayer NativeType="&b;" hasParam="false"/></CustomLayersMapping>', "forbidden XML"),
])
def test_bad_mapping_files(ref_model, tmp_path, text, needle):
    mapping = write_text(str(tmp_path / "m.xml"), text)
    with pytest.raises(Error) as err:
        convert_api(input_model=ref_model, input_proto=REF_NET, custom_layers_mapping=mapping,
                    use_caffe_fallback=True, extensions=EXAMPLE_EXT)
    assert needle in str(err.value) and "m.xml" in str(err.value)


def test_mapping_names_a_missing_param_field(ref_model, tmp_path):
    mapping = write_text(str(tmp_path / "m.xml"), '<CustomLayersMapping><CustomLayer NativeType="Reduction" '
                                                  'hasParam="true" protoParamName="reduce_param"/></CustomLayersMapping>')
    with pytest.raises(Error) as err:
        convert_api(input_model=ref_model, input_proto=REF_NET, custom_layers_mapping=mapping,
                    use_caffe_fallback=True, extensions=EXAMPLE_EXT)
    assert "reduce_param" in str(err.value) and err.value.faq == 1


def test_user_op_replaces_a_builtin_for_that_conversion(ref_model, tmp_path):
    ext = tmp_path / "ext"
    (ext / "ops").mkdir(parents=True)
    (ext / "ops" / "my_fc.py").write_text(
        "from core.ops.fully_connected import FullyConnected\n"
        "class MyFullyConnected(FullyConnected):\n"
        "    op = 'FullyConnected'\n"
        "    def __init__(self, graph, attrs):\n"
        "        super().__init__(graph, dict(attrs, type='MyFC'))\n")
    net = convert_api(input_model=ref_model, input_proto=REF_NET, custom_layers_mapping=REF_MAP,
                      use_caffe_fallback=True, extensions=",".join([EXAMPLE_EXT, str(ext)]))
    assert net.layer_by_name("fc").type == "MyFC"
    again = convert_api(input_model=ref_model, input_proto=REF_NET, custom_layers_mapping=REF_MAP,
                        use_caffe_fallback=True, extensions=EXAMPLE_EXT)
    assert again.layer_by_name("fc").type == "FullyConnected"  # the built-in is back


def test_a_python_layer_whose_module_is_missing_is_named(tmp_path):
    """(Boost.Python itself says only "SystemError: ... returned NULL without setting an exception".)"""
    base = write_text(str(tmp_path / "base.prototxt"), BASE)
    text = BASE + ('layer { name: "s2" type: "Python" bottom: "data" top: "s2" '
                   'python_param { module: "no_such_module_xyz" layer: "Nope" } }\n')
    proc, out, _ = _cli_fault(tmp_path, text, weights_from=base)
    assert_fault(proc, out, "Python layer 's2' names module 'no_such_module_xyz', which cannot be found", "#12")

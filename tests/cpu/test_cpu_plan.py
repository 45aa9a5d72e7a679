"""The ExecutionPlan itself: custom kernels, errors, in-place safety, buffer
release, output naming, input validation, reshape."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from device_daemons.cpu import KERNELS, ExecutionPlan, KernelError, add_extension, load_custom_kernels
from device_daemons.cpu import plan as plan_module
from ir import Edge, IRError, Layer, Network, Port, read_ir, write_ir
from tests.cpu.cpu_helpers import single_layer_ir

RNG = np.random.default_rng(11)

CUSTOM = textwrap.dedent('''
    import numpy as np

    class Interp:
        """Nearest resize to height x width: the custom layer of the reference guide."""
        type = "Interp"

        def __init__(self, layer):
            self.h = int(layer.data["height"])
            self.w = int(layer.data["width"])
            self.finalized = []

        def getMemoryShapes(self, inputs):
            n, c = inputs[0][:2]
            return [[n, c, self.h, self.w]]

        def finalize(self, layer):
            self.finalized.append((tuple(layer.inputs[0].dims), tuple(layer.outputs[0].dims)))

        def forward(self, inputs):
            x = inputs[0]
            ys = np.arange(self.h) * x.shape[2] // self.h
            xs = np.arange(self.w) * x.shape[3] // self.w
            return [x[:, :, ys][:, :, :, xs]]

    class Doubler:
        layer_type = ["Double", "Twice"]

        def __init__(self, layer):
            pass

        def getMemoryShapes(self, inputs):
            return [inputs[0]]

        def forward(self, inputs):
            return [inputs[0] * 2.0]

    class NotAKernel:
        pass
''')


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def interp_ir(tmp_path, layer_type="Interp"):
    return single_layer_ir(tmp_path, layer_type, {"height": 6, "width": 8}, [(2, 3, 3, 4)], [(2, 3, 6, 8)],
                           name="interp")


def test_unknown_layer_type_names_type_layer_and_the_fix(tmp_path):
    with pytest.raises(KernelError) as err:
        ExecutionPlan(interp_ir(tmp_path, "ResizeBilinear"))
    text = str(err.value)
    assert "'ResizeBilinear'" in text and "'interp'" in text
    assert "-l FILE" in text and "add_extension" in text
    assert err.value.layer_name == "interp" and err.value.layer_type == "ResizeBilinear"


def test_custom_kernel_file(tmp_path):
    kernels = load_custom_kernels(write(tmp_path, "ext.py", CUSTOM))
    assert sorted(kernels) == ["Double", "Interp", "Twice"]
    plan = ExecutionPlan(interp_ir(tmp_path), custom_kernels=kernels)
    x = RNG.standard_normal((2, 3, 3, 4)).astype(np.float32)
    out = plan.infer({"in0": x})["interp"]
    np.testing.assert_array_equal(out, x.repeat(2, axis=2).repeat(2, axis=3))
    kernel = plan.steps[0].kernel
    assert kernel.finalized == [((2, 3, 3, 4), (2, 3, 6, 8))]
    plan.reshape({"in0": (1, 3, 3, 4)})
    assert kernel.finalized[-1] == ((1, 3, 3, 4), (1, 3, 6, 8))
    assert plan.infer({"in0": x[:1]})["interp"].shape == (1, 3, 6, 8)


def test_custom_kernel_replaces_builtin_and_list_types(tmp_path):
    kernels = load_custom_kernels(write(tmp_path, "ext.py", CUSTOM))
    net = single_layer_ir(tmp_path, "ReLU", {}, [(2, 5)], [(2, 5)])
    plan = ExecutionPlan(net, custom_kernels={"ReLU": kernels["Twice"]})
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_allclose(plan.infer({"in0": x})["layer"], 2 * x)


def test_add_extension_registers_for_later_plans(tmp_path, monkeypatch):
    monkeypatch.setattr(plan_module, "_GLOBAL_CUSTOM", {})
    add_extension(str(write(tmp_path, "ext.py", CUSTOM)))
    plan = ExecutionPlan(interp_ir(tmp_path))
    assert plan.infer({"in0": np.ones((2, 3, 3, 4), np.float32)})["interp"].shape == (2, 3, 6, 8)


def test_custom_kernel_file_errors(tmp_path):
    with pytest.raises(IRError, match="cannot find"):
        load_custom_kernels(tmp_path / "missing.py")
    with pytest.raises(IRError, match="ZeroDivisionError"):
        load_custom_kernels(write(tmp_path, "boom.py", "x = 1 / 0\n"))
    with pytest.raises(IRError, match="no forward"):
        load_custom_kernels(write(tmp_path, "half.py", "class K:\n    type = 'K'\n    def getMemoryShapes(self, s):\n"
                                                        "        return s\n"))
    with pytest.raises(IRError, match="defines no kernel class"):
        load_custom_kernels(write(tmp_path, "none.py", "class K:\n    pass\n"))


def test_custom_kernel_failures_name_the_layer(tmp_path):
    class Broken:
        type = "Interp"

        def __init__(self, layer):
            pass

        def getMemoryShapes(self, inputs):
            return [inputs[0]]

        def forward(self, inputs):
            raise ValueError("bad things")

    class WrongShape(Broken):
        def forward(self, inputs):
            return [np.zeros((1, 1), np.float32)]

    plan = ExecutionPlan(interp_ir(tmp_path), custom_kernels={"Interp": WrongShape})
    assert "computes [2, 3, 3, 4]" in plan.warnings[0]  # its shapes disagree with the IR's port dims
    with pytest.raises(KernelError, match=r"output shape \[1, 1\] but getMemoryShapes said \[2, 3, 3, 4\]"):
        plan.infer({"in0": np.zeros((2, 3, 3, 4), np.float32)})
    plan = ExecutionPlan(interp_ir(tmp_path), custom_kernels={"Interp": Broken})
    with pytest.raises(KernelError, match=r"layer 'interp' \(type Interp.*ValueError: bad things"):
        plan.infer({"in0": np.zeros((2, 3, 3, 4), np.float32)})


def test_bad_attributes_name_the_layer(tmp_path):
    data = {"kernel-y": 3, "stride-x": 1, "stride-y": 1, "output": 2}
    net = single_layer_ir(tmp_path, "Convolution", data, [(1, 1, 4, 4)], [(1, 2, 2, 2)],
                          blobs={"weights": np.zeros(18, np.float32)})
    with pytest.raises(KernelError, match=r"layer 'layer' \(type Convolution.*'kernel-x'"):
        ExecutionPlan(net)
    net = single_layer_ir(tmp_path, "Pooling", {"kernel-x": "three", "kernel-y": 3, "pool-method": "max"},
                          [(1, 1, 4, 4)], [(1, 1, 2, 2)])
    with pytest.raises(KernelError, match=r"'layer' \(type Pooling.*'three'"):
        ExecutionPlan(net)
    net = single_layer_ir(tmp_path, "Activation", {"type": "swish"}, [(1, 4)], [(1, 4)])
    with pytest.raises(KernelError, match="attribute 'type' is 'swish', which is not one of sigmoid"):
        ExecutionPlan(net)


def shared_net(tmp_path):
    """in -> power(x+1) -> {relu, power2(x*3)}; in -> reshape -> relu2; reshape also -> out_r."""
    s, r = (2, 6), (3, 4)
    layers = [
        Layer(0, "in", "Input", outputs=[Port(0, s)]),
        Layer(1, "p1", "Power", data={"power": "1", "scale": "1", "shift": "1"}, inputs=[Port(0, s)],
              outputs=[Port(1, s)]),
        Layer(2, "relu", "ReLU", inputs=[Port(0, s)], outputs=[Port(1, s)]),
        Layer(3, "p2", "Power", data={"power": "1", "scale": "3", "shift": "0"}, inputs=[Port(0, s)],
              outputs=[Port(1, s)]),
        Layer(4, "p3", "Power", data={"power": "1", "scale": "1", "shift": "-1"}, inputs=[Port(0, s)],
              outputs=[Port(1, s)]),
        Layer(5, "reshape", "Reshape", data={"dim": "3,4"}, inputs=[Port(0, s)], outputs=[Port(1, r)]),
        Layer(6, "relu2", "ReLU", inputs=[Port(0, r)], outputs=[Port(1, r)]),
        Layer(7, "sig", "Activation", data={"type": "sigmoid"}, inputs=[Port(0, s)], outputs=[Port(1, s)]),
        Layer(8, "split", "Split", data={"axis": "1"}, inputs=[Port(0, s)],
              outputs=[Port(1, (2, 2)), Port(2, (2, 4))]),
    ]
    edges = [Edge(0, 0, 1, 0), Edge(1, 1, 2, 0), Edge(1, 1, 3, 0), Edge(0, 0, 4, 0), Edge(4, 1, 5, 0),
             Edge(5, 1, 6, 0), Edge(4, 1, 7, 0), Edge(0, 0, 8, 0)]
    write_ir(Network("shared", layers, edges), tmp_path / "shared.xml")
    return read_ir(tmp_path / "shared.xml")


def test_inplace_only_when_nobody_else_reads_the_buffer(tmp_path):
    plan = ExecutionPlan(shared_net(tmp_path))
    inplace = {step.layer.name: step.kernel.inplace for step in plan.steps if step.kernel.supports_inplace}
    # p1's output feeds relu and p2; p3's output is viewed by reshape and read by sig; `in` is the user's
    assert inplace == {"p1": False, "relu": False, "p2": False, "p3": False, "relu2": False, "sig": False}
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    keep = x.copy()
    out = plan.infer({"in": x})
    np.testing.assert_array_equal(x, keep)  # the caller's array is never written
    assert sorted(out) == ["p2", "relu", "relu2", "sig", "split.1", "split.2"]
    np.testing.assert_allclose(out["relu"], np.maximum(x + 1, 0), rtol=1e-6)
    np.testing.assert_allclose(out["p2"], (x + 1) * 3, rtol=1e-6)
    np.testing.assert_allclose(out["relu2"], np.maximum(x - 1, 0).reshape(3, 4), rtol=1e-6)
    np.testing.assert_allclose(out["sig"], 1 / (1 + np.exp(-(x - 1))), rtol=1e-6)
    np.testing.assert_array_equal(out["split.1"], x[:, :2])
    np.testing.assert_array_equal(out["split.2"], x[:, 2:])


def test_inplace_chain_and_buffers_released(tmp_path):
    """in -> p (x*2) -> relu -> sig: relu and sig overwrite their input; every
    buffer is dropped once its last reader ran."""
    s = (4, 5)
    layers = [Layer(0, "in", "Input", outputs=[Port(0, s)]),
              Layer(1, "p", "Power", data={"scale": "2"}, inputs=[Port(0, s)], outputs=[Port(1, s)]),
              Layer(2, "relu", "ReLU", inputs=[Port(0, s)], outputs=[Port(1, s)]),
              Layer(3, "sig", "Activation", data={"type": "sigmoid"}, inputs=[Port(0, s)], outputs=[Port(1, s)])]
    edges = [Edge(0, 0, 1, 0), Edge(1, 1, 2, 0), Edge(2, 1, 3, 0)]
    plan = ExecutionPlan(Network("chain", layers, edges))
    assert [step.kernel.inplace for step in plan.steps] == [False, True, True]
    # each step drops the buffer it read last: the input's, p's, relu's
    assert [[plan._slot_names[i] for i in step.free] for step in plan.steps] == [["in.0"], ["p.1"], ["relu.1"]]
    x = RNG.standard_normal(s).astype(np.float32)
    first = plan.infer({"in": x})["sig"]
    kept = first.copy()
    second = plan.infer({"in": -x})["sig"]
    np.testing.assert_array_equal(first, kept)  # a later call never writes an earlier result
    np.testing.assert_allclose(first, 1 / (1 + np.exp(-np.maximum(2 * x, 0))), rtol=1e-6)
    np.testing.assert_allclose(second, 1 / (1 + np.exp(-np.maximum(-2 * x, 0))), rtol=1e-6)


def test_input_validation(tmp_path):
    plan = ExecutionPlan(single_layer_ir(tmp_path, "ReLU", {}, [(2, 3)], [(2, 3)]))
    with pytest.raises(IRError, match="missing 'in0'"):
        plan.infer({})
    with pytest.raises(IRError, match="no input named 'data'"):
        plan.infer({"in0": np.zeros((2, 3), np.float32), "data": np.zeros(1)})
    with pytest.raises(IRError, match=r"shape \[4, 3\].*expects \[2, 3\].*reshape"):
        plan.infer({"in0": np.zeros((4, 3), np.float32)})
    with pytest.raises(IRError, match="dtype <U1"):
        plan.infer({"in0": np.full((2, 3), "a")})
    out = plan.infer({"in0": -np.ones((2, 3), np.float64)})["layer"]  # other numeric types are converted
    assert out.dtype == np.float32 and not out.any()
    with pytest.raises(IRError, match="no input named 'x'"):
        plan.reshape({"x": (1, 3)})
    plan.reshape({"in0": (4, 3)})
    assert plan.input_shapes() == {"in0": (4, 3)} and plan.output_shapes() == {"layer": (4, 3)}


def test_every_catalog_type_has_a_kernel():
    catalog = ["Convolution", "Deconvolution", "Pooling", "FullyConnected", "ReLU", "Activation", "Clamp", "PReLU",
               "Power", "SoftMax", "Norm", "Normalize", "MVN", "GRN", "ScaleShift", "Eltwise", "Concat", "Split",
               "Reshape", "Flatten", "Crop", "Permute", "Tile", "PriorBox", "PriorBoxClustered", "DetectionOutput",
               "Proposal", "SimplerNMS", "ROIPooling", "PSROIPooling", "ArgMax", "Resample", "CTCGreedyDecoder",
               "RegionYolo", "ReorgYolo", "Memory", "BatchNormalization"]
    assert [t for t in catalog if t not in KERNELS] == []
    assert "Interp" in KERNELS  # built in; the custom-layer example (a custom kernel) replaces it when given


def test_kernel_used_directly(tmp_path):
    """The kernel interface on its own: construct with the layer, ask shapes, forward."""
    net = single_layer_ir(tmp_path, "Pooling", {"kernel-x": 2, "kernel-y": 2, "stride-x": 2, "stride-y": 2,
                                                "pool-method": "avg"}, [(1, 2, 4, 4)], [(1, 2, 2, 2)])
    kernel = KERNELS["Pooling"](net.layer_by_name("layer"))
    assert kernel.getMemoryShapes([(3, 2, 6, 8)]) == [(3, 2, 3, 4)]
    x = RNG.standard_normal((3, 2, 6, 8)).astype(np.float32)
    (out,) = kernel.forward([x])
    np.testing.assert_allclose(out, x.reshape(3, 2, 3, 2, 4, 2).mean(axis=(3, 5)), rtol=1e-6)


def test_cpu_device_imports_neither_the_converter_nor_a_framework():
    import json
    import subprocess
    import sys
    """The CPU device loads no converter module and no framework; the process machinery
    (core.microkernel) and the worker contracts (core.services) are what its
    TFCustomSubgraphCall kernel talks to a TF worker with."""
    script = ("import sys, json, device_daemons.cpu\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
              "('core', 'caffe', 'cv2', 'tensorflow', 'pyopencl') and m != 'core' "
              "and not m.startswith(('core.microkernel', 'core.services')))))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_every_inplace_kernel_in_a_chain(tmp_path):
    """in0 -> Power -> ScaleShift -> BatchNormalization -> Eltwise(+ in1) -> PReLU ->
    Clamp -> Activation(elu) -> SoftMax: every step may overwrite its input."""
    s = (2, 3, 4)
    c = 3
    w, b = RNG.uniform(0.5, 2, c).astype(np.float32), RNG.standard_normal(c).astype(np.float32)
    mean, var = RNG.standard_normal(c).astype(np.float32), RNG.uniform(0.5, 2, c).astype(np.float32)
    slope = RNG.uniform(0.1, 0.5, c).astype(np.float32)
    specs = [("p", "Power", {"scale": "2", "shift": "0.5"}, {}),
             ("ss", "ScaleShift", {}, {"weights": w, "biases": b}),
             ("bn", "BatchNormalization", {"epsilon": "0.001"}, {"mean": mean, "variance": var}),
             ("sum", "Eltwise", {"operation": "sum", "coeff": "1,-3"}, {}),
             ("prelu", "PReLU", {"channel_shared": "0"}, {"weights": slope}),
             ("clamp", "Clamp", {"min": "-2", "max": "5"}, {}),
             ("elu", "Activation", {"type": "elu", "alpha": "0.7"}, {}),
             ("softmax", "SoftMax", {"axis": "1"}, {})]
    layers = [Layer(0, "in0", "Input", outputs=[Port(0, s)]), Layer(1, "in1", "Input", outputs=[Port(0, s)])]
    edges = []
    prev = 0
    for i, (name, kind, data, blobs) in enumerate(specs, start=2):
        n_in = 2 if kind == "Eltwise" else 1
        layers.append(Layer(i, name, kind, data=data, inputs=[Port(k, s) for k in range(n_in)],
                            outputs=[Port(n_in, s)], blobs=blobs))
        edges.append(Edge(prev, 0 if prev < 2 else layers[prev].outputs[0].id, i, 0))
        if n_in == 2:
            edges.append(Edge(1, 0, i, 1))
        prev = i
    plan = ExecutionPlan(Network("chain", layers, edges))
    assert [st.kernel.inplace for st in plan.steps] == [False] + [True] * 7
    x0, x1 = RNG.standard_normal(s).astype(np.float32), RNG.standard_normal(s).astype(np.float32)
    keep = (x0.copy(), x1.copy())
    out = plan.infer({"in0": x0, "in1": x1})["softmax"]
    np.testing.assert_array_equal(x0, keep[0])
    np.testing.assert_array_equal(x1, keep[1])
    ch = (1, c, 1)
    y = (2 * x0.astype(np.float64) + 0.5) * w.reshape(ch) + b.reshape(ch)
    y = (y - mean.reshape(ch)) / np.sqrt(var.reshape(ch) + 0.001)
    y = y - 3 * x1
    y = np.where(y > 0, y, y * slope.reshape(ch))
    y = np.clip(y, -2, 5)
    y = np.where(y > 0, y, 0.7 * (np.exp(y) - 1))
    y = np.exp(y - y.max(axis=1, keepdims=True))
    y /= y.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind,ref", [
    ("relu6", lambda x: np.clip(x, 0, 6)),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    ("tanh", np.tanh),
    ("abs", np.abs),
    ("elu", lambda x: np.where(x > 0, x, np.exp(x) - 1)),
])
def test_activation_types(tmp_path, kind, ref):
    x = (RNG.standard_normal((2, 3, 5)) * 5).astype(np.float32)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "Activation", {"type": kind}, [x.shape], [x.shape]))
    np.testing.assert_allclose(plan.infer({"in0": x})["layer"], ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ties", ["last", "first"])
def test_argmax_ties(tmp_path, ties):
    """Among equal values the larger index first (Caffe's ArgMax, the default) or the smaller (ties "first":
    TensorFlow's ArgMax): a ReLU's zeros, top 1 and top 3, along an axis and over an item."""
    x = np.maximum(RNG.standard_normal((2, 5, 3)) - 0.8, 0).astype(np.float32)
    x[0, :, 0] = 0.0  # a column of ties only
    for data, out in (({"axis": 1, "top_k": 1}, (2, 1, 3)), ({"axis": 1, "top_k": 3}, (2, 3, 3)),
                      ({"top_k": 3}, (2, 1, 3))):
        plan = ExecutionPlan(single_layer_ir(tmp_path, "ArgMax", dict(data, ties=ties), [x.shape], [out]))
        got = plan.infer({"in0": x})["layer"]
        flat = x if "axis" in data else x.reshape(2, 1, -1)
        axis = 1 if "axis" in data else 2
        if ties == "first":
            order = np.argsort(-flat, axis=axis, kind="stable")
        else:
            order = np.flip(np.argsort(flat, axis=axis, kind="stable"), axis=axis)
        want = np.take(order, np.arange(data["top_k"]), axis=axis).astype(np.float32)
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert plan.infer({"in0": np.zeros_like(x)})["layer"].ravel()[0] == (0 if ties == "first" else 14)


@pytest.mark.parametrize("backend", ["numpy", "onednn"])
@pytest.mark.parametrize("kind,ref", [("exp", np.exp), ("log", np.log), ("floor", np.floor), ("ceil", np.ceil),
                                      ("round", np.rint), ("trunc", np.trunc),
                                      ("softplus", lambda x: np.logaddexp(0.0, x)), ("sign", np.sign),
                                      ("sin", np.sin), ("cos", np.cos), ("tan", np.tan), ("asin", np.arcsin),
                                      ("acos", np.arccos), ("atan", np.arctan), ("sinh", np.sinh), ("cosh", np.cosh),
                                      ("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh),
                                      ("log1p", np.log1p), ("expm1", np.expm1),
                                      ("softsign", lambda x: x / (1 + np.abs(x)))])
def test_plain_function_activations(tmp_path, kind, ref, backend):
    """TensorFlow's Exp, Log, Floor, Ceil, Round (halves to even: 0.5 -> 0, 1.5 -> 2, -2.5 -> -2) and a float's cast
    to an integer (toward zero), Softplus (large inputs too), Sign, Sin ... Atanh, Log1p, Expm1, Softsign; log's -inf
    at 0 and NaN below it as TensorFlow has them, NaN outside a domain too (asin of 2, acosh of 0.5; oneDNN's eltwise
    for exp, log, round and softplus, numpy for the rest)."""
    halves = np.arange(-6, 6, dtype=np.float32) + 0.5
    x = np.concatenate([halves, (RNG.standard_normal(28) * 4).astype(np.float32), [0.0, -1.0, 3.0, 1e-3]])
    x = {"exp": np.abs(x) + 0.25, "softplus": x * 25}.get(kind, x).astype(np.float32).reshape(1, 4, 11)
    if kind in ("log1p", "expm1"):
        x[0, 0, :4] = [1e-7, -3e-8, 2e-30, -1.0]  # (log1p(-1) = -inf)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "Activation", {"type": kind}, [x.shape], [x.shape]),
                         backend=backend, precision="f32")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float32)
    got = plan.infer({"in0": x})["layer"]
    exact = kind in ("floor", "ceil", "round", "trunc", "sign")  # (the rest within a few float ulps)
    np.testing.assert_allclose(got, want, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-5)
    if kind in ("log1p", "expm1"):  # near 0 to float's relative precision, as log(1 + x) would not be
        np.testing.assert_allclose(got[0, 0, :3], want[0, 0, :3], rtol=1e-6, atol=0)


@pytest.mark.parametrize("backend", ["numpy", "onednn"])
@pytest.mark.parametrize("axis", [1, 2, -1])
def test_log_softmax(tmp_path, axis, backend):
    """LogSoftmax (TensorFlow's log_softmax) against scipy's, on values where the SoftMax underflows to 0 (whose log
    would be -inf): finite everywhere."""
    from scipy.special import log_softmax
    x = (RNG.standard_normal((2, 5, 3, 7)) * 50).astype(np.float32)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "LogSoftmax", {"axis": axis}, [x.shape], [x.shape]),
                         backend=backend, precision="f32")
    got = plan.infer({"in0": x})["layer"]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, log_softmax(x.astype(np.float64), axis=axis), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("axis,exclusive,reverse", [(1, False, False), (3, True, False), (-2, False, True),
                                                    (2, True, True)])
def test_cumsum_along_an_axis(tmp_path, axis, exclusive, reverse):
    """CumSum (TensorFlow's Cumsum): the running sum along `axis`, without the element itself when exclusive (0
    first), from the end when reversed; a negative axis counts from the end."""
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    data = {"axis": axis, "exclusive": int(exclusive), "reverse": int(reverse)}
    plan = ExecutionPlan(single_layer_ir(tmp_path, "CumSum", data, [x.shape], [x.shape]), precision="f32")
    a = axis % 4
    y = np.flip(x, a) if reverse else x
    want = np.cumsum(y.astype(np.float64), axis=a) - (y if exclusive else 0.0)
    want = (np.flip(want, a) if reverse else want).astype(np.float32)
    np.testing.assert_allclose(plan.infer({"in0": x})["layer"], want, rtol=1e-5, atol=1e-6)


def test_cumsum_axis_out_of_range_is_a_clear_error(tmp_path):
    net = single_layer_ir(tmp_path, "CumSum", {"axis": 4}, [(1, 2, 3, 4)], [(1, 2, 3, 4)])
    with pytest.raises((KernelError, IRError), match="axis 4 does not fit a 4-D input"):
        ExecutionPlan(net, precision="f32")


@pytest.mark.parametrize("data", [{"type": "erf"}, {"type": "gelu"}, {"type": "gelu", "approximation_mode": "tanh"}],
                         ids=["erf", "gelu", "gelu_tanh"])
def test_erf_and_gelu_against_pythons_erf(tmp_path, data):
    """The numpy kernels down the tails too: exact GELU at x = -12 is ~1e-32, kept to f32's relative
    precision (oneDNN's post-op is held to the network-level tolerance: test_cpu_onednn.py)."""
    x = np.concatenate([np.linspace(-12, 12, 481), RNG.standard_normal(119) * 1e-3]).astype(np.float32)
    x = x.reshape(2, 3, 100)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "Activation", data, [x.shape], [x.shape]), backend="numpy")
    erf = np.vectorize(math.erf)
    erfc = np.vectorize(math.erfc)
    x64 = x.astype(np.float64)
    if data["type"] == "erf":
        ref = erf(x64)
    elif data.get("approximation_mode") == "tanh":
        ref = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        ref = 0.5 * x64 * erfc(-x64 / math.sqrt(2))
    np.testing.assert_allclose(plan.infer({"in0": x})["layer"], ref, rtol=2e-6, atol=1e-37)


@pytest.mark.parametrize("a,b,data", [((3, 5), (5, 7), {}), ((2, 1, 4, 5), (3, 6, 5), {"transpose_b": "true"}),
                                       ((2, 5, 4), (2, 5, 3), {"transpose_a": "true"})])
def test_matmul_against_numpy(tmp_path, a, b, data):
    x, y = RNG.standard_normal(a).astype(np.float32), RNG.standard_normal(b).astype(np.float32)
    ref = np.matmul(np.swapaxes(x, -1, -2) if data.get("transpose_a") else x,
                    np.swapaxes(y, -1, -2) if data.get("transpose_b") else y)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "MatMul", data, [a, b], [ref.shape]))
    np.testing.assert_allclose(plan.infer({"in0": x, "in1": y})["layer"], ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(KernelError, match="do not multiply"):
        ExecutionPlan(single_layer_ir(tmp_path, "MatMul", {}, [(3, 5), (4, 7)], [(3, 7)]))


@pytest.mark.parametrize("axis", [1, 2, -1])
def test_layer_norm_against_numpy(tmp_path, axis):
    x = (RNG.standard_normal((2, 3, 5)) * 4 + 2).astype(np.float32)
    w = RNG.uniform(0.5, 1.5, x.shape[axis]).astype(np.float32)
    b = RNG.standard_normal(x.shape[axis]).astype(np.float32)
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axis=axis, keepdims=True), x64.var(axis=axis, keepdims=True)
    along = [1, 1, 1]
    along[axis] = -1
    ref = (x64 - mean) / np.sqrt(var + 1e-3) * w.reshape(along) + b.reshape(along)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "LayerNorm", {"axis": axis, "eps": 1e-3}, [x.shape], [x.shape],
                                         blobs={"weights": w, "biases": b}))
    np.testing.assert_allclose(plan.infer({"in0": x})["layer"], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims,axis,ids", [((9, 4), 0, (2, 3)), ((3, 9, 2), 1, (5,)), ((4, 9), 1, (1, 2, 2))])
def test_gather_against_numpy_and_bad_indices_fail_the_request(tmp_path, dims, axis, ids):
    """An embedding lookup: the dictionary (blob weights) at the input's indices along `axis`; an index that
    is no integer, negative or past the axis fails the request with the layer and the index named."""
    table = RNG.standard_normal(dims).astype(np.float32)
    idx = RNG.integers(0, dims[axis], ids).astype(np.int32)
    ref = np.take(table, idx, axis=axis)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "Gather", {"axis": axis, "dims": ",".join(map(str, dims))},
                                         [ids], [ref.shape], blobs={"weights": table}))
    np.testing.assert_array_equal(plan.infer({"in0": idx})["layer"], ref)
    for bad in (dims[axis], -1, 0.5):
        wrong = idx.astype(np.float32)
        wrong.flat[-1] = bad
        with pytest.raises(KernelError, match=r"'layer' .*index {:g} is not an integer in \[0, {}\)".format(
                bad, dims[axis])):
            plan.infer({"in0": wrong})


@pytest.mark.parametrize("dims,axis,ids", [((9, 4), 0, (2, 3)), ((1, 9, 2), 1, (5,)), ((2, 3, 9), 2, (1, 2))])
def test_gather_of_a_dictionary_input(tmp_path, dims, axis, ids):
    """The two-input form (no blob, no dims): the dictionary is input 1, the model's data; bad indices fail the
    request as in the blob form."""
    table = RNG.standard_normal(dims).astype(np.float32)
    idx = RNG.integers(0, dims[axis], ids).astype(np.float32)
    ref = np.take(table, idx.astype(np.int64), axis=axis)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "Gather", {"axis": axis}, [ids, dims], [ref.shape]))
    np.testing.assert_array_equal(plan.infer({"in0": idx, "in1": table})["layer"], ref)
    idx.flat[0] = dims[axis]
    with pytest.raises(KernelError, match=r"index {} is not an integer in \[0, {}\)".format(dims[axis], dims[axis])):
        plan.infer({"in0": idx, "in1": table})
    with pytest.raises(KernelError, match="no 'dims' give its shape"):
        ExecutionPlan(single_layer_ir(tmp_path, "Gather", {"axis": axis}, [ids], [ref.shape]))


@pytest.mark.parametrize("dims,axis,ids", [((2, 9, 4), 1, (2, 3)), ((3, 2, 7), 2, (3, 5)), ((2, 3, 6), 1, (2, 3, 2))])
def test_gather_with_batch_dims(tmp_path, dims, axis, ids):
    """batch_dims 1: each batch's entries at its own indices (TensorFlow's tf.gather(..., batch_dims=1)), the
    dictionary an input or the blob; indices whose batch is not the dictionary's fail at load."""
    table = RNG.standard_normal(dims).astype(np.float32)
    idx = RNG.integers(0, dims[axis], ids).astype(np.float32)
    ref = np.stack([np.take(table[b], idx[b].astype(np.int64), axis=axis - 1) for b in range(dims[0])])
    data = {"axis": axis, "batch_dims": 1}
    plan = ExecutionPlan(single_layer_ir(tmp_path, "Gather", data, [ids, dims], [ref.shape]))
    np.testing.assert_array_equal(plan.infer({"in0": idx, "in1": table})["layer"], ref)
    blob = ExecutionPlan(single_layer_ir(tmp_path, "Gather", dict(data, dims=",".join(map(str, dims))), [ids],
                                         [ref.shape], blobs={"weights": table}))
    np.testing.assert_array_equal(blob.infer({"in0": idx})["layer"], ref)
    with pytest.raises(KernelError, match="must be equal \\(batch_dims\\)"):
        ExecutionPlan(single_layer_ir(tmp_path, "Gather", data, [(dims[0] + 1,) + ids[1:], dims], [ref.shape]))


@pytest.mark.parametrize("backend", ["numpy", "onednn"])
@pytest.mark.parametrize("operation", ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"])
def test_eltwise_comparisons_against_numpy(tmp_path, operation, backend):
    """1.0 where the comparison holds, else 0.0; ties included (the inputs share half their values)."""
    a = RNG.integers(-3, 3, (2, 3, 4, 5)).astype(np.float32)
    b = np.where(RNG.uniform(size=a.shape) < 0.5, a, RNG.integers(-3, 3, a.shape)).astype(np.float32)
    ref = getattr(np, operation)(a, b).astype(np.float32)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "Eltwise", {"operation": operation}, [a.shape, a.shape],
                                         [a.shape]), backend=backend, precision="f32")
    np.testing.assert_array_equal(plan.infer({"in0": a, "in1": b})["layer"], ref)
    with pytest.raises(KernelError, match="compares two inputs, not 3"):
        ExecutionPlan(single_layer_ir(tmp_path, "Eltwise", {"operation": operation}, [a.shape] * 3, [a.shape]))


CLASH = """name: "clash"
input: "data"
input_shape { dim: 1 dim: 4 dim: 2 dim: 2 }
layer { name: "sl" type: "Slice" bottom: "data" top: "s0" top: "s1" slice_param { axis: 1 slice_point: 2 } }
layer { name: "sl.1" type: "Power" bottom: "data" top: "p" power_param { scale: 10 } }
"""


def test_an_output_named_like_another_layers_port_keeps_both(tmp_path):
    """A layer named "sl.1" beside the two outputs of a layer "sl" ("sl.1", "sl.2"):
    no output is lost; the later one is "sl.1_1", as OpenVINO names it; equal to pycaffe."""
    from tests.support import convert_api, import_caffe, make_caffemodel, write_text
    proto = write_text(str(tmp_path / "clash.prototxt"), CLASH)
    weights = str(tmp_path / "clash.caffemodel")
    make_caffemodel(proto, weights)
    xml = str(tmp_path / "clash.xml")
    write_ir(convert_api(input_model=weights, input_proto=proto), xml)
    x = np.random.default_rng(4).standard_normal((1, 4, 2, 2)).astype(np.float32)
    out = ExecutionPlan(read_ir(xml), precision="f32").infer({"data": x})
    caffe = import_caffe()
    net = caffe.Net(proto, weights, caffe.TEST)
    net.blobs["data"].data[...] = x
    net.forward()
    refs = {"s0": net.blobs["s0"].data, "s1": net.blobs["s1"].data, "p": net.blobs["p"].data}
    assert sorted(out) == ["sl.1", "sl.1_1", "sl.2"]
    matched = sorted(next(name for name, ref in refs.items() if ref.shape == value.shape and np.allclose(value, ref))
                     for value in out.values())
    assert matched == ["p", "s0", "s1"]


@pytest.mark.parametrize("layer_type, data", [("Tile", {"axis": 3, "tiles": 1 << 28}),
                                              ("Pad", {"pads_begin": "0,0,30000,30000", "pads_end": "0,0,0,0",
                                                       "pad_mode": "constant"})])
def test_a_computed_shape_past_the_tensor_limit_is_refused_at_load(tmp_path, layer_type, data):
    """The IR declares 1x3x8x8, the attributes make billions of values: refused when the plan
    is made (the declared sizes alone were checked; the first request allocated terabytes),
    and so is a batch that makes an input too big."""
    network = single_layer_ir(tmp_path, layer_type, data, [(1, 3, 8, 8)], [(1, 3, 8, 8)])
    with pytest.raises(KernelError, match=r"computes an output shape .* more than the limit of 2147483648"):
        ExecutionPlan(network)
    plan = ExecutionPlan(single_layer_ir(tmp_path, "ReLU", {}, [(1, 3, 8, 8)], [(1, 3, 8, 8)]))
    with pytest.raises(IRError, match=r"input 'in0' shape \[2147483648, 3, 8, 8\] has 412316860416 values"):
        plan.reshape({"in0": (1 << 31, 3, 8, 8)})

"""Mobile-network blocks on the oneDNN backend (device_daemons/cpu/onednn/patterns.py,
eltwise.py, reshape.py): hard-swish and swish written as x * gate(x), squeeze-excite's
broadcast multiply written with Tile, ScaleShift (uniform and per channel), and
Reshape views stay in oneDNN's blocked layout, fused where they can be.

Keras MobileNetV3Small (weights=None, random batch-norm statistics, frozen by real
TensorFlow: tests/tf/keras_apps.py) equals TensorFlow at 1e-4 in f32 and keeps at
most 5 Reorders and no layer on numpy; hand-built IRs of each block (and of the
cases a block must not be taken: a value read elsewhere) equal the numpy reference
kernels, which the layer tests check against the frameworks."""
from __future__ import annotations

import os

import numpy as np
import pytest

from device_daemons.cpu import ExecutionPlan
from ir import Edge, Layer, Network, Port, read_ir, write_ir
from tests.cpu.cpu_helpers import assert_close


@pytest.fixture(scope="module")
def mobilenet_v3(tmp_path_factory):
    """(IR network, TensorFlow's input in NCHW, TensorFlow's output) of Keras MobileNetV3Small."""
    from core.pipeline import ConvertOptions, convert
    from benchmarks.built_models import Models, built
    models = Models(built("keras_apps"))
    out = str(tmp_path_factory.mktemp("mnv3"))
    ctx = convert(ConvertOptions(input_model=models.path("mobilenet_v3_small"), output_dir=out, batch=1,
                                 model_name="mnv3"))
    write_ir(ctx.network, os.path.join(out, "mnv3.xml"))
    arrays = models.arrays("mobilenet_v3_small")
    x = np.ascontiguousarray(arrays["in1/image"].transpose(0, 3, 1, 2))
    return read_ir(os.path.join(out, "mnv3.xml")), x, arrays["out1/0"]


def numpy_steps(plan):
    return [(s.name, s.type) for s in plan.program.steps if s.backend != "onednn"]


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_mobilenet_v3_small_stays_in_onednn(mobilenet_v3, precision):
    network, x, ref = mobilenet_v3
    plan = ExecutionPlan(network, backend="onednn", precision=precision)
    (out,) = plan.infer({"image": x}).values()
    if precision == "f32":
        assert_close(out, ref, 1e-4, "MobileNetV3Small vs TensorFlow")
    assert numpy_steps(plan) == []  # no ScaleShift, Tile (or anything) on numpy
    reorders = [s for s in plan.program.steps if s.type == "Reorder"]
    assert len(reorders) <= 5, [(s.name, s.note) for s in reorders]
    assert all(s.note for s in reorders)
    fused = {layer.type for layer, _ in plan.program.fused}
    assert {"ScaleShift", "Clamp", "Eltwise", "Tile"} <= fused
    if precision == "bf16":
        convs = [s for s in plan.program.steps if s.type == "Convolution"]
        assert {s.precision for s in convs} == {"bf16"}


# --- hand-built blocks --------------------------------------------------------------------------
class Net:
    """A hand-built IR: add(type, inputs, data, blobs, shape) -> layer name; Input "data"."""

    def __init__(self, shape):
        self.layers = [Layer(0, "data", "Input", outputs=[Port(0, shape)])]
        self.edges = []
        self.shape = {"data": tuple(shape)}
        self.rng = np.random.default_rng(7)

    def add(self, kind, inputs, data=None, blobs=None, shape=None, name=None):
        name = name or f"{kind.lower()}{len(self.layers)}"
        lid = len(self.layers)
        ports_in = []
        for i, src in enumerate(inputs):
            layer = next(layer for layer in self.layers if layer.name == src)
            ports_in.append(Port(i, self.shape[src]))
            self.edges.append(Edge(layer.id, layer.outputs[0].id, lid, i))
        shape = tuple(shape or self.shape[inputs[0]])
        self.layers.append(Layer(lid, name, kind, data={k: str(v) for k, v in (data or {}).items()},
                                 inputs=ports_in, outputs=[Port(len(inputs), shape)],
                                 blobs={k: np.asarray(v, np.float32).ravel() for k, v in (blobs or {}).items()}))
        self.shape[name] = shape
        return name

    def conv(self, src, out, k=3, group=1):
        n, c, h, w = self.shape[src]
        weights = self.rng.standard_normal((out, c // group, k, k)) * 0.3
        return self.add("Convolution", [src], {"kernel-x": k, "kernel-y": k, "output": out, "group": group,
                                               "pad-x": k // 2, "pad-y": k // 2, "stride-x": 1, "stride-y": 1},
                        {"weights": weights, "biases": self.rng.standard_normal(out) * 0.1}, (n, out, h, w))

    def scale_shift(self, src, scale, shift):
        c = self.shape[src][1]
        return self.add("ScaleShift", [src], blobs={"weights": np.broadcast_to(scale, c),
                                                   "biases": np.broadcast_to(shift, c)})

    def network(self, tmp_path):
        xml = str(tmp_path / "net.xml")
        write_ir(Network("block", self.layers, self.edges), xml)
        return read_ir(xml)


def run_both(tmp_path, net, extra_outputs=None):
    """(the oneDNN plan, its outputs, the numpy backend's) on a random input."""
    network = net.network(tmp_path)
    x = np.random.default_rng(1).standard_normal(net.shape["data"]).astype(np.float32) * 3
    plan = ExecutionPlan(network, backend="onednn", extra_outputs=extra_outputs)
    ref = ExecutionPlan(network, backend="numpy", extra_outputs=extra_outputs).infer({"data": x})
    ours = plan.infer({"data": x})
    for key, value in ref.items():
        assert_close(ours[key], value, 1e-5, key)
    return plan


def ran_in(plan, name):
    """The step a layer ran in (its own, or the one it was fused into)."""
    for step in plan.program.steps:
        if name in [layer.name for layer in step.layers]:
            return step.name
    return dict((layer.name, into) for layer, into in plan.program.fused).get(name)


@pytest.mark.parametrize("divide", [True, False], ids=["x*relu6(x+3)/6", "x*relu6(x+3)"])
def test_hard_swish_is_one_post_op_of_the_convolution(tmp_path, divide):
    net = Net((1, 8, 9, 11))
    x = net.conv("data", 16)
    gate = net.add("Clamp", [net.scale_shift(x, 1.0, 3.0)], {"min": 0, "max": 6})
    if divide:
        gate = net.scale_shift(gate, 1 / 6, 0.0)
    out = net.add("Eltwise", [x, gate], {"operation": "mul"})
    net.conv(out, 4)
    plan = run_both(tmp_path, net)
    assert numpy_steps(plan) == []
    assert {ran_in(plan, name) for name in (x, gate, out)} == {x}  # all inside the convolution
    assert [s.type for s in plan.program.steps if s.type != "Reorder"] == ["Convolution", "Convolution"]


def test_swish_and_a_gate_read_elsewhere(tmp_path):
    net = Net((1, 8, 9, 11))
    x = net.conv("data", 16)
    sig = net.add("Activation", [x], {"type": "sigmoid"})
    out = net.add("Eltwise", [sig, x], {"operation": "mul"})  # the gate first: either order
    y = net.conv(out, 16)
    gate = net.add("Clamp", [net.scale_shift(y, 1.0, 3.0)], {"min": 0, "max": 6})
    out2 = net.add("Eltwise", [y, gate], {"operation": "mul"})
    net.conv(out2, 4)
    plan = run_both(tmp_path, net, extra_outputs=[gate])  # the clamp is also an output: not a pattern
    assert ran_in(plan, out) == x and ran_in(plan, sig) == x
    assert ran_in(plan, out2) == out2 and numpy_steps(plan) == []


def test_squeeze_excite_multiplies_in_place_with_broadcast(tmp_path):
    net = Net((1, 16, 7, 9))
    x = net.conv("data", 16)
    pooled = net.add("Pooling", [x], {"kernel-x": 9, "kernel-y": 7, "stride-x": 1, "stride-y": 1,
                                      "pool-method": "avg", "exclude-pad": "false"}, shape=(1, 16, 1, 1))
    squeeze = net.add("ReLU", [net.conv(pooled, 4, k=1)])
    gate = net.scale_shift(net.add("Clamp", [net.conv(squeeze, 16, k=1)], {"min": 0, "max": 6}), 1 / 6, 0)
    tiled = net.add("Tile", [net.add("Tile", [gate], {"axis": 2, "tiles": 7}, shape=(1, 16, 7, 1))],
                    {"axis": 3, "tiles": 9}, shape=(1, 16, 7, 9))
    out = net.add("Eltwise", [x, tiled], {"operation": "mul"})
    net.conv(out, 4)
    plan = run_both(tmp_path, net)
    assert numpy_steps(plan) == []
    tiles = [name for name, kind in ((layer.name, layer.type) for layer in plan.network.layers) if kind == "Tile"]
    assert {ran_in(plan, t) for t in tiles} == {out}
    assert out in plan.program.inplace  # the product is written over x


@pytest.mark.parametrize("op", ["sum", "mul", "max"])
def test_broadcast_eltwise_and_tiles_read_elsewhere(tmp_path, op):
    net = Net((1, 16, 5, 6))
    x = net.conv("data", 16)
    small = net.add("Pooling", [x], {"kernel-x": 6, "kernel-y": 1, "stride-x": 1, "stride-y": 1,
                                     "pool-method": "max"}, shape=(1, 16, 5, 1))
    tiled = net.add("Tile", [small], {"axis": 3, "tiles": 6}, shape=(1, 16, 5, 6))
    out = net.add("Eltwise", [tiled, x], {"operation": op})  # the tiled input first
    other = net.add("Tile", [small], {"axis": 3, "tiles": 6}, shape=(1, 16, 5, 6))
    net.add("Eltwise", [x, other], {"operation": op}, name="kept")
    plan = run_both(tmp_path, net, extra_outputs=[other])  # `other` is read by the caller too
    assert ran_in(plan, tiled) == out
    assert ran_in(plan, other) == other  # a Tile someone else reads runs (numpy)


def test_per_channel_scale_shift_and_reshape_views(tmp_path):
    net = Net((2, 8, 6, 6))
    x = net.conv("data", 16)
    c = net.shape[x][1]
    scaled = net.add("ScaleShift", [x], blobs={"weights": np.linspace(0.5, 2, c), "biases": np.linspace(-1, 1, c)})
    pooled = net.add("Pooling", [net.add("ReLU", [scaled])], {"kernel-x": 6, "kernel-y": 6, "stride-x": 1,
                                                              "stride-y": 1, "pool-method": "avg"},
                     shape=(2, 16, 1, 1))
    flat = net.add("Reshape", [pooled], {"dim": "2,16"}, shape=(2, 16))
    net.add("SoftMax", [flat], {"axis": 1})
    plan = run_both(tmp_path, net)
    assert numpy_steps(plan) == []
    assert ran_in(plan, scaled) == x  # two binary post-ops of the convolution
    assert [layer.name for layer, _ in plan.program.views] == [flat]


def test_bf16_depthwise_takes_the_brgemm_kernel_on_amx(tmp_path):
    """oneDNN 3.2's brgemm depthwise kernel takes no f32 bias beside a bf16 destination: on AMX
    the bias is added by a binary post-op instead (before the activation), still in f32;
    elsewhere the library's own choice stands (convolution.py)."""
    from device_daemons.cpu.onednn.library import load
    net = Net((1, 32, 14, 13))
    dw = net.conv(net.conv("data", 32, k=1), 32, group=32)
    out = net.add("Clamp", [dw], {"min": 0, "max": 6})
    net.conv(out, 8, k=1)  # (the depthwise output bf16: a network output would be written f32)
    network = net.network(tmp_path)
    inputs = {"data": np.random.default_rng(1).standard_normal(net.shape["data"]).astype(np.float32)}
    ref = ExecutionPlan(network, backend="numpy").infer(inputs)
    plan = ExecutionPlan(network, backend="onednn", precision="bf16")
    perf = []
    ours = plan.infer(inputs, perf)
    for key, value in ref.items():
        assert_close(ours[key], value, 2e-2, key)
    kernel = next(row.kernel for row in perf if row.name == dw)
    assert kernel.startswith("brdgmm") == ("amx" in load().isa), kernel
    assert numpy_steps(plan) == [] and ran_in(plan, out) == dw

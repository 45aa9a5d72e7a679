"""Strides pulled up the graph (device_daemons/cpu/strides.py): a ResNet stage transition
runs its last 3x3 convolution at stride 2 and subsamples the shortcut, with pycaffe's
results; nothing changes where a tensor is also read at full size, is a requested
output, or passes a custom kernel."""
from __future__ import annotations

import numpy as np
import pytest

from device_daemons.cpu import ExecutionPlan
from device_daemons.cpu.strides import pull_strides
from ir import Edge, Layer, Network, Port
from tests.cpu.cpu_helpers import assert_close, caffe_case


def conv(name, bottom, out, extra="kernel_size: 1"):
    return (f'layer {{ name: "{name}" type: "Convolution" bottom: "{bottom}" top: "{name}" '
            f'convolution_param {{ num_output: {out} {extra} }} }}\n'
            f'layer {{ name: "{name}_relu" type: "ReLU" bottom: "{name}" top: "{name}" }}\n')


def transition(reader2="kernel_size: 1 stride: 2"):
    """A bottleneck block (its shortcut c0 also read by b1) whose output two stride-2 1x1
    convolutions read, as ResNet's next stage."""
    return (conv("c0", "data", 16) + conv("b1", "c0", 8) + conv("b2", "b1", 8, "kernel_size: 3 pad: 1")
            + conv("b3", "b2", 16)
            + 'layer { name: "sum" type: "Eltwise" bottom: "c0" bottom: "b3" top: "sum" }\n'
            + 'layer { name: "sum_relu" type: "ReLU" bottom: "sum" top: "sum" }\n'
            + 'layer { name: "s1" type: "Convolution" bottom: "sum" top: "s1" '
              'convolution_param { num_output: 12 kernel_size: 1 stride: 2 } }\n'
            + f'layer {{ name: "s2" type: "Convolution" bottom: "sum" top: "s2" '
              f'convolution_param {{ num_output: 4 {reader2} }} }}\n')


def strides(plan) -> dict:
    return {step.layer.name: tuple(step.kernel.stride) for step in plan.steps if step.layer.type in
            ("Convolution", "Pooling")}


@pytest.mark.parametrize("backend", ["onednn", "numpy"])
@pytest.mark.parametrize("hw", [(15, 13), (16, 16)])
def test_a_stage_transition_runs_its_3x3_convolution_at_stride_2(tmp_path, backend, hw):
    c = caffe_case(tmp_path, transition(), {"data": (2, 8, *hw)}, scale=0.4)
    _, ref = c.run()
    plan = ExecutionPlan(c.network, backend=backend, precision="f32")
    assert plan.warnings == []
    got = strides(plan)
    assert got["b2"] == (2, 2) and got["b3"] == got["s1"] == got["s2"] == (1, 1)
    assert got["sum/subsample0"] == (2, 2)  # the shortcut, also read by b1 at full size
    assert [n for n in got if n.endswith("subsample1")] == []  # b3's path was pulled, not subsampled
    out = plan.infer(c.inputs)
    for key in ("s1", "s2"):
        assert out[key].shape == ref[key].shape
        assert_close(out[key], ref[key], 1e-4, f"{key} ({backend})")
    rows = []
    plan.infer(c.inputs, rows)
    assert any(r.name == "sum/subsample0" and r.type == "Pooling" for r in rows)
    if backend == "onednn":
        # the subsampled shortcut is made before b3 runs, so b3 adds its result into it (a sum post-op)
        fused = {r.name: r for r in rows if r.name in ("sum", "sum_relu")}
        assert [fused[n].backend for n in ("sum", "sum_relu")] == ["fused into b3"] * 2, rows


@pytest.mark.parametrize("case", ["output", "full_size_reader", "custom_relu"])
def test_nothing_is_pulled_where_the_full_tensor_is_needed(tmp_path, case):
    layers = transition("kernel_size: 3 pad: 1 stride: 2") if case == "full_size_reader" else transition()
    c = caffe_case(tmp_path, layers, {"data": (1, 8, 12, 10)}, scale=0.4)
    _, ref = c.run()
    kwargs = {"extra_outputs": ["b3"]} if case == "output" else {}
    if case == "custom_relu":
        class Relu:
            type = "ReLU"

            def __init__(self, layer):
                pass

            def getMemoryShapes(self, shapes):  # noqa: N802
                return [tuple(shapes[0])]

            def forward(self, inputs):
                return [np.maximum(inputs[0], 0)]
        kwargs = {"custom_kernels": {"ReLU": Relu}}
    plan = ExecutionPlan(c.network, backend="onednn", precision="f32", **kwargs)
    got = strides(plan)
    assert got["b2"] == (1, 1) and got["s1"] == (2, 2) and not any("subsample" in n for n in got)
    out = plan.infer(c.inputs)
    for key in ("s1", "s2"):
        assert_close(out[key], ref[key], 1e-4, key)


def test_a_long_chain_is_followed_without_recursion():
    """Untrusted IRs: a chain of 5000 per-element layers is walked with a stack of its own."""
    n = 5000
    shape = (1, 4, 9, 9)
    conv_data = {"kernel-x": "3", "kernel-y": "3", "pad-x": "1", "pad-y": "1", "output": "4"}
    layers = [Layer(0, "in", "Input", outputs=[Port(0, shape)]),
              Layer(1, "c", "Convolution", data=conv_data, inputs=[Port(0, shape)], outputs=[Port(1, shape)])]
    edges = [Edge(0, 0, 1, 0)]
    for i in range(n):
        layers.append(Layer(2 + i, f"r{i}", "ReLU", inputs=[Port(0, shape)], outputs=[Port(1, shape)]))
        edges.append(Edge(1 + i, 1, 2 + i, 0))
    strided = {"kernel-x": "1", "kernel-y": "1", "output": "4", "stride-x": "2", "stride-y": "2"}
    layers.append(Layer(2 + n, "s", "Convolution", data=strided, inputs=[Port(0, shape)],
                        outputs=[Port(1, (1, 4, 5, 5))]))
    edges.append(Edge(1 + n, 1, 2 + n, 0))
    graph = pull_strides(Network("chain", layers, edges))
    by_name = {layer.name: layer for layer in graph.layers}
    assert by_name["c"].data["stride-x"] == "2" and by_name["s"].data["stride-x"] == "1"
    assert by_name[f"r{n - 1}"].outputs[0].dims == (1, 4, 5, 5)

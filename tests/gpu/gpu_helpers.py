"""Helpers of the GPU plugin tests: one-layer IRs run by the GPU plan and by the
CPU plan (the reference kernels), and the comparison of their outputs."""
from __future__ import annotations

import os

import numpy as np

from tests.cpu.cpu_helpers import rel_err, single_layer_ir

TOL = {"FP32": 1e-5, "FP16": 3e-3}


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def pinned(device, config):
    """A tuner that gives every kernel able to run it the configuration `config`
    (kernels/tiles.py) and lets the others take their heuristic choice."""
    from device_daemons.gpu.tuning import Tuner
    return Tuner(device, "0", pinned=config)


def both_plans(network, device, config=None, **gpu_options):
    """The CPU plan and the GPU plan of `network`; config: a kernel configuration
    pinned for every kernel able to run it."""
    from device_daemons.cpu import ExecutionPlan
    from device_daemons.gpu import GpuPlan
    if config is not None:
        gpu_options["tuner"] = pinned(device, config)
    return ExecutionPlan(network), GpuPlan(network, device, **gpu_options)


def compare_layer(tmp_path, device, layer_type, data, inputs, out_shapes, blobs=None, precision="FP32",
                  rtol=None, name="layer", style=None, config=None):
    """Builds the one-layer IR, runs it on both plans and checks every output;
    returns (gpu outputs, gpu plan). style: the GPU kernels' "simt" / "simd"
    variants (default: the device's); config: a kernel configuration to pin."""
    network = single_layer_ir(tmp_path, layer_type, data, [x.shape for x in inputs], out_shapes, blobs, precision,
                              name=name)
    cpu, gpu = both_plans(network, device, config, style=style)
    assert gpu.warnings == [], gpu.warnings
    feed = {f"in{i}": x for i, x in enumerate(inputs)}
    ref = cpu.infer(feed)
    ours = gpu.infer(feed)
    assert sorted(ours) == sorted(ref)
    tol = TOL[precision] if rtol is None else rtol
    for key in ref:
        assert ours[key].dtype == np.float32
        err = rel_err(ours[key], ref[key])
        assert err <= tol, f"{layer_type} {key}: max |diff| / max |ref| = {err:.3g} > {tol}"
    return ours, gpu


def chain_ir(tmp_path, input_shape, layers, precision="FP32", name="chain"):
    """An IR: Input "data" -> layers in a chain. layers: [(name, type, data, blobs, out_shape)]."""
    from ir import Edge, Layer, Network, Port, read_ir, write_ir
    built = [Layer(0, "data", "Input", outputs=[Port(0, tuple(input_shape))])]
    edges, shape = [], tuple(input_shape)
    for i, (lname, ltype, data, blobs, out_shape) in enumerate(layers, start=1):
        built.append(Layer(i, lname, ltype, data={k: str(v) for k, v in (data or {}).items()},
                           inputs=[Port(0, shape)], outputs=[Port(1, tuple(out_shape))],
                           blobs={k: np.asarray(v, np.float32).ravel() for k, v in (blobs or {}).items()}))
        edges.append(Edge(i - 1, 0 if i == 1 else 1, i, 0))
        shape = tuple(out_shape)
    xml = os.path.join(str(tmp_path), f"{name}_{precision}.xml")
    write_ir(Network(name, built, edges, batch=int(input_shape[0])), xml, precision=precision)
    return read_ir(xml)


def branch_ir(tmp_path, shape, second, tail):
    """data -> "a" (ReLU) and "b" (second = (type, data)) -> "cat" (Concat, axis 1);
    then tail = (name, type, data, id of the layer it reads, its output shapes)."""
    from ir import Edge, Layer, Network, Port, read_ir, write_ir
    s = tuple(shape)
    joined = (s[0], 2 * s[1]) + s[2:]
    name, ltype, data, source, outs = tail
    in_shape = joined if source == 3 else s
    layers = [Layer(0, "data", "Input", outputs=[Port(0, s)]),
              Layer(1, "a", "ReLU", inputs=[Port(0, s)], outputs=[Port(1, s)]),
              Layer(2, "b", second[0], data=dict(second[1]), inputs=[Port(0, s)], outputs=[Port(1, s)]),
              Layer(3, "cat", "Concat", data={"axis": "1"}, inputs=[Port(0, s), Port(1, s)], outputs=[Port(2, joined)]),
              Layer(4, name, ltype, data=dict(data), inputs=[Port(0, in_shape)],
                    outputs=[Port(1 + i, tuple(o)) for i, o in enumerate(outs)])]
    edges = [Edge(0, 0, 1, 0), Edge(0, 0, 2, 0), Edge(1, 1, 3, 0), Edge(2, 1, 3, 1), Edge(source, 2 if source == 3 else 1,
                                                                                          4, 0)]
    xml = os.path.join(str(tmp_path), "branches.xml")
    write_ir(Network("branches", layers, edges), xml)
    return read_ir(xml)


def graph_ir(tmp_path, input_shape, layers, precision="FP32", name="graph"):
    """An IR: Input "data" -> layers = [(name, type, data, blobs, [names of its inputs], out_shape)],
    in execution order; layers nobody reads are the network's outputs."""
    from ir import Edge, Layer, Network, Port, read_ir, write_ir
    built = [Layer(0, "data", "Input", outputs=[Port(0, tuple(input_shape))])]
    where = {"data": (0, 0, tuple(input_shape))}  # name -> (layer id, output port, shape)
    edges = []
    for i, (lname, ltype, data, blobs, sources, out_shape) in enumerate(layers, start=1):
        port = len(sources)
        built.append(Layer(i, lname, ltype, data={k: str(v) for k, v in (data or {}).items()},
                           inputs=[Port(k, where[src][2]) for k, src in enumerate(sources)],
                           outputs=[Port(port, tuple(out_shape))],
                           blobs={k: np.asarray(v, np.float32).ravel() for k, v in (blobs or {}).items()}))
        edges += [Edge(where[src][0], where[src][1], i, k) for k, src in enumerate(sources)]
        where[lname] = (i, port, tuple(out_shape))
    xml = os.path.join(str(tmp_path), f"{name}_{precision}.xml")
    write_ir(Network(name, built, edges, batch=int(input_shape[0])), xml, precision=precision)
    return read_ir(xml)


def compare_plans(network, device, inputs, precision="FP32", extra=None, **gpu_options):
    """Runs `network` on the CPU plan and the GPU plan; checks every output; returns the GPU plan."""
    from device_daemons.cpu import ExecutionPlan
    from device_daemons.gpu import GpuPlan
    config = gpu_options.pop("config", None)
    if config is not None:
        gpu_options["tuner"] = pinned(device, config)
    gpu = GpuPlan(network, device, extra_outputs=extra, **gpu_options)
    assert gpu.warnings == [], gpu.warnings
    ref = ExecutionPlan(network, extra_outputs=extra).infer(inputs)
    ours = gpu.infer(inputs)
    assert sorted(ours) == sorted(ref)
    for key in ref:
        err = rel_err(ours[key], ref[key])
        assert err <= TOL[precision], f"{key}: max |diff| / max |ref| = {err:.3g} > {TOL[precision]}"
    return gpu

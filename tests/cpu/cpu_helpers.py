"""Helpers of the CPU plugin tests: tiny Caffe nets made and run with real pycaffe,
converted with the converter API, run with the ExecutionPlan; hand-built IRs for
the layers pycaffe does not have."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

os.environ.setdefault("GLOG_minloglevel", "2")

from tests.support import BVLC, import_caffe, sdist_prototxt  # noqa: F401  (re-exported for the tests)


def rel_err(ours, ref) -> float:
    ours = np.asarray(ours, np.float64)
    ref = np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, f"shape {ours.shape} != reference {ref.shape}"
    scale = np.abs(ref).max() if ref.size else 0.0
    diff = np.abs(ours - ref).max() if ref.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)


def assert_close(ours, ref, rtol=1e-4, what=""):
    err = rel_err(ours, ref)
    assert err <= rtol, f"{what}: max |diff| / max |ref| = {err:.3g} > {rtol}"


def input_layer(name: str, shape) -> str:
    dims = " ".join(f"dim: {int(d)}" for d in shape)
    return f'layer {{ name: "{name}" type: "Input" top: "{name}" input_param {{ shape {{ {dims} }} }} }}\n'


def fill_params(net, rng, scale=0.5, positive=()):
    """Random weights; blobs of layers named in `positive` get values in [0.5, 1.5)."""
    for name, blobs in net.params.items():
        for blob in blobs:
            if name in positive:
                blob.data[...] = rng.uniform(0.5, 1.5, blob.data.shape)
            else:
                blob.data[...] = rng.standard_normal(blob.data.shape) * scale


def convert_to_plan(proto, model, out_dir, *, disable_fusing=False, batch=None, data_type="FP32",
                    extra_outputs=None, name="net"):
    """Converter API -> write_ir -> read_ir -> ExecutionPlan."""
    from core.pipeline import ConvertOptions, convert
    from device_daemons.cpu import ExecutionPlan
    from ir import read_ir, write_ir
    ctx = convert(ConvertOptions(input_model=str(model), input_proto=str(proto), output_dir=str(out_dir),
                                 disable_fusing=disable_fusing, batch=batch, model_name=name,
                                 data_type=data_type))
    xml = os.path.join(str(out_dir), f"{name}_{data_type}.xml")
    write_ir(ctx.network, xml)
    network = read_ir(xml)
    return ExecutionPlan(network, extra_outputs=extra_outputs), network


@dataclass
class CaffeCase:
    net: object                 # caffe.Net with the random weights
    plan: object                # ExecutionPlan of the converted IR
    network: object             # the ir.Network read back
    inputs: dict = field(default_factory=dict)

    def run(self, inputs: dict | None = None):
        """(plan outputs, {blob name: pycaffe blob}) for the same inputs."""
        inputs = inputs or self.inputs
        for name, value in inputs.items():
            self.net.blobs[name].data[...] = value
        self.net.forward()
        ref = {k: v.data.copy() for k, v in self.net.blobs.items()}
        return self.plan.infer(inputs), ref


def case_model(tmp_path, layers: str, inputs: dict, *, seed=0, scale=0.5, positive=()):
    """A net of Input layers (`inputs`: name -> shape) + `layers` (prototxt text) with
    random weights, made and saved by pycaffe: (prototxt, caffemodel, caffe.Net, rng)."""
    caffe = import_caffe()
    proto = os.path.join(str(tmp_path), "net.prototxt")
    with open(proto, "w") as f:
        f.write('name: "case"\n')
        for name, shape in inputs.items():
            f.write(input_layer(name, shape))
        f.write(layers)
    net = caffe.Net(proto, caffe.TEST)
    rng = np.random.default_rng(seed)
    fill_params(net, rng, scale=scale, positive=positive)
    model = os.path.join(str(tmp_path), "net.caffemodel")
    net.save(model)
    return proto, model, net, rng


def random_inputs(rng, inputs: dict) -> dict:
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in inputs.items()}


def caffe_case(tmp_path, layers: str, inputs: dict, *, seed=0, scale=0.5, positive=(), disable_fusing=False,
               data_type="FP32", extra_outputs=None, input_values=None) -> CaffeCase:
    """case_model(...) converted and compiled."""
    proto, model, net, rng = case_model(tmp_path, layers, inputs, seed=seed, scale=scale, positive=positive)
    plan, network = convert_to_plan(proto, model, tmp_path, disable_fusing=disable_fusing, data_type=data_type,
                                    extra_outputs=extra_outputs)
    return CaffeCase(net, plan, network, random_inputs(rng, inputs) if input_values is None else input_values)


# --- hand-built IRs ---------------------------------------------------------------------
def single_layer_ir(tmp_path, layer_type, data, in_shapes, out_shapes, blobs=None, precision="FP32",
                    name="layer"):
    """Input layers in0, in1, ... -> one layer -> written and read back as IR."""
    from ir import Edge, Layer, Network, Port, read_ir, write_ir
    layers, edges = [], []
    n_in = len(in_shapes)
    for i, shape in enumerate(in_shapes):
        layers.append(Layer(i, f"in{i}", "Input", outputs=[Port(0, tuple(shape))]))
        edges.append(Edge(i, 0, n_in, i))
    layers.append(Layer(n_in, name, layer_type, data={k: str(v) for k, v in data.items()},
                        inputs=[Port(i, tuple(s)) for i, s in enumerate(in_shapes)],
                        outputs=[Port(n_in + j, tuple(s)) for j, s in enumerate(out_shapes)],
                        blobs={k: np.asarray(v, np.float32).ravel() for k, v in (blobs or {}).items()}))
    net = Network("single", layers, edges, batch=int(in_shapes[0][0]) if in_shapes and in_shapes[0] else 1)
    xml = os.path.join(str(tmp_path), f"{name}_{precision}.xml")
    write_ir(net, xml, precision=precision)
    return read_ir(xml)


def run_single(tmp_path, layer_type, data, inputs, out_shapes, blobs=None, precision="FP32", custom=None):
    """Builds the one-layer IR, compiles and runs it; returns (outputs list, plan)."""
    from device_daemons.cpu import ExecutionPlan
    network = single_layer_ir(tmp_path, layer_type, data, [x.shape for x in inputs], out_shapes, blobs, precision)
    plan = ExecutionPlan(network, custom_kernels=custom)
    assert plan.warnings == [], plan.warnings
    result = plan.infer({f"in{i}": x for i, x in enumerate(inputs)})
    if len(out_shapes) == 1:
        return [result["layer"]], plan
    return [result[f"layer.{len(inputs) + j}"] for j in range(len(out_shapes))], plan


def assert_backend(plan, backend, native_types=()):
    """The plan's program is `backend`'s; on oneDNN every layer of `native_types` ran
    on oneDNN (alone or fused into another layer), none fell back to numpy."""
    assert plan.program.backend == backend, (plan.program.backend, plan.warnings)
    if backend == "onednn":
        ran = {layer.name for step in plan.program.steps if step.backend == "onednn" for layer in step.layers}
        missing = [layer.name for layer in plan.network.layers if layer.type in native_types and layer.name not in ran]
        assert not missing, f"ran on numpy: {missing}; reasons {plan.program.fallbacks}"

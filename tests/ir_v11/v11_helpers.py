"""Helpers of the IR v11 tests: write a converted network as IR v11, load it with
the real OpenVINO runtime (f32 inference precision), check that every op's shapes
and element types are the runtime's own, run it next to pycaffe."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from tests.cpu.cpu_helpers import assert_close, case_model, random_inputs, rel_err  # noqa: F401 (re-exported)
from tests.support import convert_api

F32 = {"INFERENCE_PRECISION_HINT": "f32"}


def import_openvino():
    """The OpenVINO runtime is a hard requirement of these tests: fail, never skip."""
    try:
        import openvino
    except ImportError as exc:  # pragma: no cover - requirements.txt installs it
        raise AssertionError(f"the OpenVINO runtime is not importable ({exc}); run ./run test, which installs it")
    return openvino


@dataclass
class V11Run:
    model: object        # our ir.v11 Model
    ov_model: object     # what OpenVINO read
    compiled: object
    xml: str
    warnings: list = field(default_factory=list)

    def infer(self, inputs: dict) -> dict:
        """{tensor name: array} for every name of every output."""
        request = self.compiled.create_infer_request()
        result = request.infer({k: np.ascontiguousarray(v, np.float32) for k, v in inputs.items()})
        out = {}
        for port, value in result.items():
            for name in port.get_names():
                out[name] = np.array(value)
        return out


def check_against_openvino(model, ov_model) -> None:
    """Our ops' output shapes and element types equal the runtime's shape inference
    (-1: a dimension known only at run time)."""
    ours = {}
    for op in model.ops:
        assert op.name not in ours, f"two ops named {op.name!r}"
        ours[op.name] = op
    for node in ov_model.get_ordered_ops():
        name = node.get_friendly_name()
        if name not in ours:
            continue  # OpenVINO may name Results itself
        op = ours[name]
        # the runtime's class names spell some types differently (Constant, Relu, Softmax)
        assert node.get_type_name().lower() == {"Const": "constant"}.get(op.type, op.type.lower()), \
            (name, node.get_type_name(), op.type)
        for k, tensor in enumerate(op.outputs):
            shape = tuple(d.get_length() if d.is_static else -1 for d in node.get_output_partial_shape(k))
            element = node.get_output_element_type(k).get_type_name()
            assert shape == tensor.shape, f"{op.type} {name!r} output {k}: ours {tensor.shape}, OpenVINO {shape}"
            assert element == tensor.element_type, f"{op.type} {name!r} output {k}: {tensor.element_type} != {element}"


def compile_v11(core, network, out_dir, *, data_type="FP32", extension_ops=None, name="model") -> V11Run:
    from ir.v11 import build_model, write_model
    model, warnings = build_model(network, data_type=data_type, extension_ops=extension_ops)
    xml = os.path.join(str(out_dir), f"{name}.xml")
    write_model(model, xml)
    ov_model = core.read_model(xml)
    check_against_openvino(model, ov_model)
    compiled = core.compile_model(ov_model, "CPU", F32)
    return V11Run(model, ov_model, compiled, xml, warnings)


def caffe_forward(net, inputs: dict) -> dict:
    """{blob name: copy} after pycaffe's forward on `inputs` (reshaping the inputs)."""
    for name, value in inputs.items():
        if net.blobs[name].data.shape != value.shape:
            net.blobs[name].reshape(*value.shape)
    if any(net.blobs[n].data.shape != v.shape for n, v in inputs.items()):
        net.reshape()
    for name, value in inputs.items():
        net.blobs[name].data[...] = value
    net.forward()
    return {k: v.data.copy() for k, v in net.blobs.items()}


@dataclass
class V11Case:
    net: object          # caffe.Net with the random weights
    network: object      # the converted ir.Network
    run: V11Run
    inputs: dict

    def outputs(self, inputs: dict | None = None):
        """(OpenVINO outputs by tensor name, pycaffe blobs) for the same inputs."""
        inputs = inputs or self.inputs
        return self.run.infer(inputs), caffe_forward(self.net, inputs)


def v11_case(core, tmp_path, layers: str, inputs: dict, *, seed=0, scale=0.5, positive=(), input_values=None,
             data_type="FP32", **options) -> V11Case:
    """The CPU tests' case_model (Input layers + `layers`, random weights, made by
    pycaffe) converted (options: ConvertOptions), written as IR v11 and compiled by
    OpenVINO."""
    proto, weights, net, rng = case_model(tmp_path, layers, inputs, seed=seed, scale=scale, positive=positive)
    network = convert_api(input_model=weights, input_proto=proto, **options)
    run = compile_v11(core, network, tmp_path, data_type=data_type)
    return V11Case(net, network, run, random_inputs(rng, inputs) if input_values is None else input_values)


def assert_outputs_close(ours: dict, ref: dict, tol: float) -> float:
    """Every reference output (by layer name) against ours; detection outputs compare
    the rows the reference kept (the IR pads to N * keep_top_k, ending with image -1)."""
    worst = 0.0
    for name, want in ref.items():
        assert name in ours, f"OpenVINO outputs {sorted(ours)} have no {name!r}"
        got = ours[name]
        if got.ndim == 4 and got.shape[-1] == 7 and got.shape[2] != want.shape[2]:
            kept = want.shape[2]
            assert got[0, 0, kept, 0] == -1, "the detections do not end where the reference's end"
            got = got[:, :, :kept]
        err = rel_err(got, want)
        assert err <= tol, f"{name}: max |diff| / max |ref| = {err:.3g} > {tol}"
        worst = max(worst, err)
    return worst

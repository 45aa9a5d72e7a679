"""Helpers of the TensorFlow front-end tests: convert a built graph with the
converter API (no TensorFlow in this process), run the IR on the CPU daemon and
compare with TensorFlow's outputs after NCHW -> NHWC."""
from __future__ import annotations

import os

import numpy as np

from core.pipeline import ConvertOptions, convert
from ir import read_ir, write_ir


def convert_model(model: str, out_dir, name: str = "model", data_type: str = "FP32", **options) -> str:
    """Converts with the pipeline and writes the IR; returns the .xml path."""
    ctx = convert(ConvertOptions(input_model=str(model) if model else None, output_dir=str(out_dir), model_name=name,
                                 data_type=data_type, **options))
    xml = os.path.join(str(out_dir), name + ".xml")
    write_ir(ctx.network, xml, precision=data_type)
    return xml


def output_key(xml: str, keys, tf_name: str) -> str:
    """The daemon's key (among `keys`) of the output computed by TF tensor `tf_name` ("node" or
    "node:port"): the layer of that name, "layer.<IR port>" when it has several outputs."""
    if tf_name in keys:
        return tf_name
    name, _, port = tf_name.partition(":")
    if name in keys:
        return name
    layer = read_ir(xml).layer_by_name(name)
    return "{}.{}".format(layer.name, layer.outputs[int(port or 0)].id)


def nchw(x: np.ndarray) -> np.ndarray:
    """A TensorFlow-layout array as the IR's inputs take it: images NCHW, volumes NCDHW."""
    if x.ndim in (4, 5):
        return np.ascontiguousarray(x.transpose(0, x.ndim - 1, *range(1, x.ndim - 1)))
    return x


def nhwc(x: np.ndarray) -> np.ndarray:
    """An IR output in TensorFlow's layout: NHWC, NDHWC."""
    return x.transpose(0, *range(2, x.ndim), 1) if x.ndim in (4, 5) else x


def rel_err(ours, ref) -> float:
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, "shape {} != TensorFlow's {}".format(ours.shape, ref.shape)
    scale = np.abs(ref).max() if ref.size else 0.0
    diff = np.abs(ours - ref).max() if ref.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)


def run_on_daemon(ie, xml: str, feeds: dict, nhwc_io: bool = False) -> tuple[object, dict]:
    """(IENetwork, {output key: array in TensorFlow's layout}) for TensorFlow-layout feeds."""
    net = ie.read_network(model=xml)
    exec_net = ie.load_network(net, "CPU")
    try:
        out = exec_net.infer({k: v if nhwc_io else nchw(v) for k, v in feeds.items()})
    finally:
        exec_net.close()
    return net, {k: np.array(v if nhwc_io else nhwc(np.asarray(v))) for k, v in out.items()}


def compare_with_tf(ie, models, case: str, out_dir, batch: int = 1, tol: float = 1e-4, data_type="FP32",
                    nhwc_io=False, outputs=None, run=run_on_daemon, **options) -> float:
    """Converts `case`, runs it on the daemon with the stored inputs of `batch` and returns the
    worst relative error over its outputs (asserted <= tol). `outputs`: a dict that receives the
    IR's outputs (TensorFlow layout). `run`: another engine with run_on_daemon's signature
    (`ie` is then that engine's handle)."""
    meta = models.meta(case)
    if not meta.get("fixed"):
        options.setdefault("batch", batch)
    if nhwc_io:
        options["disable_nhwc_to_nchw"] = True
    xml = convert_model(models.path(case), out_dir, case, data_type=data_type, **options)
    arrays = models.arrays(case)
    feeds = {k: arrays["in{}/{}".format(batch, k)] for k in meta["inputs"]}
    net, out = run(ie, xml, feeds, nhwc_io)
    if outputs is not None:
        outputs.update(out)
    worst = 0.0
    for i, tf_name in enumerate(meta["outputs"]):
        ref = arrays["out{}/{}".format(batch, i)]
        err = rel_err(out[output_key(xml, out, tf_name)], ref)
        assert err <= tol, "{} output {} ({}): max |diff| / max |ref| = {:.3g} > {}".format(
            case, i, tf_name, err, tol)
        worst = max(worst, err)
    return worst

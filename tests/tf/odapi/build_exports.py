"""Builds Object Detection API exports (frozen_inference_graph.pb + pipeline.config)
with the OD API's own code, and TensorFlow's detections on a fixed image.

Runs in the OD API venv (scripts/odapi_venv.sh), never in the pytest process:

    python build_exports.py --codebase 2.8 --out DIR MODEL [MODEL ...]

All models of one code base are built in this one process (TensorFlow and the OD
API are imported once). Per model: the graph is built with model_builder
(is_training=False), weights are random (seeded), every BatchNorm's moving
statistics are set to the batch statistics of its input on the fixed image (layer
by layer, so activations stay O(1)), the class biases are shifted so that the fixed
image gets a few dozen scores above 0.3, a checkpoint is saved, and
exporter.export_inference_graph writes the frozen graph as the model zoo's exports
were made. TensorFlow then runs the frozen graph on the image: DIR/MODEL/tf_out.npz; the times
and counts go to DIR/MODEL/report.json.
"""
from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import time
import types
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
warnings.filterwarnings("ignore")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

# numpy aliases the 2019-2022 code still uses
for _alias, _type in (("bool", bool), ("object", object), ("float", float), ("int", int), ("str", str)):
    if _alias not in np.__dict__:
        setattr(np, _alias, _type)


class _Absent(types.ModuleType):
    """An import stub for modules only training, evaluation or visualization code uses."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Absent(self.__name__ + "." + name)

    def __call__(self, *args, **kwargs):
        return None


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, prefixes):
        self.prefixes = prefixes

    def find_spec(self, name, path, target=None):
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Absent(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


STUBBED = ("tensorflow_io", "lvis", "pycocotools", "matplotlib", "official", "cv2", "lxml", "contextlib2", "pandas",
           "apache_beam")


def import_odapi(codebase: str):
    """(tf, model_builder, exporter, pipeline_pb2, text_format) of the code base."""
    import tensorflow
    tensorflow.compat.v1.disable_v2_behavior()
    # TensorFlow 2.15's tf.layers load tf_keras.legacy_tf_layers.*, which tf-keras 2.15 keeps under src/
    import tf_keras.src.legacy_tf_layers as legacy
    sys.modules["tf_keras.legacy_tf_layers"] = legacy
    for sub in ("base", "core", "convolutional", "normalization", "pooling", "variable_scope_shim"):
        sys.modules["tf_keras.legacy_tf_layers." + sub] = importlib.import_module("tf_keras.src.legacy_tf_layers." + sub)
    sys.meta_path.insert(0, _StubFinder(STUBBED + ("tensorflow.contrib",)))
    # the slim nets (mobilenet, inception, resnet) the 2.8 package ships inside object_detection/ (`nets`)
    site = os.path.dirname(os.path.dirname(tensorflow.__file__))
    sys.path.append(os.path.join(site, "object_detection"))
    if codebase == "2019":
        # the 2019 package (PYTHONPATH before site-packages): `import tensorflow as tf` used as TF1,
        # tf.contrib.slim is tf_slim, the rest of tf.contrib serves training code only
        import tf_slim
        contrib = importlib.import_module("tensorflow.contrib")
        contrib.slim = tf_slim
        sys.modules["tensorflow.contrib.slim"] = tf_slim
        v1 = tensorflow.compat.v1
        v1.contrib = contrib
        sys.modules["tensorflow"] = v1
    from google.protobuf import text_format
    from object_detection import exporter
    from object_detection.builders import model_builder
    from object_detection.protos import pipeline_pb2
    exporter.profile_inference_graph = lambda graph: None  # tfprof (tf.contrib) statistics, printed only
    exporter.write_saved_model = lambda *args, **kwargs: None  # the tests read the frozen graph only
    return tensorflow.compat.v1, model_builder, exporter, pipeline_pb2, text_format


def fixed_image(height: int, width: int) -> np.ndarray:
    """The test image: smooth colour gradients with a few bright rectangles (uint8 NHWC)."""
    rng = np.random.default_rng(2019)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.stack([120 + 80 * np.sin(x / 9.0), 120 + 80 * np.cos(y / 11.0), 128 + 60 * np.sin((x + y) / 15.0)], -1)
    for _ in range(6):
        h, w = rng.integers(height // 8, height // 3), rng.integers(width // 8, width // 3)
        top, left = rng.integers(0, height - h), rng.integers(0, width - w)
        image[top:top + h, left:left + w] = rng.integers(0, 256, 3)
    image += rng.normal(0, 6, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)[None]


class MomentsBatchNorm:
    """While the calibration graph is built, every fused BatchNorm normalizes with the
    moments of its own input (the statistics its moving averages get afterwards), so
    one session run gives every layer's statistics at once."""

    def __init__(self, tf):
        from tensorflow.python.ops import nn, nn_impl
        # slim's fused path calls nn.fused_batch_norm, tf.layers' (Keras) one tf.compat.v1.nn's
        self.tf, self.modules, self.original = tf, (nn, nn_impl, tf.nn), nn.fused_batch_norm
        self.moments = []   # (mean tensor, variance tensor, mean input, variance input)

    def __enter__(self):
        tf, original = self.tf, self.original

        def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001, data_format="NHWC",
                             is_training=True, **kwargs):
            if is_training or mean is None:
                return original(x, scale, offset, mean=mean, variance=variance, epsilon=epsilon,
                                data_format=data_format, is_training=is_training, **kwargs)
            axes = [0, 1, 2] if data_format == "NHWC" else [0, 2, 3]
            batch_mean, batch_var = tf.nn.moments(x, axes)
            count = np.prod([int(x.shape[a]) for a in axes])
            if count < 8:
                # a map of a few pixels: per-channel statistics of so few values make the layer
                # normalize rounding noise; statistics over all channels keep the signal
                mean_all, var_all = tf.nn.moments(x, [0, 1, 2, 3])
                batch_mean = tf.zeros_like(batch_mean) + mean_all
                batch_var = tf.zeros_like(batch_var) + var_all
            self.moments.append((batch_mean, batch_var, mean, variance))
            return original(x, scale, offset, mean=batch_mean, variance=batch_var, epsilon=epsilon,
                            data_format=data_format, is_training=False, **kwargs)

        for module in self.modules:
            module.fused_batch_norm = fused_batch_norm
        return self

    def __exit__(self, *exc):
        for module in self.modules:
            module.fused_batch_norm = self.original

    def calibrate(self, sess, feed, seed):
        """Random gamma/beta; moving statistics = the moments of each BatchNorm's input."""
        rng = np.random.default_rng(seed)
        tf = self.tf
        for v in tf.global_variables():
            name = v.op.name
            if name.endswith("BatchNorm/gamma"):
                v.load(rng.uniform(0.5, 1.5, v.shape).astype(np.float32), sess)
            elif name.endswith("BatchNorm/beta"):
                v.load(rng.normal(0, 0.2, v.shape).astype(np.float32), sess)
        values = sess.run([(m, v) for m, v, _, _ in self.moments], feed)
        by_name = {v.op.name: v for v in tf.global_variables()}
        covered = set()
        for _, _, mean_in, _ in self.moments:
            op = mean_in.op
            while op.type == "Identity" and op.inputs:
                op = op.inputs[0].op
            covered.add(op.name)
        missed = sorted(n for n in by_name if n.endswith("moving_mean") and n not in covered)
        if missed:
            raise RuntimeError("BatchNorms the calibration did not reach: {}".format(missed[:5]))
        for (mean, var), (_, _, mean_in, var_in) in zip(values, self.moments):
            for tensor, value in ((mean_in, mean), (var_in, var)):
                op = tensor.op
                while op.type == "Identity" and op.inputs:
                    op = op.inputs[0].op
                by_name[op.name].load(value, sess)
        return len(values)


def shift_class_biases(tf, sess, logits_tensor, bias_vars, classes_with_background, feed, target, softmax):
    """Adds one offset per class to the class predictors' biases so that `target` anchors
    (boxes) per foreground class score above 0.3 on the fixed image, the next one well below."""
    logits = sess.run(logits_tensor, feed).reshape(-1, classes_with_background)
    shift = np.zeros(classes_with_background, np.float32)
    for c in range(1, classes_with_background):
        if softmax:
            # margin of class c over the others' log-sum-exp
            others = np.delete(logits, c, axis=1)
            margin = logits[:, c] - np.log(np.exp(others).sum(1))
        else:
            margin = logits[:, c]
        ordered = np.sort(margin)[::-1]
        k = min(target, len(margin) - 1)
        shift[c] = np.log(0.3 / 0.7) - (ordered[k - 1] + ordered[k]) / 2
    for v in bias_vars:
        value = sess.run(v)
        value = value + np.tile(shift, value.size // classes_with_background)
        v.load(value, sess)


def build_one(api, name: str, out: str, codebase: str, seed: int) -> dict:
    tf, model_builder, exporter, pipeline_pb2, text_format = api
    config = pipeline_pb2.TrainEvalPipelineConfig()
    with open(os.path.join(HERE, "configs", name + ".config")) as f:
        text_format.Merge(f.read(), config)
    meta = json.load(open(os.path.join(HERE, "configs", "models.json")))[name]
    height, width = meta["image"]
    image = fixed_image(height, width)
    shutil.rmtree(out, ignore_errors=True)  # the exporter refuses to overwrite a SavedModel
    os.makedirs(out)
    ckpt = os.path.join(out, "train", "model.ckpt")
    started = time.perf_counter()
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(seed)
        with MomentsBatchNorm(tf) as batch_norms:
            model = model_builder.build(config.model, is_training=False)
            inputs = tf.placeholder(tf.uint8, [1, height, width, 3])
            pre, shapes = model.preprocess(tf.cast(inputs, tf.float32))
            predictions = model.predict(pre, shapes)
        tf.train.get_or_create_global_step()  # the exporter restores it
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            feed = {inputs: image}
            print("graph", time.perf_counter() - started, file=sys.stderr)
            batch_norms.calibrate(sess, feed, seed)
            print("calibrated", time.perf_counter() - started, file=sys.stderr)
            classes = meta["classes"] + 1
            for key, scope, softmax in meta["class_heads"]:
                biases = [v for v in tf.global_variables()
                          if v.op.name.endswith("biases") and scope in v.op.name]
                assert biases, (name, scope)
                shift_class_biases(tf, sess, predictions[key], biases, classes if key.startswith("class")
                                   else 2, feed, meta["target"], softmax)
            saver.save(sess, ckpt)
    built = time.perf_counter() - started
    export_dir = os.path.join(out, "export")
    with tf.Graph().as_default():
        exporter.export_inference_graph("image_tensor", config, ckpt, export_dir)
    print("exported", time.perf_counter() - started, file=sys.stderr)
    frozen = os.path.join(export_dir, "frozen_inference_graph.pb")
    graph_def = tf.GraphDef()
    with open(frozen, "rb") as f:
        graph_def.ParseFromString(f.read())
    with tf.Graph().as_default() as g:
        tf.import_graph_def(graph_def, name="")
        with tf.Session(graph=g) as sess:
            names = ["detection_boxes", "detection_scores", "detection_classes", "num_detections"]
            values = sess.run([n + ":0" for n in names], {"image_tensor:0": image})
    np.savez(os.path.join(out, "tf_out.npz"), image=image, **dict(zip(names, values)))
    scores = values[1][0]
    return {"model": name, "codebase": codebase, "seconds_build": round(built, 1),
            "seconds_total": round(time.perf_counter() - started, 1), "above_0.3": int((scores > 0.3).sum()),
            "nodes": len(graph_def.node)}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--codebase", choices=("2.8", "2019"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args(argv)
    api = import_odapi(args.codebase)
    for i, name in enumerate(args.models):
        report = build_one(api, name, os.path.join(args.out, name), args.codebase, seed=1000 + i)
        with open(os.path.join(args.out, name, "report.json"), "w") as f:
            json.dump(report, f)
        print(json.dumps(report), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()

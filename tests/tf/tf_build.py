"""Helpers of the builder scripts (tests/tf/graphs.py, tests/tf/keras_apps.py,
tests/tf_worker/offload_graphs.py).

They run in a SUBPROCESS with real TensorFlow (never imported by the pytest
process): each model is a tf.function frozen with convert_variables_to_constants_v2
into a GraphDef (.pb), run by TensorFlow on seeded inputs; the reference outputs
go next to it. The test process reads only the files (tests/tf/conftest.py).
"""
from __future__ import annotations

import json
import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402


def freeze(fn, specs: dict, dtypes: dict | None = None):
    """(GraphDef, frozen ConcreteFunction) of fn(**inputs); specs: {name: shape with None batch}; dtypes: {name:
    numpy dtype} of the inputs that are no float32 (an embedding's int32 ids)."""
    signature = [tf.TensorSpec(shape, tf.as_dtype((dtypes or {}).get(name, np.float32)), name=name)
                 for name, shape in specs.items()]
    concrete = tf.function(lambda *args: fn(*args)).get_concrete_function(*signature)
    frozen = convert_variables_to_constants_v2(concrete)
    return frozen.graph.as_graph_def(), frozen


FLOAT_TYPES = (1, 2, 14, 19)  # DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_HALF
DT_BOOL = 10


def _computes(node) -> bool:
    """Does this Cast compute something in the IR: a float's to an integer type (its fraction dropped), or a
    non-bool to bool (x != 0)? (The others pass their input on.)"""
    src, dst = node.attr["SrcT"].type, node.attr["DstT"].type
    return (src in FLOAT_TYPES and dst not in FLOAT_TYPES) or (dst == DT_BOOL and src != DT_BOOL)


def strip_identities(graph_def, tensor_name: str) -> str:
    """The node computing a frozen graph's output, past the Identity nodes freezing adds and
    the Casts that compute nothing in the IR: the name its IR layer has."""
    nodes = {n.name: n for n in graph_def.node}
    name, _, port = tensor_name.partition(":")
    while nodes[name].op == "Identity" or (nodes[name].op == "Cast" and not _computes(nodes[name])):
        name, _, port = nodes[name].input[0].lstrip("^").partition(":")
    return name if port in ("", "0") else "{}:{}".format(name, port)


def run_frozen(frozen, inputs: dict) -> list[np.ndarray]:
    out = frozen(*[tf.constant(v) for v in inputs.values()])
    out = out if isinstance(out, (list, tuple)) else [out]
    return [np.asarray(o) for o in out]


class Writer:
    """Writes <case>.pb, <case>.npz (inputs, TF outputs per batch) and index.json."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir
        self.index = {}
        os.makedirs(out_dir, exist_ok=True)

    def add(self, name: str, fn, inputs: dict, batches=(1,), text=False, extra=None, feeds=None, fixed=False,
            runs=None):
        """inputs: {name: array of batch 1}. feeds: {tag: {input: array}} extra input sets
        whose outputs are stored too (e.g. preprocessed inputs); runs: {tag: callable returning
        a list of arrays} other reference computations stored as "tag/i". The batch of the
        Placeholders is unknown (-1) unless `fixed`."""
        specs = {k: v.shape if fixed else (None,) + v.shape[1:] for k, v in inputs.items()}
        graph_def, frozen = freeze(fn, specs, {k: v.dtype for k, v in inputs.items() if v.dtype != np.float32})
        path = os.path.join(self.out_dir, name + (".pbtxt" if text else ".pb"))
        if text:
            from google.protobuf import text_format
            with open(path, "w") as f:
                f.write(text_format.MessageToString(graph_def))
        else:
            with open(path, "wb") as f:
                f.write(graph_def.SerializeToString())
        arrays = {}
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        for batch in batches:
            feed = {k: v if batch == 1 else np.concatenate([v] + [rng.standard_normal(v.shape).astype(np.float32)
                                                                  for _ in range(batch - 1)])
                    for k, v in inputs.items()}
            for k, v in feed.items():
                arrays["in{}/{}".format(batch, k)] = v
            for i, out in enumerate(run_frozen(frozen, feed)):
                arrays["out{}/{}".format(batch, i)] = out
        for tag, feed in (feeds or {}).items():
            for k, v in feed.items():
                arrays["{}/in/{}".format(tag, k)] = v
            for i, out in enumerate(run_frozen(frozen, feed)):
                arrays["{}/{}".format(tag, i)] = out
        for tag, run in (runs or {}).items():
            for i, out in enumerate(run()):
                arrays["{}/{}".format(tag, i)] = out
        np.savez(os.path.join(self.out_dir, name + ".npz"), **arrays)
        self.index[name] = {
            "model": os.path.basename(path), "inputs": {k: list(v.shape) for k, v in inputs.items()},
            "outputs": [strip_identities(graph_def, t.name) for t in frozen.outputs], "batches": list(batches),
            "ops": sorted({n.op for n in graph_def.node}), "fixed": fixed, **(extra or {})}

    def close(self):
        with open(os.path.join(self.out_dir, "index.json"), "w") as f:
            json.dump(self.index, f, indent=1, sort_keys=True)


def case_registry():
    """(cases, case) for a builder of small graphs: @case(name, *shapes, **kw) registers
    fn(rng, *inputs) with inputs x (, y, ...) of those shapes; build_cases builds them."""
    cases = []

    def case(name, *shapes, **kw):
        def wrap(fn):
            cases.append((name, fn, shapes, kw))
            return fn
        return wrap
    return cases, case


def w(rng, *shape, scale=0.5):
    """A seeded constant weight."""
    return tf.constant((rng.standard_normal(shape) * scale).astype(np.float32))


def build_cases(writer, cases):
    """Freezes and stores every registered case (seeded by its name) with its inputs
    (kw: names, batches, fixed, feeds(rng, inputs), runs(seed, inputs), ints=(low, high): int32 inputs drawn
    from [low, high) instead of standard normal floats)."""
    for name, fn, shapes, kw in cases:
        seed = zlib.crc32(name.encode())
        rng = np.random.default_rng(seed)
        names = kw.get("names") or (["x", "y"][:len(shapes)])
        if "ints" in kw:
            inputs = {n: rng.integers(*kw["ints"], s).astype(np.int32) for n, s in zip(names, shapes)}
        else:
            inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}

        def model(*args, _fn=fn, _seed=seed + 1):
            return _fn(np.random.default_rng(_seed), *args)  # the same weights at every trace
        feeds = kw["feeds"](rng, inputs) if "feeds" in kw else None
        runs = kw["runs"](seed + 1, inputs) if "runs" in kw else None
        writer.add(name, model, inputs, batches=kw.get("batches", (1,)), fixed=kw.get("fixed", False), feeds=feeds,
                   runs=runs)


def main(build):
    """`python <builder>.py OUT_DIR`: build(writer) then the index."""
    out_dir = sys.argv[1]
    writer = Writer(out_dir)
    build(writer)
    writer.close()

"""GraphDefs written with the project's own TensorFlow schema (core/front/tf/proto),
no TensorFlow needed: hand-made graphs for the error cases TensorFlow would not
let us build (a cycle, a wrong attribute type, unknown ops) and for the
no-framework environment (tox -e core)."""
from __future__ import annotations

import numpy as np

from core.front.tf.loader import tf_pb2

DT_FLOAT, DT_INT32 = 1, 3


def node(name: str, op: str, inputs=(), **attrs):
    pb2 = tf_pb2()
    n = pb2.NodeDef(name=name, op=op, input=list(inputs))
    for key, value in attrs.items():
        set_attr(n.attr[key], value)
    if op not in ("Const", "Placeholder", "NoOp") and "T" not in attrs:
        n.attr["T"].type = DT_FLOAT
    return n


def set_attr(attr, value):
    if isinstance(value, bool):
        attr.b = value
    elif isinstance(value, int):
        attr.i = value
    elif isinstance(value, float):
        attr.f = value
    elif isinstance(value, str):
        attr.s = value.encode()
    elif isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        attr.list.i.extend(value)
    elif isinstance(value, np.ndarray):
        tensor(attr.tensor, value)
    else:
        raise TypeError(value)


def tensor(proto, value: np.ndarray):
    value = np.asarray(value)
    proto.dtype = DT_INT32 if value.dtype.kind in "iu" else DT_FLOAT
    for d in value.shape:
        proto.tensor_shape.dim.add().size = int(d)
    proto.tensor_content = value.astype(np.int32 if value.dtype.kind in "iu" else np.float32).tobytes()


def placeholder(name: str, shape):
    n = node(name, "Placeholder", dtype=DT_FLOAT)
    for d in shape:
        n.attr["shape"].shape.dim.add().size = int(d)
    return n


def const(name: str, value):
    value = np.asarray(value)
    n = node(name, "Const")
    n.attr["dtype"].type = DT_INT32 if value.dtype.kind in "iu" else DT_FLOAT
    tensor(n.attr["value"].tensor, value)
    return n


def conv2d(name: str, x: str, w: str, strides=(1, 1, 1, 1), padding="SAME"):
    return node(name, "Conv2D", [x, w], strides=list(strides), padding=padding, data_format="NHWC",
                dilations=[1, 1, 1, 1])


def graph(*nodes):
    g = tf_pb2().GraphDef()
    g.node.extend(nodes)
    g.versions.producer = 1882
    return g


def save(g, path, text: bool = False) -> str:
    if text:
        from google.protobuf import text_format
        with open(path, "w") as f:
            f.write(text_format.MessageToString(g))
    else:
        with open(path, "wb") as f:
            f.write(g.SerializeToString())
    return str(path)


def small_cnn(seed: int = 0):
    """x (1,8,8,3) -> Conv2D SAME 3x3 -> BiasAdd -> Relu -> MaxPool 2x2 -> Reshape -> MatMul -> Softmax, with
    TF2 freezing leftovers (Identity chain, a NoOp reached by control inputs). Returns (graph, weights)."""
    rng = np.random.default_rng(seed)
    wt = {"w": rng.standard_normal((3, 3, 3, 4)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32),
          "fc": rng.standard_normal((64, 5)).astype(np.float32)}
    g = graph(
        placeholder("x", (-1, 8, 8, 3)),
        const("w", wt["w"]), const("b", wt["b"]), const("fc", wt["fc"]), const("shape", np.array([-1, 64])),
        node("w/read", "Identity", ["w"]), node("w/read2", "Identity", ["w/read"]),
        conv2d("conv", "x", "w/read2"),
        node("bias", "BiasAdd", ["conv", "b"], data_format="NHWC"),
        node("relu", "Relu", ["bias"]),
        node("pool", "MaxPool", ["relu"], ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID",
             data_format="NHWC"),
        node("flat", "Reshape", ["pool", "shape"], Tshape=DT_INT32),
        node("logits", "MatMul", ["flat", "fc"], transpose_a=False, transpose_b=False),
        node("prob", "Softmax", ["logits"]),
        node("NoOp", "NoOp", ["^w/read", "^fc"]),
        node("Identity", "Identity", ["prob", "^NoOp"]),
    )
    return g, wt


def small_cnn_reference(x: np.ndarray, wt: dict) -> np.ndarray:
    """numpy's own computation of small_cnn (NHWC), independent of the converter and the CPU kernels."""
    n, h, w_, _ = x.shape
    padded = np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)])
    conv = np.zeros((n, h, w_, 4), np.float64)
    for dy in range(3):
        for dx in range(3):
            conv += np.einsum("nhwc,co->nhwo", padded[:, dy:dy + h, dx:dx + w_], wt["w"][dy, dx])
    relu = np.maximum(conv + wt["b"], 0)
    pool = relu.reshape(n, h // 2, 2, w_ // 2, 2, 4).max(axis=(2, 4))
    logits = pool.reshape(n, 64) @ wt["fc"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)

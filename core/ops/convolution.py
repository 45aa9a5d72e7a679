"""Convolution and Deconvolution (IR: Convolution, Deconvolution; weights GOIYX)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op


def pad_end(node) -> np.ndarray:
    """Bottom/right padding: `pad_end` where a front end set it (TensorFlow's SAME pads more at
    the end), else the same as the top/left `pad`."""
    value = node.soft_get("pad_end")
    return np.asarray(node.pad if value is None else value, dtype=np.int64)


def end_pad_attrs():
    """pad-b / pad-r, written only when they differ from pad-y / pad-x."""
    def get(axis):
        return lambda n: None if np.array_equal(pad_end(n), n.pad) else int(pad_end(n)[axis])
    return [("pad-b", get(0)), ("pad-r", get(1))]


def spatial_attrs():
    """IR v2 writes each 2-D parameter as -x/-y pairs plus the 4-D `stride`."""
    return [
        ("dilation-x", lambda n: n.dilation[1]), ("dilation-y", lambda n: n.dilation[0]),
        "group",
        ("kernel-x", lambda n: n.kernel[1]), ("kernel-y", lambda n: n.kernel[0]),
        "output",
        *end_pad_attrs(),
        ("pad-x", lambda n: n.pad[1]), ("pad-y", lambda n: n.pad[0]),
        ("stride", lambda n: "1,1,{},{}".format(n.stride[0], n.stride[1])),
        ("stride-x", lambda n: n.stride[1]), ("stride-y", lambda n: n.stride[0]),
    ]


def _weights_count(node):
    for name, blob, _ in node.blob_inputs():
        if name == "weights":
            return blob.value.size
    return None


class Convolution(Op):
    op = "Convolution"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Convolution", "op": self.op, "group": 1, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return spatial_attrs()

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        if len(shape) != 4:
            raise ShapeError("Convolution '{}' needs a 4-D input, got shape {}.", node.name, list(shape))
        k, s, p, d = (np.asarray(node[a], dtype=np.int64) for a in ("kernel", "stride", "pad", "dilation"))
        group, out_c = int(node.group), int(node.output)
        if shape[1] % group or out_c % group:
            raise ShapeError("Convolution '{}': {} input channels and {} outputs cannot be split into {} groups.",
                             node.name, shape[1], out_c, group)
        expected = out_c * (shape[1] // group) * int(np.prod(k))
        have = _weights_count(node)
        if have is not None and have != expected:
            raise ShapeError(
                "Convolution '{}' has {} weights but an input of shape {} needs {} ({} outputs x {} input "
                "channels per group x kernel {}). The input shape does not agree with the weights: check "
                "--input_shape.", node.name, have, list(shape), expected, out_c, shape[1] // group, list(k))
        extent = d * (k - 1) + 1
        spatial = (shape[2:] + p + pad_end(node) - extent) // s + 1
        if np.any(spatial <= 0):
            raise ShapeError("Convolution '{}': input {} is smaller than the kernel extent {}.", node.name,
                             list(shape), list(extent))
        node.out_node(0).shape = np.array([shape[0], out_c, *spatial], dtype=np.int64)


class Deconvolution(Op):
    op = "Deconvolution"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Deconvolution", "op": self.op, "group": 1, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return spatial_attrs()

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        k, s, p, d = (np.asarray(node[a], dtype=np.int64) for a in ("kernel", "stride", "pad", "dilation"))
        group, out_c = int(node.group), int(node.output)
        # Caffe keeps deconvolution weights as (C_in, C_out/group, kh, kw)
        expected = shape[1] * (out_c // group) * int(np.prod(k))
        have = _weights_count(node)
        if have is not None and have != expected:
            raise ShapeError("Deconvolution '{}' has {} weights but an input of shape {} needs {}.",
                             node.name, have, list(shape), expected)
        spatial = s * (shape[2:] - 1) + d * (k - 1) + 1 - p - pad_end(node)
        node.out_node(0).shape = np.array([shape[0], out_c, *spatial], dtype=np.int64)

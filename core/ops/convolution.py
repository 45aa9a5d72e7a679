"""Convolution and Deconvolution (IR: Convolution, Deconvolution; weights GOIYX)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, check_ranges, ir_attrs

_WINDOW = ("kernel", "stride", "pad", "pad_end", "dilation", "group", "output")


def pad_end(node) -> np.ndarray:
    """Bottom/right padding: `pad_end` where a front end set it (TensorFlow's SAME pads more at
    the end), else the same as the top/left `pad`."""
    value = node.soft_get("pad_end")
    return np.asarray(node.pad if value is None else value, dtype=np.int64)


def end_pad_getter(node):
    """pad-b / pad-r are written only when they differ from pad-y / pad-x."""
    end = pad_end(node)
    return None if np.array_equal(end, node.pad) else end


def check_rank(node, shape, what: str):
    """A 2-D window over an NCHW input or a 3-D one over an NCDHW volume, every window attribute of as many axes.
    The attributes `uniform_window` names (a Caffe layer's single values) take the input's spatial axes."""
    windows = [name for name in _WINDOW[:5] if node.soft_get(name) is not None]
    for name in node.soft_get("uniform_window") or ():
        if name in windows and len(shape) in (4, 5):
            node[name] = np.repeat(np.asarray(node[name], np.int64).ravel()[:1], len(shape) - 2)
    spatial = len(np.atleast_1d(node.kernel)) if node.soft_get("kernel") is not None else 2
    if len(shape) != 2 + spatial or spatial not in (2, 3):
        raise ShapeError("{} '{}' with a {}-D window needs a {}-D input, got shape {}.", what, node.name, spatial,
                         2 + spatial, list(shape))
    mixed = [name for name in windows if np.size(node[name]) != spatial]
    if mixed:
        raise ShapeError("{} '{}': {} of a {}-D window must have {} values each, got {}.", what, node.name,
                         ", ".join(mixed), spatial, spatial, [list(np.ravel(node[n])) for n in mixed])


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
        return ir_attrs(self.op, pad_end=end_pad_getter)

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        check_rank(node, shape, "Convolution")
        check_ranges(node, "Convolution", _WINDOW)
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
        return ir_attrs(self.op, pad_end=end_pad_getter)

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        check_rank(node, shape, "Deconvolution")
        check_ranges(node, "Deconvolution", _WINDOW)
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

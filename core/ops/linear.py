"""Linear element-wise ops: ScaleShift, Eltwise, and the internal Mul/Add that
linear fusing works on (core/middle/fusing.py)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, copy_shape_infer, feature_axis, ir_attrs
from core.ops.resize import zoom_rule_hint


def _channel_blob_check(node):
    shape = node.in_node(0).shape
    channels = shape[feature_axis(node)] if len(shape) > 1 else shape[0]
    for name, blob, _ in node.blob_inputs():
        if blob.value.size not in (1, channels):
            raise ShapeError("Layer '{}': its {} has {} values but the input has {} channels (shape {}).",
                             node.name, name, blob.value.size, channels, list(shape))


def _linear_infer(node):
    _channel_blob_check(node)
    copy_shape_infer(node)


class ScaleShift(Op):
    """y = weights[c] * x + biases[c] over channel axis 1."""
    op = "ScaleShift"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "ScaleShift", "op": self.op, "infer": _linear_infer}, attrs)


class Mul(Op):
    """x * weights[c] (internal: becomes ScaleShift or is fused)."""
    op = "Mul"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "ScaleShift", "op": self.op, "infer": _linear_infer}, attrs)


class Add(Op):
    """x + biases[c] (internal: becomes ScaleShift or is fused)."""
    op = "Add"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "ScaleShift", "op": self.op, "infer": _linear_infer}, attrs)


def _caffe_broadcast(node, shape, part) -> None:
    """Caffe's rule for Scale/Bias with a second input: its shape is the first's from
    `axis` on (then normalized into node.caffe_axis)."""
    axis = int(node.caffe_axis)
    axis = axis + len(shape) if axis < 0 else axis
    if not (0 <= axis and axis + len(part) <= len(shape)
            and [int(d) for d in part] == [int(d) for d in shape[axis:axis + len(part)]]):
        raise ShapeError("{} '{}': its second input {} does not match its first {} from axis {} on, as Caffe "
                         "broadcasts it.", node.soft_get("caffe_type", "Eltwise"), node.name, list(part),
                         list(shape), node.caffe_axis)
    node.caffe_axis = axis


class Eltwise(Op):
    op = "Eltwise"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Eltwise", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Eltwise")

    @staticmethod
    def infer(node):
        shapes = [d.shape for d in node.data_inputs()]
        if node.soft_get("caffe_axis") is not None and len(shapes) == 2 and not np.array_equal(*shapes):
            _caffe_broadcast(node, *shapes)  # (core/middle/caffe_broadcast.py then makes the shapes one)
            node.out_node(0).shape = np.array(shapes[0], dtype=np.int64)
            return
        for s in shapes[1:]:
            if not np.array_equal(s, shapes[0]):
                raise ShapeError("Eltwise '{}' inputs have different shapes: {}.{}", node.name,
                                 ", ".join(str(list(x)) for x in shapes), zoom_rule_hint(node))
        coeff = node.soft_get("coeff")
        if coeff is not None and len(coeff) != len(shapes):
            raise ShapeError("Eltwise '{}' has {} coefficients for {} inputs.", node.name, len(coeff), len(shapes))
        node.out_node(0).shape = np.array(shapes[0], dtype=np.int64)


class Select(Op):
    """input 1 where input 0 (the condition, 0 / 1) is not 0, else input 2; the three of one shape."""
    op = "Select"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Select", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Select")

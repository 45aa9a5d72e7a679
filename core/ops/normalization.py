"""Normalizations: SoftMax, LogSoftmax, Norm (LRN), Normalize (SSD), MVN, GRN, BatchNormalization."""

from core.errors import ShapeError
from core.ops.op import Op, copy_shape_infer, ir_attrs


def _normalized_axis(node, shape, attr="axis"):
    axis = int(node[attr])
    if not -len(shape) <= axis < len(shape):
        raise ShapeError("Layer '{}': axis {} is out of range for an input of shape {}.", node.name, axis,
                         list(shape))
    return axis % len(shape)


class SoftMax(Op):
    op = "SoftMax"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "SoftMax", "op": self.op, "axis": 1, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("SoftMax")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        node.axis = _normalized_axis(node, shape)
        copy_shape_infer(node)


class LogSoftmax(SoftMax):
    op = "LogSoftmax"

    def __init__(self, graph, attrs):
        super().__init__(graph, dict(attrs, type="LogSoftmax"))

    def backend_attrs(self):
        return ir_attrs("LogSoftmax")


class Norm(Op):
    """Caffe LRN. IR v2 has no `k`: it is written only when it differs from 1."""
    op = "Norm"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Norm", "op": self.op, "k": 1.0, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Norm", k=lambda n: None if n.k == 1 else n.k)


class Normalize(Op):
    """SSD L2 normalization with a learned per-channel (or shared) scale blob."""
    op = "Normalize"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Normalize", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Normalize")


class MVN(Op):
    op = "MVN"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "MVN", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("MVN")


class LayerNorm(Op):
    """(x - mean) / sqrt(var + eps) over one axis, then the optional weights and biases blobs."""
    op = "LayerNorm"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "LayerNorm", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("LayerNorm")


class GRN(Op):
    op = "GRN"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "GRN", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("GRN")


class BatchNormalization(Op):
    """Caffe BatchNorm with its stored mean/variance; always lowered to
    ScaleShift by core/middle/linear_lowering.py before emission."""
    op = "BatchNormalization"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "BatchNormalization", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("BatchNormalization")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        for name, blob, _ in node.blob_inputs():
            if name in ("mean", "variance") and len(shape) > 1 and blob.value.size != shape[1]:
                raise ShapeError("BatchNorm '{}' has {} {} values for {} channels (input shape {}).",
                                 node.name, blob.value.size, name, shape[1], list(shape))
        copy_shape_infer(node)

"""Layout and shape ops: Concat, Split, Reshape, Crop, Permute, Tile."""
import math

import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs
from core.ops.resize import zoom_rule_hint
from ir.gather import gather_shape


def _axis(node, rank, attr="axis"):
    axis = int(node[attr])
    if not -rank <= axis < rank:
        raise ShapeError("Layer '{}': axis {} is out of range for rank {}.", node.name, axis, rank)
    return axis % rank


class Concat(Op):
    op = "Concat"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Concat", "op": self.op, "axis": 1, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Concat")

    @staticmethod
    def infer(node):
        shapes = [d.shape for d in node.data_inputs()]
        axis = _axis(node, len(shapes[0]))
        node.axis = axis
        for s in shapes[1:]:
            if len(s) != len(shapes[0]) or not np.array_equal(np.delete(s, axis), np.delete(shapes[0], axis)):
                raise ShapeError("Concat '{}' inputs {} differ outside the concatenation axis {}.{}", node.name,
                                 ", ".join(str(list(x)) for x in shapes), axis, zoom_rule_hint(node))
        out = np.array(shapes[0], dtype=np.int64)
        out[axis] = sum(int(s[axis]) for s in shapes)
        node.out_node(0).shape = out


class Split(Op):
    """Splits along `axis` at `slice_point`s (Caffe Slice); output port sizes tell the parts."""
    op = "Split"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Split", "op": self.op, "axis": 1, "slice_point": [],
                                 "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Split")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        axis = _axis(node, len(shape))
        node.axis = axis
        outs = node.out_nodes()
        n = len(outs)
        points = list(node.slice_point)
        if points:
            if len(points) != n - 1:
                raise ShapeError("Slice '{}' has {} slice points for {} outputs.", node.name, len(points), n)
            bounds = [0] + points + [int(shape[axis])]
        else:
            if shape[axis] % n:
                raise ShapeError("Slice '{}' cannot split {} elements of axis {} into {} equal parts.",
                                 node.name, shape[axis], axis, n)
            step = int(shape[axis]) // n
            bounds = [i * step for i in range(n + 1)]
        sizes = np.diff(bounds)
        if np.any(sizes <= 0):
            raise ShapeError("Slice '{}' has slice points {} that do not increase within {}.", node.name, points,
                             shape[axis])
        for port, size in enumerate(sizes):
            out = np.array(shape, dtype=np.int64)
            out[axis] = size
            outs[port].shape = out


def resolve_reshape(node, shape, dims, axis=0, num_axes=-1):
    """Caffe Reshape rules: 0 copies the input dim, -1 is inferred, within [axis, axis+num_axes)."""
    rank = len(shape)
    axis = axis % (rank + 1) if axis < 0 else axis
    end = rank if num_axes == -1 else axis + num_axes
    if end > rank:
        raise ShapeError("Reshape '{}': axis {} + num_axes {} is beyond the input rank {}.", node.name, axis,
                         num_axes, rank)
    middle = []
    for i, d in enumerate(dims):
        if d == 0:
            if axis + i >= rank:
                raise ShapeError("Reshape '{}': dim 0 at position {} copies a dimension the input {} does not "
                                 "have.", node.name, i, list(shape))
            middle.append(int(shape[axis + i]))
        else:
            middle.append(int(d))
    out = [int(x) for x in shape[:axis]] + middle + [int(x) for x in shape[end:]]
    total = math.prod(int(x) for x in shape)
    if out.count(-1) > 1:
        raise ShapeError("Reshape '{}': more than one -1 in {}.", node.name, list(dims))
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or total % known:
            raise ShapeError("Reshape '{}' cannot reshape {} into {}.", node.name, list(shape), list(dims))
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ShapeError("Reshape '{}' cannot reshape {} ({} elements) into {}.", node.name, list(shape), total, out)
    return np.array(out, dtype=np.int64)


class Reshape(Op):
    """IR Reshape with the resolved output shape in `dim` (axis=0, num_axes=-1)."""
    op = "Reshape"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Reshape", "op": self.op, "axis": 0, "num_axes": -1,
                                 "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Reshape", axis=lambda n: 0, dim=lambda n: n.out_node(0).shape, num_axes=lambda n: -1)

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        if node.soft_get("flatten"):
            rank = len(shape)
            start, end = int(node.axis) % rank, int(node.end_axis) % rank
            # exact (Python int) product: an int64 np.prod would wrap around silently
            out = [int(x) for x in shape[:start]] + [math.prod(int(x) for x in shape[start:end + 1])] + \
                  [int(x) for x in shape[end + 1:]]
            node.out_node(0).shape = np.array(out, dtype=np.int64)
            return
        node.out_node(0).shape = resolve_reshape(node, shape, node.dim, int(node.axis), int(node.num_axes))


class Crop(Op):
    """Caffe Crop: input 0 cropped to input 1's dims from `axis` on, at `offset`s."""
    op = "Crop"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Crop", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Crop")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        ref = node.in_node(1).shape
        start = _axis(node, len(shape), "start_axis")
        axes = list(range(start, len(shape)))
        offsets = list(node.crop_offsets) or [0]
        if len(offsets) == 1:
            offsets = offsets * len(axes)
        if len(offsets) != len(axes):
            raise ShapeError("Crop '{}' has {} offsets for {} cropped axes.", node.name, len(offsets), len(axes))
        out = np.array(shape, dtype=np.int64)
        for a, off in zip(axes, offsets):
            if ref[a] + off > shape[a]:
                raise ShapeError("Crop '{}': size {} at offset {} exceeds axis {} of size {}.", node.name, ref[a],
                                 off, a, shape[a])
            out[a] = ref[a]
        node.axis = axes
        node.offset = offsets
        node.out_node(0).shape = out


class Permute(Op):
    op = "Permute"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Permute", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Permute")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        order = [int(o) for o in node.order]
        # Caffe fills the order up with the axes not named, in increasing order
        order += [a for a in range(len(shape)) if a not in order]
        if sorted(order) != list(range(len(shape))):
            raise ShapeError("Permute '{}': order {} is not a permutation of {} axes.", node.name, order, len(shape))
        node.order = order
        node.out_node(0).shape = np.array([shape[a] for a in order], dtype=np.int64)


class Tile(Op):
    op = "Tile"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Tile", "op": self.op, "axis": 1, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Tile")

    @staticmethod
    def infer(node):
        shape = np.array(node.in_node(0).shape, dtype=np.int64)
        axis = _axis(node, len(shape))
        node.axis = axis
        shape[axis] *= int(node.tiles)
        node.out_node(0).shape = shape


class Gather(Op):
    """The entries of a dictionary at the indices input 0 holds, along `axis`: the blob `weights` (a constant
    dictionary of dims `dims`, an embedding table: TensorFlow's GatherV2 of a constant by the model's data) or
    input 1 (a gather of the model's data at indices the data holds; no `dims`)."""
    op = "Gather"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Gather", "op": self.op, "axis": 0, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Gather")

    @staticmethod
    def infer(node):
        inputs = node.data_inputs()
        dims = inputs[1].shape if len(inputs) > 1 else node.dims
        shape = gather_shape(dims, int(node.axis), inputs[0].shape, int(node.soft_get("batch_dims") or 0))
        node.out_node(0).shape = np.array(shape, dtype=np.int64)

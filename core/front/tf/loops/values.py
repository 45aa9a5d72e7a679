"""What the loop unroller (core/front/tf/loops/unroll.py) knows of a tensor while it copies a loop's body: where
it is in the rewritten graph, its value where conversion time can compute it (counters, indices, sizes: small
integer and bool tensors, folded here), or the TensorList / TensorArray it stands for."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.front.tf.tensors import numpy_dtype

MAX_FOLD = 64            # elements of a value folded at conversion time
# ops that pass their (first) input on: Identity and the loop's own control flow
PASS_THROUGH = {"Identity", "Snapshot", "StopGradient", "Enter", "RefEnter", "Switch", "RefSwitch", "NextIteration",
                "RefNextIteration", "LoopCond", "Exit", "RefExit", "Merge", "RefMerge"}


class NotUnrolled(Exception):
    """This loop cannot be unrolled (the message says why)."""


@dataclass
class ListState:
    """A TensorList / TensorArray as the unroller follows it: items written at constant
    indices over a tensor it was made from (its rows), and its length where known."""
    dtype: int
    source: "Value | None" = None
    items: dict = field(default_factory=dict)
    size: int | None = None

    def set(self, index: int, value: "Value") -> "ListState":
        items = dict(self.items)
        items[index] = value
        return ListState(self.dtype, self.source, items, self.size)


@dataclass
class Value:
    """One tensor of the unrolled graph: where it is (`ref`), its value where known at
    conversion time (`const`), or the list it stands for (`items`)."""
    ref: str | None = None
    const: np.ndarray | None = None
    items: ListState | None = None
    name: str | None = None      # the Const node that holds `const` when nothing else does
    handle: bool = False         # a TensorArray handle: its state travels in the flow tensor
    all_rows: bool = False       # range(0, n) of an n not known here: a TensorArray's unstack / gather indices
    partial: bool = False        # `const` is a shape with unknown (-1) dimensions


_BINARY = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "Maximum": np.maximum,
           "Minimum": np.minimum, "FloorDiv": np.floor_divide, "FloorMod": np.mod, "Less": np.less,
           "LessEqual": np.less_equal, "Greater": np.greater, "GreaterEqual": np.greater_equal, "Equal": np.equal,
           "NotEqual": np.not_equal, "LogicalAnd": np.logical_and, "LogicalOr": np.logical_or}
FOLDED = set(_BINARY) | {"LogicalNot", "Range", "Max", "Min", "Sum", "Prod", "Cast", "Pack", "Size", "StridedSlice"}


def fold(op: str, node, values: list):
    """The op's value from constant inputs (op in FOLDED), or None where this module does not compute it."""
    a = values
    if op in _BINARY and len(a) == 2:
        out = _BINARY[op](a[0], a[1])
        return out.astype(a[0].dtype) if out.dtype != np.bool_ else out
    if op == "LogicalNot":
        return np.logical_not(a[0])
    if op == "Range":
        start, limit, delta = (v.reshape(-1)[0] if v.size == 1 else None for v in a)
        if start is None or limit is None or not delta or (limit - start) / delta > MAX_FOLD:
            return None  # (a range the model sizes: not computed here, whatever it asks for)
        return np.arange(start, limit, delta).astype(a[0].dtype)
    if op in ("Max", "Min", "Sum", "Prod"):
        axes = tuple(int(x) % max(a[0].ndim, 1) for x in a[1].reshape(-1)) if a[0].ndim else ()
        fn = {"Max": np.max, "Min": np.min, "Sum": np.sum, "Prod": np.prod}[op]
        keep = node.attr["keep_dims"].b if "keep_dims" in node.attr else False
        return np.asarray(fn(a[0], axis=axes, keepdims=keep) if axes else a[0]).astype(a[0].dtype)
    if op == "Cast":
        return a[0].astype(numpy_dtype(node.attr["DstT"].type, "node '{}'".format(node.name)))
    if op == "Pack":
        axis = node.attr["axis"].i if "axis" in node.attr else 0
        return np.stack(a, axis=axis)
    if op in ("Size",):
        return np.array(a[0].size, np.int32)
    if op == "StridedSlice":
        return _strided_slice(node, a)
    return None


def _strided_slice(node, a):
    """A 1-D StridedSlice (a dimension of a Shape), else None."""
    masks = {key: node.attr[key].i if key in node.attr else 0 for key in
             ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    if a[0].ndim != 1 or any(v.size != 1 for v in a[1:]) or masks["ellipsis_mask"] or masks["new_axis_mask"]:
        return None
    begin, end, stride = (int(v.reshape(-1)[0]) for v in a[1:])
    if masks["shrink_axis_mask"] & 1:
        return a[0][begin] if -a[0].size <= begin < a[0].size else None
    return a[0][None if masks["begin_mask"] & 1 else begin:None if masks["end_mask"] & 1 else end:stride]

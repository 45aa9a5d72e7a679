"""Ops that pass their input on: Identity (TF2 freezing leaves chains of them),
IdentityN, StopGradient, Snapshot, PlaceholderWithDefault (its default), Cast
between float types or of integers to a type that holds them (a float's to an integer
type drops its fraction: an Activation trunc; to bool: x != 0); Const; NoOp (only
control edges, which are dropped)."""
from __future__ import annotations

import numpy as np

from core.front.tf.ops.base import SameShapeOp, TFOp, expect_inputs
from core.front.tf.ops.elementwise import nonzero
from core.front.tf.tensors import attr, numpy_dtype
from core.graph.graph import carry_output
from core.ops.activation import Activation


def bypass(node, lw, port_map=None):
    """The consumers of output i read input port_map[i] instead; the node goes (at once, so a
    model output behind Identity nodes is known by the name of the op that computes it)."""
    graph = lw.graph
    ins = node.data_inputs()
    for port, out in list(node.out_nodes().items()):
        src = ins[port_map[port] if port_map else 0]
        for _, consumer, key, a in list(graph.out_edges(out.id, keys=True, data=True)):
            graph.add_edge(src.id, consumer, **a)
        carry_output(src, out)  # an output keeps being one: the tensor it passes on becomes the output
        graph.remove_node(out.id)
    graph.remove_node(node.id)


class PassThrough(SameShapeOp):
    tf_types = ("Identity", "StopGradient", "PreventGradient", "Snapshot", "PlaceholderWithDefault",
                "CheckNumerics", "EnsureShape")

    @staticmethod
    def evaluate(node, values):
        return [values[0]]

    @staticmethod
    def lower(node, lw):
        bypass(node, lw)


class IdentityN(TFOp):
    tf_types = ("IdentityN",)

    @staticmethod
    def evaluate(node, values):
        return values

    @staticmethod
    def shape(node, shapes):
        return shapes

    @staticmethod
    def lower(node, lw):
        bypass(node, lw, port_map={p: p for p in node.out_nodes()})


_FLOATS = (np.float16, np.float32, np.float64)
_INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)


def _holds(dst, src) -> bool:
    """Does integer (or bool) type `dst` hold every value of integer (or bool) type `src`?"""
    if src == np.bool_ and (dst == np.bool_ or dst in _INTS):
        return True
    if src not in _INTS or dst not in _INTS:
        return False
    return np.iinfo(dst).min <= np.iinfo(src).min and np.iinfo(src).max <= np.iinfo(dst).max


class Cast(SameShapeOp):
    tf_types = ("Cast",)

    @staticmethod
    def extract(node):
        node.tf["dst"] = numpy_dtype(attr(node, "DstT", "type"), "Node '{}' (Cast)".format(node.name))
        node.tf["src"] = numpy_dtype(attr(node, "SrcT", "type"), "Node '{}' (Cast)".format(node.name))

    @staticmethod
    def evaluate(node, values):
        return [values[0].astype(node.tf["dst"])]

    @staticmethod
    def lower(node, lw):
        # the IR computes in floating point: a cast between float types, or of integers (bools) to a type that
        # holds them, changes nothing; a float's to an integer type drops the fraction (an Activation trunc:
        # TensorFlow's value wherever the type holds it - past its range C++ leaves the result undefined, and
        # TensorFlow's differs between its kernels); anything to bool is x != 0
        src, dst = node.tf["src"], node.tf["dst"]
        x = node.data_inputs()[0]
        if dst in _FLOATS or (src not in _FLOATS and _holds(dst, src)):
            return PassThrough.lower(node, lw)
        if dst == np.bool_:
            return nonzero(node, lw, x)
        if src in _FLOATS and dst in _INTS:
            lw.keep_inputs(node, x)
            return lw.retype(node, Activation, {"activation": "trunc"})
        wraps = ", which wraps the values around" if src in _INTS and dst in _INTS else ""
        raise lw.unsupported(node, "a cast of the model's data from {} to {}{} (the IR computes in floating point; "
                                   "it casts to integer types that hold the values, a float's to any integer type "
                                   "and anything to bool)".format(np.dtype(src).name, np.dtype(dst).name, wraps))


class Const(TFOp):
    tf_types = ("Const",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 0)
        node.tf["value"] = attr(node, "value", "tensor")

    @staticmethod
    def infer(node):
        value = node.tf["value"]
        for out in node.out_nodes().values():
            out.value = value
            out.shape = np.array(value.shape, dtype=np.int64)


class NoOp(TFOp):
    tf_types = ("NoOp",)

    @staticmethod
    def infer(node):
        """No outputs."""

    @staticmethod
    def lower(node, lw):
        lw.graph.remove_node(node.id)

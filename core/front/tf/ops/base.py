"""TFOp: what the converter knows about one TensorFlow op type.

A subclass names the TF op types it handles (`tf_types`) and gives
- `extract(node)`: reads the NodeDef's attributes (typed, core/front/tf/tensors.py)
  into node attributes;
- `infer(node)`: TensorFlow's own semantics, in TensorFlow's layout (NHWC):
  output shapes, and output values when the inputs are constants, so shape
  arithmetic (Shape, Pack, StridedSlice...) and constant sub-graphs (the Keras
  batch norm's Rsqrt/Mul/Sub on its statistics) fold away;
- `lower(node, lw)`: turns the node into IR layers (NCHW) once every shape is
  known (core/front/tf/lowering.py, `lw` is its helper). A node whose outputs
  are all constants is never lowered: its values live on as blobs or attributes.
Defining a subclass registers it (TF_OPS). TensorFlow op names and IR op names
overlap (Reshape, Split, Identity), so these are not `Op`s: the graph nodes keep
`tf_class` until lowering retypes them into IR ops.
"""
from __future__ import annotations

import numpy as np

from core.errors import Error, ShapeError
from core.front.tf.tensors import describe

TF_OPS: dict[str, type["TFOp"]] = {}


class TFOp:
    tf_types: tuple[str, ...] = ()
    # True: the op is only ever computed at conversion time (its inputs must be constants)
    value_only = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for t in cls.__dict__.get("tf_types", ()):
            TF_OPS[t] = cls

    @staticmethod
    def extract(node):
        """Reads the NodeDef's attributes into node attributes."""

    @classmethod
    def infer(cls, node):
        values = input_values(node)
        if all(v is not None for v in values) and cls.has_evaluate():
            with np.errstate(all="ignore"):  # constants compute as TensorFlow would: inf/nan, no exception
                set_values(node, cls.evaluate(node, values))
            return
        if cls.value_only:
            fallback = node.graph.graph.get("shape_fallback")
            if node.graph.graph.get("offload_unsupported") and fallback is not None and fallback.handles(node):
                fallback.compute(node)  # TensorFlow knows its shape; lowering then offloads it (lower below)
                fallback.infer(node)
                return
            raise ShapeError("{} is computed at conversion time only, but input {} is not a constant here (it "
                             "depends on the model's input data). --offload_unsupported_operations_to_tf runs it in "
                             "TensorFlow.", describe(node), next(i for i, v in enumerate(values) if v is None),
                             faq=37)
        shapes = cls.shape(node, [d.shape for d in node.data_inputs()])
        for port, out in node.out_nodes().items():
            if port >= len(shapes):
                raise ShapeError("{} has no output {}.", describe(node), port)
            out.shape = np.array(shapes[port], dtype=np.int64)

    @classmethod
    def has_evaluate(cls) -> bool:
        return cls.evaluate is not TFOp.evaluate

    @staticmethod
    def evaluate(node, values: list[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    @staticmethod
    def shape(node, shapes: list[np.ndarray]) -> list:
        """Output shapes for non-constant inputs."""
        raise NotImplementedError

    @staticmethod
    def lower(node, lw):
        raise NotImplementedError


class SameShapeOp(TFOp):
    """An op whose output has the shape of its first input (element-wise ops, reversals, rolls)."""

    @staticmethod
    def shape(node, shapes):
        return [shapes[0]]


class ValueOnlyOp(TFOp):
    """An op computed at conversion time only (its result folds into a constant); on the
    model's data it cannot be lowered, so --offload_unsupported_operations_to_tf runs it
    in TensorFlow."""
    value_only = True

    @staticmethod
    def lower(node, lw):
        raise lw.unsupported(node, "it is computed at conversion time only and here it reads the model's data")


# --- helpers of the infer functions -------------------------------------------------
def input_values(node) -> list:
    return [d.soft_get("value") for d in node.data_inputs()]


def set_values(node, results):
    for port, out in node.out_nodes().items():
        if port >= len(results):
            raise ShapeError("{} has no output {}.", describe(node), port)
        value = np.asarray(results[port])
        if value.dtype == np.float64:
            value = value.astype(np.float32)
        out.value = value
        out.shape = np.array(value.shape, dtype=np.int64)


def expect_inputs(node, count: int | tuple[int, int]):
    lo, hi = (count, count) if isinstance(count, int) else count
    n = len(node.data_inputs())
    if not lo <= n <= hi:
        raise Error("{} has {} inputs; TensorFlow's op takes {}. The graph is malformed.", describe(node), n,
                    lo if lo == hi else "{} to {}".format(lo, hi), faq=43)


def const_input(node, port: int, what: str) -> np.ndarray:
    """The constant value of input `port`; an error naming the node when it is computed from the data."""
    data = node.in_node(port)
    value = data.soft_get("value")
    if value is None:
        raise ShapeError("{}: its {} (input {}) must be a constant, but it is computed from the model's input data. "
                         "Cut the model before this node or make the value constant.", describe(node), what, port,
                         faq=37)
    return np.asarray(value)


def normalize_axis(node, axis: int, rank: int) -> int:
    axis = int(axis)
    if not -rank <= axis < max(rank, 1):
        raise ShapeError("{}: axis {} is out of range for a {}-D input.", describe(node), axis, rank)
    return axis % rank if rank else 0


def broadcast_shapes(node, *shapes) -> np.ndarray:
    try:
        return np.array(np.broadcast_shapes(*(tuple(int(d) for d in s) for s in shapes)), dtype=np.int64)
    except ValueError:
        raise ShapeError("{}: input shapes {} cannot be broadcast together.", describe(node),
                         ", ".join(str(list(s)) for s in shapes)) from None

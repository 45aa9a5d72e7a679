"""Shape inference: each op's `infer` in topological order.

Shapes are int64 arrays (as the IR's dims): an element count or a dimension that
does not fit int64 is an error naming the layer, never a wrapped-around value
written into the IR.
"""
import math

import numpy as np

from core.errors import Error, ShapeError

MAX_ELEMENTS = 2**63 - 1


def element_count(shape) -> int:
    """Exact (Python int) number of elements of a shape."""
    return math.prod(int(d) for d in shape)


def infer_node(node):
    infer = node.soft_get("infer")
    if infer is None:
        raise Error("There is no registered 'infer' function for node '{}' with op = {}. Please implement this "
                    "function in the extensions.", node.name, node.soft_get("op"), faq=36)
    try:
        with np.errstate(over="raise"):  # an int64 overflow in a shape function raises instead of wrapping
            infer(node)
    except Error:
        raise
    except (OverflowError, FloatingPointError) as exc:
        raise ShapeError("The output shape of layer '{}' ({}) does not fit int64 ({}): the input shapes are too "
                         "large. Check --input_shape and the input dimensions of the model.", node.name,
                         node.soft_get("op"), exc) from None
    except Exception as exc:
        raise Error("Stopped shape/value propagation at node '{}' ({}): {}: {}", node.name, node.soft_get("op"),
                    type(exc).__name__, exc, faq=37) from exc
    for port, out in node.out_nodes().items():
        shape = out.soft_get("shape")
        if shape is None or np.any(np.asarray(shape) < 0):
            raise Error("Not all output shapes were inferred or fully defined for node '{}' (output port {}).",
                        node.name, port, faq=39)
        if element_count(shape) > MAX_ELEMENTS:
            raise ShapeError("The output of layer '{}' ({}) would have shape {}: {} elements, more than int64 can "
                             "count. Check --input_shape and the input dimensions of the model.", node.name,
                             node.soft_get("op"), [int(d) for d in shape], element_count(shape))
        out.shape = np.array(shape, dtype=np.int64)


def partial_infer(graph):
    for node in graph.topological_ops():
        infer_node(node)

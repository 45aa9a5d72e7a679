"""Shape inference: each op's `infer` in topological order."""
import numpy as np

from core.errors import Error


def infer_node(node):
    infer = node.soft_get("infer")
    if infer is None:
        raise Error("There is no registered 'infer' function for node '{}' with op = {}. Please implement this "
                    "function in the extensions.", node.name, node.soft_get("op"), faq=36)
    try:
        infer(node)
    except Error:
        raise
    except Exception as exc:
        raise Error("Stopped shape/value propagation at node '{}' ({}): {}: {}", node.name, node.soft_get("op"),
                    type(exc).__name__, exc, faq=37) from exc
    for port, out in node.out_nodes().items():
        shape = out.soft_get("shape")
        if shape is None or np.any(np.asarray(shape) < 0):
            raise Error("Not all output shapes were inferred or fully defined for node '{}' (output port {}).",
                        node.name, port, faq=39)
        out.shape = np.array(shape, dtype=np.int64)


def partial_infer(graph):
    for node in graph.topological_ops():
        infer_node(node)

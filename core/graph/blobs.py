"""Access to an op's constant blobs (data nodes on `bin` edges)."""
import numpy as np

from core.graph.graph import Node


def get_blob(node: Node, name: str):
    for bname, data, _ in node.blob_inputs():
        if bname == name:
            return data.value
    return None


def add_blob(node: Node, name: str, value):
    """A new constant input of `node` on its next free port, written to the .bin as `name`."""
    port = 1 + max([d.get("in", -1) for _, d in node.in_edges_data()] + [-1])
    const = node.graph.add_const("{}/{}".format(node.name, name), np.asarray(value, dtype=np.float32))
    node.graph.connect(const, node, inp=port, bin=name)


def set_blob(node: Node, name: str, value):
    """Replaces the value of blob `name`, or adds it."""
    value = np.asarray(value, dtype=np.float32)
    for bname, data, _ in node.blob_inputs():
        if bname == name:
            data.value = value
            data.shape = np.array(value.shape, dtype=np.int64)
            return
    add_blob(node, name, value)


def per_channel(value, channels: int) -> np.ndarray:
    value = np.asarray(value, dtype=np.float32).ravel()
    return np.full(channels, value[0], dtype=np.float32) if value.size == 1 else value

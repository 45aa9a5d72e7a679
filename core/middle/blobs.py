"""Access to an op's constant blobs (data nodes on `bin` edges)."""
import numpy as np

from core.graph.graph import Node


def get_blob(node: Node, name: str):
    for bname, data, _ in node.blob_inputs():
        if bname == name:
            return data.value
    return None


def set_blob(node: Node, name: str, value):
    value = np.asarray(value, dtype=np.float32)
    for bname, data, _ in node.blob_inputs():
        if bname == name:
            data.value = value
            data.shape = np.array(value.shape, dtype=np.int64)
            return
    graph = node.graph
    port = 1 + max([d.get("in", -1) for _, d in node.in_edges_data()] + [-1])
    const = graph.add_const("{}/{}".format(node.name, name), value)
    graph.connect(const, node, inp=port, bin=name)


def remove_blob(node: Node, name: str):
    for bname, data, _ in node.blob_inputs():
        if bname == name:
            node.graph.remove_node(data.id)


def per_channel(value, channels: int) -> np.ndarray:
    value = np.asarray(value, dtype=np.float32).ravel()
    return np.full(channels, value[0], dtype=np.float32) if value.size == 1 else value

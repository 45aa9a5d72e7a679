"""In-memory form of an IR v2 network: layers with ports and blobs, and edges.

This is exactly what the .xml/.bin pair holds, nothing more: attribute values are
kept as the strings that appear in the file (see `ir.attrs` to parse or format them)
so a read/write round trip is lossless and the IR package needs no knowledge of
individual layer types.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from .errors import IRError
from .order import stable_topological_order

# Layer precision -> dtype of its float blobs in the .bin. The reader uses it for
# the element size checks, the writer to convert float blobs.
PRECISION_DTYPES: dict[str, np.dtype] = {
    "FP32": np.dtype(np.float32),
    "FP16": np.dtype(np.float16),
}


def describe_layer(layer_id, name=None) -> str:
    """How messages name a layer: `layer 'conv1' (id=5)`."""
    if name is None:
        return f"layer id={layer_id}"
    return f"layer {name!r} (id={layer_id})"


@dataclass
class Port:
    id: int
    dims: tuple[int, ...]

    def __post_init__(self):
        # Accept any integer-like (numpy ints, lists of them) but never silently
        # truncate floats: operator.index raises TypeError for 2.5.
        self.id = operator.index(self.id)
        self.dims = tuple(operator.index(d) for d in self.dims)


# The <data> attribute in which a Caffe-backed layer carries its own Caffe definition
# (prototxt text without blobs; the CPU daemon runs it through its Caffe worker). It
# belongs to mo-core's daemons, not to the layer's parameters: emitters for other
# runtimes leave it out. A '-' in the name: never one of Caffe's parameter names.
CAFFE_DEFINITION_ATTR = "caffe-prototxt"


@dataclass(eq=False)
class Layer:
    id: int
    name: str
    type: str
    precision: str = "FP32"
    # <data .../> attributes, values already strings, order kept.
    data: dict[str, str] = field(default_factory=dict)
    inputs: list[Port] = field(default_factory=list)
    outputs: list[Port] = field(default_factory=list)
    # Order kept; written flattened in C order, so the shape is not part of the IR.
    blobs: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        self.id = operator.index(self.id)

    def port(self, port_id: int) -> Port | None:
        for p in self.inputs:
            if p.id == port_id:
                return p
        for p in self.outputs:
            if p.id == port_id:
                return p
        return None

    def __eq__(self, other):
        # Blobs compare by name, order, dtype and bytes, not by shape: the IR stores
        # them flattened, so a 4-D weights array and the 1-D array read back from the
        # .bin are the same blob. (The dataclass default would also fail on arrays.)
        if not isinstance(other, Layer):
            return NotImplemented
        if (self.id, self.name, self.type, self.precision) != (other.id, other.name, other.type, other.precision):
            return False
        if list(self.data.items()) != list(other.data.items()):
            return False
        if self.inputs != other.inputs or self.outputs != other.outputs:
            return False
        if list(self.blobs) != list(other.blobs):
            return False
        for key, a in self.blobs.items():
            a, b = np.asarray(a), np.asarray(other.blobs[key])
            if a.dtype != b.dtype or a.size != b.size:
                return False
            if np.ascontiguousarray(a).tobytes() != np.ascontiguousarray(b).tobytes():
                return False
        return True

    __hash__ = None  # mutable


@dataclass
class Edge:
    from_layer: int
    from_port: int
    to_layer: int
    to_port: int

    def __post_init__(self):
        for name in ("from_layer", "from_port", "to_layer", "to_port"):
            setattr(self, name, operator.index(getattr(self, name)))


@dataclass
class Network:
    name: str
    layers: list[Layer]
    edges: list[Edge]
    batch: int = 1
    version: int = 2
    # Optional <meta_data><param key value/>...: e.g. the converter's command line.
    meta: dict[str, str] = field(default_factory=dict)
    # (layer id, output port id) of model outputs that layers also read (<results>): IR v2
    # lists as outputs the tensors nothing reads, so these must be said
    results: list[tuple[int, int]] = field(default_factory=list)
    # (layer id, output port id) of the outputs in the model's order (the converter's, in memory only:
    # IR v11's Results follow it; outputs() keeps file order)
    output_order: list[tuple[int, int]] = field(default_factory=list, compare=False)
    # names of the Input layers in the order --input gave them (IR v11's Parameters follow it)
    input_order: list[str] = field(default_factory=list, compare=False)
    # (layer id, output port id) -> the framework's names of that output ("node:port"), which IR v11 adds
    output_names: dict = field(default_factory=dict, compare=False)

    def layer_by_id(self, layer_id: int) -> Layer:
        for layer in self.layers:
            if layer.id == layer_id:
                return layer
        raise KeyError(f"no layer with id {layer_id} in network {self.name!r}")

    def layer_by_name(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer named {name!r} in network {self.name!r}")

    def inputs(self) -> list[Layer]:
        """The Input layers, in file order."""
        return [layer for layer in self.layers if layer.type == "Input"]

    def outputs(self) -> list[tuple[Layer, Port]]:
        """(layer, output port) pairs of the network's results, in file order: each
        output port nothing consumes, and those `results` declares."""
        consumed = {(e.from_layer, e.from_port) for e in self.edges}
        declared = {(int(layer), int(port)) for layer, port in self.results}
        return [(layer, port) for layer in self.layers for port in layer.outputs
                if (layer.id, port.id) not in consumed or (layer.id, port.id) in declared]

    def topological_order(self) -> list[Layer]:
        """Layers so that every producer comes before its consumers.

        Ties keep the file order, so an already ordered network comes back unchanged.
        Raises IRError naming the layers of a cycle.
        """
        index = {layer.id: i for i, layer in enumerate(self.layers)}
        succ: list[list[int]] = [[] for _ in self.layers]
        pred: dict[int, list[int]] = {i: [] for i in range(len(self.layers))}
        for e in self.edges:
            if e.from_layer not in index or e.to_layer not in index:
                raise IRError(f"edge {e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port} "
                              "refers to a layer that does not exist")
            a, b = index[e.from_layer], index[e.to_layer]
            succ[a].append(b)
            pred[b].append(a)
        order, indegree = stable_topological_order(succ)
        if len(order) == len(self.layers):
            return [self.layers[i] for i in order]
        raise IRError(f"the network has a cycle through {_cycle_text(self.layers, pred, indegree)}. "
                      "IR networks must be acyclic; fix the edges")


def _cycle_text(layers, pred, indegree) -> str:
    # Every layer left with indegree > 0 has a predecessor also left over, so walking
    # predecessors from any of them must come back to a layer already seen: a cycle.
    left = {i for i, d in enumerate(indegree) if d > 0}
    start = min(left)
    path, seen = [start], {start: 0}
    while True:
        nxt = next(p for p in pred[path[-1]] if p in left)
        if nxt in seen:
            cycle = path[seen[nxt]:] + [nxt]
            break
        seen[nxt] = len(path)
        path.append(nxt)
    cycle.reverse()  # walked backwards; report in data-flow direction
    return " -> ".join(describe_layer(layers[i].id, layers[i].name) for i in cycle)

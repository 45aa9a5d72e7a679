"""Strides pulled up the graph: a tensor that only 1x1 convolutions of stride S read
(pad 0) is only read at every S-th row and column, so whatever computes it may skip
the rest. ResNet's stage transitions are this: the block's output (a ReLU of an
Eltwise sum of two branches) is read by two 1x1 stride-2 convolutions, so the
branch's last 1x1 and 3x3 convolutions can run at stride 2 - a quarter of their
work - and the shortcut is subsampled by a 1x1 max pooling (OpenVINO's CPU plugin
does the same: its StridesOptimization). Exact: the same sums of the same values.

    graph = pull_strides(network, keep={"layer name", ...}, skip_types={...})

Rules, from each such tensor X (its readers then run at stride 1):
- X made by a Convolution: that convolution's stride is multiplied by S (output j
  of the new one is output S*j of the old one, whatever its kernel and padding) -
  unless it is itself 1x1, unpadded, of stride 1 and alone to read a tensor that can
  be pulled: then it runs on that tensor subsampled (it reads each position alone);
- X made by a per-element layer (ReLU, Clamp, Activation, Power, PReLU, ScaleShift,
  BatchNormalization, or an Eltwise whose inputs all have its shape): the layer runs
  on the subsampled tensor and each of its inputs is pulled the same way when only
  this layer reads it, else it gets a 1x1 stride-S max pooling ("subsampling");
- anything else, a tensor also read elsewhere, a network output (or one of `keep`),
  or a layer of `skip_types` (custom kernels): nothing changes there.
A pull is made only where it reaches a convolution (work saved, not only moved).
The network returned shares the unchanged layers; the rewritten ones are copies
with their new stride and port dims, so the plan's own shape check agrees."""
from __future__ import annotations

import copy

from ir import Edge, Layer, Network, Port
from ir.schema import layer_schema

PER_ELEMENT = frozenset({"ReLU", "Clamp", "Activation", "Power", "PReLU", "ScaleShift", "BatchNormalization"})


def _attrs(layer: Layer) -> dict:
    schema = layer_schema(layer.type)
    return schema.read(layer) if schema is not None else {}


def _shrunk(dims: tuple, stride: tuple[int, int]) -> tuple:
    n, c, h, w = dims
    return (n, c, (h - 1) // stride[0] + 1, (w - 1) // stride[1] + 1)


class _Pull:
    """What one pull changes: convolutions' new strides, per-element layers that run
    subsampled, input edges that get a subsampling pooling, the readers set to stride 1."""

    def __init__(self, stride):
        self.stride = stride
        self.strided: dict[int, tuple[int, int]] = {}  # convolution id -> its new stride
        self.subsampled: set[int] = set()  # per-element layers that run on the subsampled tensors
        self.taps: list[Edge] = []  # edges that get a subsampling pooling
        self.readers: list[int] = []


class _Graph:
    def __init__(self, network: Network, keep, skip_types):
        self.layers = {layer.id: layer for layer in network.layers}
        self.readers: dict[tuple[int, int], list[Edge]] = {}
        self.into: dict[int, list[Edge]] = {}
        for e in network.edges:
            self.readers.setdefault((e.from_layer, e.from_port), []).append(e)
            self.into.setdefault(e.to_layer, []).append(e)
        self.protected = {(layer.id, port.id) for layer, port in network.outputs()}
        for layer in network.layers:
            if layer.name in keep:
                self.protected.update((layer.id, port.id) for port in layer.outputs)
        self.skip_types = frozenset(skip_types)
        self.taken: set[int] = set()  # layers some pull already changes
        self._attrs: dict[int, dict | None] = {}

    def attrs(self, layer: Layer) -> dict | None:
        """Its typed attributes (read once), None for a malformed layer (its kernel reports it)."""
        if layer.id not in self._attrs:
            try:
                self._attrs[layer.id] = _attrs(layer)
            except Exception:  # noqa: BLE001 - nothing to pull there
                self._attrs[layer.id] = None
        return self._attrs[layer.id]

    def strided_1x1(self, layer: Layer) -> tuple[int, int] | None:
        """The stride of a 1x1, unpadded Convolution with a stride above 1, else None."""
        if layer.type != "Convolution" or layer.type in self.skip_types:
            return None
        a = self.attrs(layer)
        if a is None or a["kernel"] != (1, 1) or a["pad"] != (0, 0) or a["pad_end"] != (0, 0) \
                or a["stride"] == (1, 1):
            return None
        return tuple(a["stride"])

    def only_reader(self, tensor, layer_id) -> bool:
        edges = self.readers.get(tensor, [])
        return tensor not in self.protected and len(edges) == 1 and edges[0].to_layer == layer_id

    def rank4(self, layer: Layer) -> bool:
        return all(len(p.dims) == 4 for p in layer.inputs + layer.outputs)

    def follows(self, e: Edge) -> bool:
        """Can the pull go on up this input edge (its tensor read by this layer alone)?"""
        return self.only_reader((e.from_layer, e.from_port), e.to_layer) and self.pullable(self.layers[e.from_layer])

    def pullable(self, layer: Layer) -> bool:
        """Can `layer` give its output subsampled (a convolution or a per-element layer)?"""
        if layer.id in self.taken or len(layer.outputs) != 1 or layer.type in self.skip_types \
                or not self.rank4(layer):
            return False
        return layer.type in ("Convolution", *PER_ELEMENT) or (
            layer.type == "Eltwise" and all(p.dims == layer.outputs[0].dims for p in layer.inputs))

    def pull(self, tensor, stride) -> _Pull | None:
        """The changes that make `tensor` come subsampled by `stride` (None: none save work)."""
        plan = _Pull(stride)
        if not self.pullable(self.layers[tensor[0]]):
            return None
        stack = [tensor[0]]
        while stack:
            layer = self.layers[stack.pop()]
            inputs = self.into.get(layer.id, [])
            if layer.type == "Convolution":
                a = self.attrs(layer)
                if a is None:
                    return None
                if not (a["kernel"] == (1, 1) and a["pad"] == a["pad_end"] == (0, 0) and a["stride"] == (1, 1)
                        and len(inputs) == 1 and self.follows(inputs[0])):
                    plan.strided[layer.id] = tuple(s * k for s, k in zip(a["stride"], stride))
                    continue
                # a 1x1 convolution reads each position alone: it runs at stride 1 on its input subsampled
            plan.subsampled.add(layer.id)
            for e in inputs:
                if self.follows(e):
                    stack.append(e.from_layer)
                else:
                    plan.taps.append(e)
        return plan if plan.strided else None


def pull_strides(network: Network, keep=(), skip_types=()) -> Network:
    """`network` with the strides of 1x1 convolutions pulled up (module doc); the same
    object when nothing applies."""
    g = _Graph(network, set(keep), skip_types)
    pulls: list[_Pull] = []
    for layer in network.layers:  # (any order: each pull checks what earlier ones took)
        stride = g.strided_1x1(layer)
        if stride is None or layer.id in g.taken:
            continue
        edges = g.into.get(layer.id, [])
        if len(edges) != 1:
            continue
        tensor = (edges[0].from_layer, edges[0].from_port)
        readers = g.readers.get(tensor, [])
        if tensor in g.protected or any(g.strided_1x1(g.layers[e.to_layer]) != stride or e.to_layer in g.taken
                                        for e in readers):
            continue
        plan = g.pull(tensor, stride)
        if plan is None:
            continue
        plan.readers = [e.to_layer for e in readers]
        g.taken.update(plan.strided, plan.subsampled, plan.readers)
        pulls.append(plan)
    return _rewrite(network, pulls) if pulls else network


def _with(layer: Layer, stride=None, shrink=None, inputs_shrink=None) -> Layer:
    """A copy of `layer` with a new stride and/or its output / input dims subsampled."""
    out = copy.copy(layer)
    if stride is not None:
        schema = layer_schema(layer.type)
        values = schema.read(layer)
        values["stride"] = tuple(stride)
        data = {k: v for k, v in layer.data.items() if k not in ("stride", "strides", "stride-x", "stride-y")}
        data.update((k, v) for k, v in schema.write(values).items() if k.startswith("stride"))
        out.data = data
    if shrink is not None:
        out.outputs = [Port(p.id, _shrunk(p.dims, shrink)) for p in layer.outputs]
    if inputs_shrink is not None:
        out.inputs = [Port(p.id, _shrunk(p.dims, inputs_shrink)) for p in layer.inputs]
    return out


def _rewrite(network: Network, pulls: list[_Pull]) -> Network:
    layers = {layer.id: layer for layer in network.layers}
    new = dict(layers)
    for plan in pulls:
        s = plan.stride
        for lid, stride in plan.strided.items():
            new[lid] = _with(layers[lid], stride=stride, shrink=s)
        for lid in plan.subsampled:
            new[lid] = _with(layers[lid], shrink=s, inputs_shrink=s)
        for lid in plan.readers:
            new[lid] = _with(layers[lid], stride=(1, 1), inputs_shrink=s)
    edges = list(network.edges)
    next_id = max(layers) + 1
    names = {layer.name for layer in network.layers}
    pooling = layer_schema("Pooling")
    after: dict[int, list[int]] = {}  # layer id -> the subsamplings of its output, listed right after it
    for plan in pulls:
        for e in plan.taps:
            src = layers[e.from_layer]
            dims = next(p.dims for p in src.outputs if p.id == e.from_port)
            name = f"{layers[e.to_layer].name}/subsample{e.to_port}"
            while name in names:
                name += "_"
            names.add(name)
            data = pooling.write({"kernel": (1, 1), "pad": (0, 0), "pad_end": (0, 0), "stride": plan.stride,
                                  "pool-method": "max", "rounding_type": "floor"})
            new[next_id] = Layer(next_id, name, "Pooling", src.precision, data, inputs=[Port(0, dims)],
                                 outputs=[Port(1, _shrunk(dims, plan.stride))])
            edges.remove(e)
            edges += [Edge(e.from_layer, e.from_port, next_id, 0), Edge(next_id, 1, e.to_layer, e.to_port)]
            after.setdefault(e.from_layer, []).append(next_id)
            next_id += 1
    out = copy.copy(network)
    # a subsampling runs as soon as its input is made (the plan keeps the list's order where it may): a
    # shortcut subsampled before the branch's last convolution runs is a tensor that convolution can add
    # its result into (a sum post-op), where one made after it costs an Eltwise and a ReLU of their own
    out.layers = [new[i] for lid in layers for i in (lid, *after.get(lid, ()))]
    out.edges = edges
    return out

"""HETERO: a network split into sub-networks, one device each.

    affinity = assign_affinity(network, ["GPU", "CPU"], {"GPU": gpu_supported, "CPU": cpu_supported},
                               overrides={"mvn1": "CPU"})
    split = split_network(network, affinity)
    for part in split.parts:        # in an order where every part's inputs are ready
        part.device, part.network, part.inputs, part.outputs

Affinity (as the Inference Engine's HETERO plugin): each layer goes to the first
device of the priority list that supports it (each device's query_network); a
per-layer override wins when that device supports the layer. Input layers follow
their first consumer.

Splitting: layers are ordered topologically, preferring, among the layers that
are ready, one of the device just used (so that parallel branches do not zigzag
between devices), and cut into maximal runs of one device. Every tensor that
crosses a cut is an output of the producing part (returned under the key the
plan gives it) and an Input layer of each consuming part, named after that key.
The parts therefore form a chain in which each only reads tensors of earlier
parts or of the network's inputs.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ir import Edge, IRError, Layer, Network, Port

from ...plan_io import output_ports


class HeteroError(IRError):
    """A network HETERO cannot place (a layer no device supports, a bad override)."""


def parse_hetero(device: str) -> list[str]:
    """"HETERO:GPU,CPU" -> ["GPU", "CPU"]."""
    head, _, tail = device.partition(":")
    devices = [d.strip().upper() for d in tail.split(",") if d.strip()]
    if head.strip().upper() != "HETERO" or not devices:
        raise HeteroError(f"device {device!r} is not HETERO:DEVICE[,DEVICE...] (e.g. HETERO:GPU,CPU)")
    if len(set(devices)) != len(devices):
        raise HeteroError(f"device {device!r} names a device twice")
    return devices


def assign_affinity(network, devices: list[str], supported: dict[str, set], overrides: dict | None = None) \
        -> dict[str, str]:
    """{layer name: device}; see the module doc."""
    overrides = dict(overrides or {})
    names = {layer.name for layer in network.layers}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise HeteroError(f"affinity given for {', '.join(map(repr, unknown))}, which the network does not have")
    affinity: dict[str, str] = {}
    missing = []
    for layer in network.layers:
        if layer.type == "Input":
            continue
        wanted = overrides.get(layer.name)
        if wanted is not None:
            wanted = wanted.strip().upper()
            if wanted not in devices:
                raise HeteroError(f"layer {layer.name!r} has affinity {wanted}, which is not one of the HETERO "
                                  f"devices {', '.join(devices)}")
            if layer.name not in supported.get(wanted, ()):
                raise HeteroError(f"layer {layer.name!r} (type {layer.type}) has affinity {wanted}, but the {wanted} "
                                  "plugin does not support it")
            affinity[layer.name] = wanted
            continue
        for device in devices:
            if layer.name in supported.get(device, ()):
                affinity[layer.name] = device
                break
        else:
            missing.append(layer)
    if missing:
        text = ", ".join(f"{layer.name!r} ({layer.type})" for layer in missing[:10])
        raise HeteroError(f"no device of HETERO:{','.join(devices)} supports the layer(s) {text}; add a device that "
                          "does, or register a custom layer for them")
    consumers: dict[int, list[int]] = {}
    for e in network.edges:
        consumers.setdefault(e.from_layer, []).append(e.to_layer)
    by_id = {layer.id: layer for layer in network.layers}
    order = {layer.id: i for i, layer in enumerate(network.topological_order())}
    for layer in network.layers:
        if layer.type == "Input":
            users = sorted(consumers.get(layer.id, []), key=order.get)
            affinity[layer.name] = affinity[by_id[users[0]].name] if users else devices[0]
    return affinity


@dataclass
class Part:
    device: str
    network: Network
    inputs: dict = field(default_factory=dict)    # its Input name -> ("input", name) | ("part", index, key)
    outputs: list = field(default_factory=list)   # layer names returned (extra_outputs of its plan)
    layers: list = field(default_factory=list)    # names of the original layers it runs


@dataclass
class Split:
    parts: list
    results: dict        # the network's output key -> (part index, key in that part's results)

    def describe(self) -> list[str]:
        """One line per part: device, layer count, first..last layer."""
        lines = []
        for i, part in enumerate(self.parts):
            span = "" if not part.layers else part.layers[0] if len(part.layers) == 1 else \
                f"{part.layers[0]} .. {part.layers[-1]}"
            lines.append(f"part {i + 1}: {part.device}, {len(part.layers)} layer(s): {span}")
        return lines


def _device_order(network, affinity) -> list:
    """Topological order that stays on one device while it can."""
    layers = network.layers
    index = {layer.id: i for i, layer in enumerate(layers)}
    succ: dict[int, list[int]] = {i: [] for i in range(len(layers))}
    indegree = [0] * len(layers)
    for e in network.edges:
        succ[index[e.from_layer]].append(index[e.to_layer])
        indegree[index[e.to_layer]] += 1
    network.topological_order()  # raises on a cycle
    ready = [i for i, d in enumerate(indegree) if d == 0]
    order, current = [], None
    while ready:
        same = [i for i in ready if affinity[layers[i].name] == current]
        pick = min(same) if same else min(ready)
        ready.remove(pick)
        order.append(layers[pick])
        current = affinity[layers[pick].name]
        for j in succ[pick]:
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    return order


def split_network(network, affinity: dict[str, str], extra_outputs=()) -> Split:
    """The sub-networks of `network` for `affinity` ({layer name: device})."""
    order = _device_order(network, affinity)
    runs: list[list] = []
    for layer in order:
        device = affinity[layer.name]
        if runs and affinity[runs[-1][0].name] == device:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    # a run of network inputs alone computes nothing: each consuming part has its own Input for them
    runs = [run for run in runs if any(layer.type != "Input" for layer in run)]
    part_of = {layer.id: p for p, run in enumerate(runs) for layer in run}
    for layer in network.layers:
        part_of.setdefault(layer.id, -1)
    producer = {(e.to_layer, e.to_port): (e.from_layer, e.from_port) for e in network.edges}
    by_id = {layer.id: layer for layer in network.layers}
    # tensors a later part reads (network inputs aside): their layer is an extra output of its part
    crossing: dict[int, set] = {p: set() for p in range(len(runs))}
    for e in network.edges:
        if part_of[e.from_layer] != part_of[e.to_layer] and by_id[e.from_layer].type != "Input":
            crossing[part_of[e.from_layer]].add(by_id[e.from_layer].name)
    # (a declared result - a model output other layers read - is returned by its part like an extra output)
    wanted = set(extra_outputs or ()) | {by_id[layer_id].name for layer_id, _ in network.results}
    parts: list[Part] = []
    keys: list[dict] = []   # per part: (layer id, port id) -> key of its results
    next_id = max((layer.id for layer in network.layers), default=-1) + 1
    for p, run in enumerate(runs):
        ids = {layer.id for layer in run}
        layers = [copy.copy(layer) for layer in run]
        edges = [e for e in network.edges if e.to_layer in ids and e.from_layer in ids]
        inputs = {layer.name: ("input", layer.name) for layer in run if layer.type == "Input"}
        boundary: dict[tuple, int] = {}   # (producer id, port) -> id of this part's Input layer for it
        for layer in run:
            for port in layer.inputs:
                src = producer.get((layer.id, port.id))
                if src is None or src[0] in ids:
                    continue
                if src not in boundary:
                    source = by_id[src[0]]
                    if source.type == "Input":   # a network input read by several parts: each has it
                        name, inputs[source.name] = source.name, ("input", source.name)
                    else:
                        name = keys[part_of[src[0]]][src]
                        inputs[name] = ("part", part_of[src[0]], name)
                    layers.append(Layer(next_id, name, "Input", precision=source.precision,
                                        outputs=[Port(0, tuple(source.port(src[1]).dims))]))
                    boundary[src] = next_id
                    next_id += 1
                edges.append(Edge(boundary[src], 0, layer.id, port.id))
        returned = sorted(crossing[p] | {layer.name for layer in run if layer.name in wanted})
        sub = Network(f"{network.name}.{p + 1}.{affinity[run[0].name]}", layers, edges, batch=network.batch,
                      meta=dict(network.meta))
        keys.append({(layer.id, port.id): key for key, layer, port in output_ports(sub, returned)})
        parts.append(Part(affinity[run[0].name], sub, inputs, returned,
                          [layer.name for layer in run if layer.type != "Input"]))
    results = {}
    for key, layer, port in output_ports(network, extra_outputs):
        p = part_of[layer.id]
        if p < 0:
            raise HeteroError(f"the network returns its input {layer.name!r} unchanged; HETERO needs every output "
                              "to be computed by a layer")
        results[key] = (p, keys[p][(layer.id, port.id)])
    return Split(parts, results)


def run_split(split: Split, inputs: dict, run_part) -> dict:
    """Runs the parts in order: run_part(index, part, feed) -> {key: array}; returns
    the network's outputs. Used by the in-process tests and by the HETERO client."""
    produced: list[dict] = []
    for i, part in enumerate(split.parts):
        feed = {}
        for name, source in part.inputs.items():
            feed[name] = inputs[source[1]] if source[0] == "input" else produced[source[1]][source[2]]
        produced.append(run_part(i, part, feed))
    return {key: produced[p][k] for key, (p, k) in split.results.items()}

"""What every device's execution plan does the same way: the order layers run in,
which (layer, port) outputs a plan returns and under which keys, and the checks
of the inputs given to infer() and reshape(). Used by the GPU plan
(device_daemons/gpu/plan.py); the behaviour is the CPU plan's, so both devices
answer the same call the same way.
"""
from __future__ import annotations

import math

import numpy as np

from ir import IRError


def describe(layer) -> str:
    return f"layer {layer.name!r} (type {layer.type}, id={layer.id})"


class KernelError(IRError):
    """A layer a device's plan cannot run: bad or missing attributes or blobs, wrong
    input shapes, unsupported variants. The message names the layer and its type.
    (The GPU plan raises it too: the daemons report it as the error kind "kernel".)"""

    def __init__(self, layer, message: str, **kwargs):
        if layer is not None:
            message = f"{describe(layer)}: {message}"
        super().__init__(message, **kwargs)
        self.layer_name = getattr(layer, "name", None)
        self.layer_type = getattr(layer, "type", None)


def frees(reads: list, keep: set) -> list[tuple]:
    """For each step (`reads`: the slots each step reads, in run order), the slots whose
    last reader it is, so that the run may drop them after it; none of `keep` (outputs)."""
    last = {}
    for i, slots in enumerate(reads):
        for s in slots:
            last[s] = i
    out: list[list] = [[] for _ in reads]
    for s, i in last.items():
        if s not in keep:
            out[i].append(s)
    return [tuple(slots) for slots in out]


def execution_order(network) -> list:
    """Topological order with the sources (Input layers, reading Memory layers)
    first, so that a state is read before it is written in a call."""
    order = network.topological_order()
    return [layer for layer in order if not layer.inputs] + [layer for layer in order if layer.inputs]


def output_ports(network, extra_outputs=()) -> list[tuple[str, object, object]]:
    """[(key, layer, port)] the plan returns: every unconsumed output port, plus every
    output of the layers named in `extra_outputs`. The key is the layer name, or
    "name.port" for a layer with several returned outputs; a key another output has
    already gets "_1" (then "_2", ...) added."""
    per_layer: dict[int, list] = {}
    for layer, port in network.outputs():
        per_layer.setdefault(layer.id, []).append((layer, port))
    for name in extra_outputs or ():
        try:
            layer = network.layer_by_name(name)
        except KeyError:
            raise IRError(f"extra output {name!r}: the network has no layer of that name") from None
        if not layer.outputs:
            raise IRError(f"extra output {name!r}: the layer has no output port to return")
        per_layer[layer.id] = [(layer, port) for port in layer.outputs]
    result, taken = [], set()
    for items in per_layer.values():
        for layer, port in items:
            key = base = layer.name if len(items) == 1 else f"{layer.name}.{port.id}"
            n = 1
            while key in taken:  # (a layer may be named "x.1" like another's port: "x.1_1", as OpenVINO does)
                key, n = f"{base}_{n}", n + 1
            taken.add(key)
            result.append((key, layer, port))
    return result


class PlanShapes:
    """The names and current shapes of a plan's inputs and outputs, from its
    `_input_slots` ({input name: slot}), `_outputs` ([(key, slot)]) and `shapes`
    (per slot)."""

    @property
    def input_names(self) -> list[str]:
        return list(self._input_slots)

    @property
    def output_names(self) -> list[str]:
        return [k for k, _ in self._outputs]

    def input_shapes(self) -> dict[str, tuple]:
        return {name: self.shapes[s] for name, s in self._input_slots.items()}

    def output_shapes(self) -> dict[str, tuple]:
        return {name: self.shapes[s] for name, s in self._outputs}


def _names(names) -> str:
    return ", ".join(map(repr, names)) or "none"


MAX_ELEMENTS = 1 << 31  # of one tensor (contract.MAX_TENSOR_ELEMENTS: what the daemons accept at all)


def check_computed_shape(layer, shape, limit: int = MAX_ELEMENTS) -> tuple:
    """`shape`, a layer's computed output shape, when it has at most MAX_ELEMENTS values: the IR's
    declared shapes are checked when it is read, the ones its attributes make only here (a Tile
    or a Pad of huge counts would allocate terabytes at the first request)."""
    n = math.prod(int(d) for d in shape)
    if n > limit:
        raise KernelError(layer, f"computes an output shape {list(shape)}: {n} values, more than the limit of {limit} "
                                 f"for one tensor on this device; check its attributes and the input shapes")
    return tuple(shape)


def check_reshape(input_shapes: dict, current: dict[str, tuple]) -> dict[str, tuple]:
    """New {input name: shape} from `current` updated with the validated `input_shapes`."""
    unknown = set(input_shapes) - set(current)
    if unknown:
        raise IRError(f"reshape: no input named {', '.join(sorted(map(repr, unknown)))}; the network's inputs "
                      f"are {_names(current)}")
    result = dict(current)
    for name, shape in input_shapes.items():
        try:
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise IRError(f"reshape: the shape of input {name!r} must be a sequence of integers, got "
                          f"{shape!r}") from None
        if any(d <= 0 for d in shape):
            raise IRError(f"reshape: input {name!r} shape {list(shape)} has a non-positive dimension")
        if math.prod(shape) > MAX_ELEMENTS:
            raise IRError(f"reshape: input {name!r} shape {list(shape)} has {math.prod(shape)} values, more than the "
                          f"daemons' limit of {MAX_ELEMENTS} for one tensor")
        result[name] = shape
    return result


def check_inputs(inputs, expected: dict[str, tuple]) -> dict[str, np.ndarray]:
    """{name: float32 array} for infer(), checked by name, shape and dtype against
    `expected` ({input name: shape})."""
    if not isinstance(inputs, dict):
        raise IRError("infer takes a dict {input layer name: array}")
    unknown = set(inputs) - set(expected)
    missing = set(expected) - set(inputs)
    if unknown or missing:
        parts = []
        if unknown:
            parts.append(f"no input named {', '.join(sorted(map(repr, unknown)))}")
        if missing:
            parts.append(f"missing {', '.join(sorted(map(repr, missing)))}")
        raise IRError(f"infer: {'; '.join(parts)}. The network's inputs are {_names(expected)}")
    values = {}
    for name, shape in expected.items():
        value = inputs[name]
        if not isinstance(value, np.ndarray):
            try:
                value = np.asarray(value)
            except Exception:
                raise IRError(f"infer: input {name!r} is not an array") from None
        if value.dtype.kind not in "fiu":
            raise IRError(f"infer: input {name!r} has dtype {value.dtype}; give float32 (or another float or "
                          "integer type, converted to float32)")
        if value.shape != tuple(shape):
            raise IRError(f"infer: input {name!r} has shape {list(value.shape)} but the plan expects "
                          f"{list(shape)}; call reshape({{{name!r}: {tuple(value.shape)}}}) first to run "
                          "another batch or size")
        values[name] = value if value.dtype == np.float32 else value.astype(np.float32)
    return values

"""ir.Network (IR v2) -> Model (IR v11): every layer through its mapper.

Input layers become Parameters, every output nothing consumes gets a Result. A
layer's output tensors are named like the CPU daemon names outputs: the layer
name, or `<layer>.<port id>` for a layer with several outputs. Layers that have
no opset equivalent are collected over the whole network and reported at once.
"""
from __future__ import annotations

from ..errors import IRError
from ..model import Network, describe_layer
from .extension_ops import ExtensionOp, map_extension_layer
from .layer_attrs import LayerAttrs
from .layers import MAPPERS, Mapping, Unmappable
from .model import Model, Op, Tensor


def _placeholders(layer) -> list[Tensor]:
    """Stand-ins for the outputs of a layer that could not be mapped, so that the
    rest of the network is still checked (they never reach a written model)."""
    op = Op("Unmapped", "none", layer.name, {}, [])
    return [Tensor(op, i, "f32", tuple(p.dims)) for i, p in enumerate(layer.outputs)]


def _unmappable_error(problems: list[tuple]) -> IRError:
    types = sorted({t for _, t, _ in problems})
    listing = "; ".join(f"{name!r} ({type_}{': ' + reason if reason else ''})" for name, type_, reason in problems)
    hint = ",".join(types)
    return IRError(
        f"IR version 11 cannot express {len(problems)} layer(s): {listing}. OpenVINO's opsets have no operation "
        f"for them. Write IR version 2 instead (without --ir_version 11), or, if you load an OpenVINO extension "
        f"that implements them, name its operations with --ov_extension_ops {hint} (TYPE[=OP_TYPE][@VERSION], "
        "see the README's IR v11 section)")


def to_model(net: Network, extension_ops: dict[str, ExtensionOp] | None = None) -> Model:
    extension_ops = extension_ops or {}
    model = Model(net.name)
    producer = {(e.to_layer, e.to_port): (e.from_layer, e.from_port) for e in net.edges}
    tensors: dict[tuple[int, int], Tensor] = {}
    problems: list[tuple[str, str, str]] = []
    place = {name: i for i, name in enumerate(net.input_order)}
    for layer in sorted((layer for layer in net.layers if layer.type == "Input"),
                        key=lambda layer: place.get(layer.name, len(place))):  # (--input's order, else the file's)
        if len(layer.outputs) != 1:
            raise IRError(f"{describe_layer(layer.id, layer.name)}: an Input layer has exactly one output port")
        tensor = tensors[(layer.id, layer.outputs[0].id)] = model.parameter(layer.name, layer.outputs[0].dims)
        tensor.names.append(layer.name)
    for layer in net.topological_order():
        inputs = []
        for port in layer.inputs:
            source = producer.get((layer.id, port.id))
            if source is None or source not in tensors:
                raise IRError(f"{describe_layer(layer.id, layer.name)}: input port {port.id} is not connected")
            inputs.append(tensors[source])
        if layer.type == "Input":
            continue  # (made above)
        if layer.type in extension_ops:
            outputs = map_extension_layer(Mapping(model, layer, LayerAttrs(layer), inputs), extension_ops[layer.type])
        elif layer.type not in MAPPERS:
            problems.append((layer.name, layer.type, ""))
            outputs = _placeholders(layer)
        else:
            try:
                outputs = MAPPERS[layer.type](Mapping(model, layer, LayerAttrs(layer), inputs))
            except Unmappable as err:
                problems.append((layer.name, layer.type, err.reason))
                outputs = _placeholders(layer)
        _check_outputs(layer, outputs)
        several = len(layer.outputs) > 1
        for port, tensor in zip(layer.outputs, outputs):
            name = f"{layer.name}.{port.id}" if several else layer.name
            if name not in tensor.names:
                tensor.names.append(name)
            tensors[(layer.id, port.id)] = tensor
    if problems:
        raise _unmappable_error(problems)
    place = {key: i for i, key in enumerate(net.output_order)}
    outputs = sorted(net.outputs(), key=lambda lp: place.get((lp[0].id, lp[1].id), len(place)))  # (stable)
    taken = {name for op in model.ops for t in op.outputs for name in t.names}
    for layer, port in outputs:
        tensor = tensors[(layer.id, port.id)]
        for name in net.output_names.get((layer.id, port.id), ()):  # mo's names too ("out:0"), where unique
            for spelling in (name, name[:-2] if name.endswith(":0") else None):
                if spelling and spelling not in taken:
                    tensor.names.append(spelling)
                    taken.add(spelling)
    for layer, port in outputs:
        model.result(tensors[(layer.id, port.id)], f"{layer.name}/sink_port_{port.id}")
    return model


def _check_outputs(layer, outputs) -> None:
    what = describe_layer(layer.id, layer.name)
    if len(outputs) != len(layer.outputs):
        raise IRError(f"internal: the IR v11 mapping of {what} ({layer.type}) made {len(outputs)} outputs for "
                      f"{len(layer.outputs)} output ports")
    for port, tensor in zip(layer.outputs, outputs):
        if tuple(tensor.shape) != tuple(port.dims):
            raise IRError(f"internal: the IR v11 mapping of {what} ({layer.type}) computes shape "
                          f"{list(tensor.shape)} for output port {port.id}, the IR says {list(port.dims)}")

"""Model cutting (--input / --output) and input shapes (--input_shape, -b).

Rules from the reference guide's Inception V1 walk-through:
- --output NODE keeps NODE as the last layer; NODE:PORT keeps only that output
  port; PORT:NODE cuts the edge into NODE's input port, so NODE goes and its
  producer becomes the last layer.
- --input NODE feeds every dynamic input port of NODE from a new Input layer
  named NODE/placeholder_port_N (an original Input is just kept); PORT:NODE feeds
  only that port; NODE:PORT makes that output tensor an input. A NODE no model data
  flows into (a constant, a PlaceholderWithDefault) becomes an Input of its name that
  replaces its output, as the reference does.
- Without --input_shape a new input's shape is inferred from the original model;
  with it, the part before the cut is not inferred at all. A node with several
  dynamic inputs and a shape needs PORT:NODE (FAQ #30).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import networkx as nx
import numpy as np

from core.errors import Error
from core.front.cli_values import parse_input_shapes, parse_port_spec, port_spec_readings, split_names
from core.graph.graph import carry_output
from core.ops.parameter import Parameter

log = logging.getLogger("mo_core")


@dataclass
class NewInput:
    node: object            # op node named in --input
    in_port: int | None
    out_port: int | None
    shape: np.ndarray | None
    text: str
    input_names: list = None   # the IR Input layers this entry became
    name: str = ""             # the node's name (the node itself may be gone after the cut)


def dynamic_in_ports(node) -> list[int]:
    """Input ports fed by the model's data: not blobs and not constants (a TensorFlow weight
    read through Identity nodes stays in the model, as the reference guide says)."""
    return sorted(d["in"] for u, d in node.in_edges_data() if "bin" not in d and not _is_constant(node.graph, u))


def _is_constant(graph, data_id) -> bool:
    """No model input (or other source) is upstream of the tensor."""
    return not any(graph.nodes[a].get("kind") == "op" and _is_source(graph.node_obj(a))
                   for a in nx.ancestors(graph, data_id))


def apply_outputs(graph, output_text: str | None):
    """Marks the requested outputs and drops what only feeds other outputs."""
    names = split_names(output_text)
    if not names:
        outputs = [d for d in graph.data_nodes() if d.soft_get("is_output")]
    else:
        for d in graph.data_nodes():
            d["is_output"] = False
        outputs = []
        for text in names:
            node, in_port, out_port = parse_port_spec(graph, text)
            if in_port is not None:
                if not node.has_in(in_port):
                    raise Error("Port index {} is out of number of available input ports for node \"{}\".",
                                in_port, node.name, faq=28)
                outputs.append(node.in_node(in_port))
            elif out_port is not None:
                if not node.has_out(out_port):
                    raise Error("Output port {} does not exist for node \"{}\".", out_port, node.name, faq=28)
                outputs.append(node.out_node(out_port))
            else:
                outs = list(node.out_nodes().values())
                if not outs:
                    raise Error("Node \"{}\" has no outputs and cannot be an output of the model.", node.name)
                outputs.extend(outs)
        for place, d in enumerate(outputs, start=1):  # (in the order given: carry_output)
            d["is_output"] = place
    graph.graph["cut_away"] = remove_dead(graph)


def remove_dead(graph) -> set[str]:
    """Keeps only nodes from which an output tensor is reachable; the names of the ops it removed."""
    outputs = [d.id for d in graph.data_nodes() if d.soft_get("is_output")]
    keep = set(outputs)
    for o in outputs:
        keep |= nx.ancestors(graph, o)
    dead = [n for n in list(graph.nodes) if n not in keep]
    names = {graph.nodes[n].get("name") for n in dead if graph.nodes[n].get("kind") == "op"}
    graph.remove_nodes_from(dead)
    return names


def parse_inputs(graph, input_text: str | None, shape_text: str | None, batch: int | None,
                 entry_shapes: list | None = None) -> list[NewInput]:
    """entry_shapes: --input's own shapes, one (or None) per name."""
    shapes = entry_shapes or parse_input_shapes(shape_text)
    if shapes and batch is not None:
        raise Error("Both --input_shape and --batch were provided. Please, provide only one of them.", faq=55)
    if batch is not None and batch <= 0:
        raise Error("The batch -b/--batch must be a positive integer, got {}.", batch, faq=56)
    names = split_names(input_text)
    if not names:
        if len(shapes) > 1:
            raise Error("Please provide input layer names for input layer shapes: {} shapes were given but no "
                        "--input.", len(shapes), faq=57)
        params = [node for node in graph.op_nodes() if _is_source(node)]
        if shapes and len(params) != 1:
            raise Error("No or multiple placeholders in the model ({}), but only one shape is provided, cannot set "
                        "it. Name the input with --input.", len(params), faq=31)
        return [NewInput(params[0], None, None, shapes[0], params[0].name, name=params[0].name)] if shapes else []
    if shapes and len(shapes) != len(names):
        raise Error("{} inputs were named with --input but {} shapes given with --input_shape.", len(names),
                    len(shapes), faq=57)
    result = []
    cut_away = graph.graph.get("cut_away") or set()
    for i, text in enumerate(names):
        readings = port_spec_readings(text)
        if all(graph.op_by_name(r[0]) is None for r in readings) and any(r[0] in cut_away for r in readings):
            log.warning("--input names '%s', which feeds none of the outputs --output keeps: it is left out.", text)
            continue
        node, in_port, out_port = parse_port_spec(graph, text)
        shape = shapes[i] if shapes else None
        if in_port is not None and not node.has_in(in_port):
            raise Error("Port index {} is out of number of available input ports for node \"{}\".", in_port,
                        node.name, faq=28)
        if out_port is not None and not node.has_out(out_port):
            raise Error("Output port {} does not exist for node \"{}\".", out_port, node.name, faq=28)
        if shape is not None and in_port is None and out_port is None and len(dynamic_in_ports(node)) > 1:
            raise Error("Node {} has more than 1 input and input shapes were provided. Try not to provide input "
                        "shapes or specify input port with PORT:NODE notation, where PORT is an integer.",
                        node.name, faq=30)
        result.append(NewInput(node, in_port, out_port, shape, text, name=node.name))
    return result


def _is_source(node) -> bool:
    return node.soft_get("op") == "Parameter" or node.soft_get("caffe_type") in ("Input", "DummyData")


def cut_inputs(graph, new_inputs: list[NewInput], infer_shapes_of, inputs_named: bool):
    """Replaces the tensors named by --input with Input layers.

    `infer_shapes_of(data_ids)` returns {data id: shape} computed on the original
    model, for new inputs that have no --input_shape.
    """
    tensors = []  # (NewInput, data node, consumer op or None, in port or None, name)
    for spec in new_inputs:
        node = spec.node
        spec.input_names = [node.name] if _is_source(node) else []
        if _is_source(node):
            continue
        if spec.out_port is not None:
            tensors.append((spec, node.out_node(spec.out_port), None, None,
                            "{}/output_port_{}".format(node.name, spec.out_port)))
            continue
        ports = [spec.in_port] if spec.in_port is not None else dynamic_in_ports(node)
        if not ports:  # fed by constants only: its output is the input
            tensors.append((spec, node.out_node(0), None, None, node.name))
            continue
        for p in ports:
            tensors.append((spec, node.in_node(p), node, p, "{}/placeholder_port_{}".format(node.name, p)))

    missing = [t[1].id for t in tensors if t[0].shape is None]
    inferred = infer_shapes_of(missing) if missing else {}

    for spec, data, consumer, port, name in tensors:
        shape = spec.shape if spec.shape is not None else inferred[data.id]
        spec.input_names.append(name)
        param = graph.add_op(name, caffe_type="Input", cut_input=True)
        Parameter.update_node_stat(param, {"shape": np.array(shape, dtype=np.int64)})
        out = graph.add_data(name)
        graph.connect(param, out, out=0)
        if consumer is None:  # NODE:PORT: every reader of the tensor reads the new input
            for _, v, key, attrs in list(graph.out_edges(data.id, keys=True, data=True)):
                graph.add_edge(out.id, v, **attrs)
                graph.remove_edge(data.id, v, key)
            carry_output(out, data)
        else:
            for u, v, key, attrs in list(graph.in_edges(consumer.id, keys=True, data=True)):
                if u == data.id and attrs.get("in") == port:
                    graph.remove_edge(u, v, key)
                    graph.add_edge(out.id, consumer.id, **attrs)
    remove_dead(graph)

    if not inputs_named:  # only --input promises that the listed inputs are all there are
        return
    named = {spec.node.id for spec in new_inputs}
    for node in graph.op_nodes():
        if _is_source(node) and node.id not in named and not node.soft_get("cut_input"):
            raise Error("--input parameter was provided. Other inputs are needed for output computation: \"{}\". "
                        "Provide more inputs or choose another place to cut the net.", node.name, faq=26)


def set_input_shapes(graph, new_inputs: list[NewInput], batch: int | None):
    """Applies --input_shape to kept original inputs, then -b to every input."""
    for spec in new_inputs:
        if spec.shape is not None and spec.node.id in graph and _is_source(spec.node):
            spec.node.shape = np.array(spec.shape, dtype=np.int64)
    for node in graph.op_nodes(op="Parameter"):
        shape = node.soft_get("shape")
        if shape is None:
            raise Error("Input \"{}\" has no shape in the model. Please provide it with --input_shape.", node.name,
                        faq=56)
        if batch is not None and len(shape):  # (a scalar input has no batch: the reference leaves it)
            shape = np.array(shape, dtype=np.int64)
            shape[0] = batch
            node.shape = shape

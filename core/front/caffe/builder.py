"""Builds the op/data graph from a Caffe NetParameter (+ the caffemodel's blobs).

Each Caffe layer becomes an op node carrying `pb` (its prototxt message) and
`caffe_blobs` (the same-named layer's trained blobs). Each top becomes a
fresh data node, so in-place layers (top == bottom) get distinct tensors.
"""
from __future__ import annotations

import numpy as np

from core.errors import FrameworkError
from core.graph.graph import Graph
from core.ops.parameter import Parameter

# V1LayerParameter.LayerType enum name -> the V2 string type
_V1_TYPES = {
    "ABSVAL": "AbsVal", "ACCURACY": "Accuracy", "ARGMAX": "ArgMax", "BNLL": "BNLL", "CONCAT": "Concat",
    "CONTRASTIVE_LOSS": "ContrastiveLoss", "CONVOLUTION": "Convolution", "DATA": "Data",
    "DECONVOLUTION": "Deconvolution", "DROPOUT": "Dropout", "DUMMY_DATA": "DummyData",
    "EUCLIDEAN_LOSS": "EuclideanLoss", "ELTWISE": "Eltwise", "EXP": "Exp", "FLATTEN": "Flatten",
    "HDF5_DATA": "HDF5Data", "HDF5_OUTPUT": "HDF5Output", "HINGE_LOSS": "HingeLoss", "IM2COL": "Im2col",
    "IMAGE_DATA": "ImageData", "INFOGAIN_LOSS": "InfogainLoss", "INNER_PRODUCT": "InnerProduct", "LRN": "LRN",
    "MEMORY_DATA": "MemoryData", "MULTINOMIAL_LOGISTIC_LOSS": "MultinomialLogisticLoss", "MVN": "MVN",
    "POOLING": "Pooling", "POWER": "Power", "RELU": "ReLU", "SIGMOID": "Sigmoid",
    "SIGMOID_CROSS_ENTROPY_LOSS": "SigmoidCrossEntropyLoss", "SILENCE": "Silence", "SOFTMAX": "Softmax",
    "SOFTMAX_LOSS": "SoftmaxWithLoss", "SPLIT": "Split", "SLICE": "Slice", "TANH": "TanH",
    "WINDOW_DATA": "WindowData", "THRESHOLD": "Threshold",
}

# Layers that only exist for training and have no place in an inference graph.
TRAINING_ONLY = {"Accuracy", "SoftmaxWithLoss", "EuclideanLoss", "HingeLoss", "InfogainLoss",
                 "MultinomialLogisticLoss", "SigmoidCrossEntropyLoss", "ContrastiveLoss", "HDF5Output"}
DATA_LAYERS = {"Data", "ImageData", "HDF5Data", "MemoryData", "WindowData", "AnnotatedData"}


def layer_type(layer) -> str:
    if isinstance(layer.type, str):
        return layer.type
    enum = type(layer).LayerType
    name = enum.Name(layer.type)
    return _V1_TYPES.get(name, name.title().replace("_", ""))


def _layers(net):
    old = getattr(net, "layers", None) or []  # a fork's schema (--caffe_proto) may not have V1 layers
    if net.layer and old:
        raise FrameworkError("The model mixes 'layer' and the deprecated 'layers' sections; use one of them.", faq=7)
    return list(net.layer) if net.layer else list(old)


def _included_in_test(layer) -> bool:
    """NetStateRule filtering for phase TEST (stage/level rules are not used by deploy nets)."""
    if not layer.include and not layer.exclude:
        return True
    # Phase.TEST of the layer's own schema (ours, or a fork's from --caffe_proto)
    test = layer.DESCRIPTOR.fields_by_name["include"].message_type.fields_by_name["phase"] \
        .enum_type.values_by_name["TEST"].number
    if layer.include:
        return any(rule.HasField("phase") and rule.phase == test or not rule.HasField("phase")
                   for rule in layer.include)
    if layer.exclude:
        return not any(rule.HasField("phase") and rule.phase == test for rule in layer.exclude)
    return True


def _input_shapes(net) -> list[tuple[str, list[int] | None]]:
    """Net-level inputs: `input` + `input_shape` / `input_dim` (4 values per input)."""
    names = list(net.input)
    if not names:
        return []
    if net.input_shape:
        if len(net.input_shape) != len(names):
            raise FrameworkError("The prototxt declares {} inputs but {} input_shape entries.",
                                 len(names), len(net.input_shape), faq=8)
        return [(n, [int(d) for d in s.dim]) for n, s in zip(names, net.input_shape)]
    if net.input_dim:
        dims = [int(d) for d in net.input_dim]
        if len(dims) != 4 * len(names):
            raise FrameworkError("The prototxt declares {} inputs but {} input_dim values (4 per input are "
                                 "expected).", len(names), len(dims), faq=8)
        return [(n, dims[4 * i:4 * i + 4]) for i, n in enumerate(names)]
    return [(n, None) for n in names]


def build_graph(net, weights: dict | None = None) -> Graph:
    """`weights` is {layer name: [Blob]} from weights.read_caffemodel_blobs."""
    graph = Graph(name=net.name or "model")
    graph.graph["framework"] = "caffe"
    weights = weights or {}
    latest: dict[str, object] = {}  # blob name -> data node holding its current value

    for name, shape in _input_shapes(net):
        op = graph.add_op(name, caffe_type="Input")
        Parameter.update_node_stat(op, {"shape": None if shape is None else np.array(shape, dtype=np.int64)})
        out = graph.add_data(name)
        graph.connect(op, out, out=0)
        latest[name] = out

    seen_names = set()
    for layer in _layers(net):
        if not _included_in_test(layer):
            continue
        ltype = layer_type(layer)
        if ltype in TRAINING_ONLY:
            continue
        if layer.name in seen_names:
            raise FrameworkError("The prototxt has two layers named '{}'; layer names must be unique.",
                                 layer.name, faq=24)
        seen_names.add(layer.name)
        node = graph.add_op(layer.name, caffe_type=ltype, pb=layer, caffe_blobs=weights.get(layer.name, []))
        for port, bottom in enumerate(layer.bottom):
            if bottom not in latest:
                raise FrameworkError(
                    "Layer '{}' reads blob '{}' that no earlier layer or input produces. Check the order of "
                    "layers in the prototxt.", layer.name, bottom, faq=24)
            graph.connect(latest[bottom], node, inp=port)
        for port, top in enumerate(layer.top):
            out = graph.add_data(top)
            graph.connect(node, out, out=port)
            latest[top] = out

    for place, data in enumerate([d for d in graph.data_nodes() if not d.consumers()], start=1):
        data["is_output"] = place  # (the model's order: carry_output)
    return graph

"""An unrolled recurrent layer's input projections hoisted out of its time steps.

What the loop unroller (core/front/tf/loops/) makes of a Keras LSTM / GRU / SimpleRNN
or a TF1 `dynamic_rnn` multiplies each step's input by the same weights:

    S [T, N, C] -> Crop (step t of axis 0) -> Reshape [N, C] -> FullyConnected W -> ...

T small products, each reading W again, where one product of all steps does the
same arithmetic at once. Each such group becomes

    S -> Reshape [T*N, C] -> FullyConnected W -> Crop (rows t*N .. t*N+N-1) -> ...

(the step's rows of one product; a Crop of whole leading rows costs a runtime
nothing: it is contiguous). A product of the step and the state side by side,
FullyConnected(Concat([x_t, h])) as TF1's BasicRNNCell / BasicLSTMCell / GRUCell write
it, is first made the sum of a product of each (the weights' columns split), so
that its input part joins the group. When every step then adds the recurrent product and a
bias (`Eltwise sum` -> `ScaleShift` of biases only, the same biases for every step:
Keras' `MatMul + MatMul_1 -> BiasAdd`), the bias goes into the one product and the
per-step ScaleShift goes: (x W + h U) + b == (x W + b) + h U.
OpenVINO's converter makes such loops a TensorIterator and its runtime hoists the
projection the same way; here the IR stays one plain layer list.
"""
from __future__ import annotations

import re

import numpy as np

from core.graph.blobs import get_blob, set_blob
from core.graph.graph import shape_tuple
from core.ops.fully_connected import FullyConnected
from core.ops.linear import Eltwise
from core.ops.shape_ops import Reshape
from core.ops.slicing import CropRange
from core.validate import forget_framework_tensor

MIN_STEPS = 2  # a group of fewer products gains nothing


def _step_of(x):
    """(S, t) when the tensor x [N, C] is step t of a sequence S [T, ...] (a Crop of one index
    of axis 0, flattened by a Reshape), else None."""
    reshape = x.producer()
    if reshape is None or reshape.soft_get("type") != "Reshape":
        return None
    crop = reshape.in_node(0).producer()
    if crop is None or crop.soft_get("op") != "CropRange" or list(crop.axis) != [0]:
        return None
    source = crop.in_node(0)
    shape, step = shape_tuple(source), shape_tuple(x)
    if len(shape) < 2 or len(step) != 2 or shape[-1] != step[1] or int(np.prod(shape[1:-1])) != step[0]:
        return None
    begin, end = int(crop.crop_begin[0]), int(crop.crop_end[0])
    if begin + end != shape[0] - 1 or source.soft_get("value") is not None:
        return None
    return source, begin


def _concat_step(fc):
    """(S, t, which part is the step, the weights' columns of each part) when the FullyConnected multiplies
    Concat([x_t, h], axis 1) - the step and the state side by side, as TF1's BasicRNNCell /
    BasicLSTMCell / GRUCell do - by one kernel (either order), else None."""
    concat = fc.in_node(0).producer()
    if fc.axis != 1 or concat is None or concat.soft_get("type") != "Concat" or len(concat.data_inputs()) != 2:
        return None
    parts = concat.data_inputs()
    shapes = [shape_tuple(d) for d in parts]
    steps = [_step_of(d) for d in parts]
    weights = get_blob(fc, "weights")
    if (_only_consumer(fc.in_node(0), "FullyConnected") is None or int(concat.soft_get("axis", 1)) != 1
            or any(len(shape) != 2 for shape in shapes) or shapes[0][0] != shapes[1][0] or weights is None
            or steps == [None, None]):
        return None
    weights = np.asarray(weights).reshape(int(fc["out-size"]), -1)
    if weights.shape[1] != shapes[0][1] + shapes[1][1]:
        return None
    k = 0 if steps[0] is not None else 1
    columns = [np.ascontiguousarray(weights[:, :shapes[0][1]]), np.ascontiguousarray(weights[:, shapes[0][1]:])]
    return steps[k][0], steps[k][1], k, columns


def _split_concat_product(graph, fc, k: int, columns: list) -> None:
    """The product of Concat([x_t, h]) made x_t W_x (+ the biases) + h W_h (_concat_step: part k is
    x_t), so that the first joins the other steps' products."""
    parts = fc.in_node(0).producer().data_inputs()
    out, rows, out_size = fc.out_node(0), shape_tuple(parts[0])[0], int(fc["out-size"])
    biases = get_blob(fc, "biases")
    name = fc.name
    _remove_with_blobs(graph, fc)
    add = graph.add_op(name)
    Eltwise.update_node_stat(add, {"operation": "sum"})
    for port, (data, w) in enumerate(zip(parts, columns)):
        product = _op(graph, f"{name}/part{port}", FullyConnected, {"out-size": out_size, "axis": 1}, [data],
                      [rows, out_size])
        set_blob(product, "weights", w)
        if port == k and biases is not None:
            set_blob(product, "biases", biases)
        graph.connect(product.out_node(0), add, inp=port)
    graph.connect(add, out, out=0)


def _split_concat_products(graph) -> None:
    """Every group of such products over the steps of one sequence with the same step columns that is
    large enough to hoist, split (_split_concat_product); products of a group too small stay one."""
    found: dict[tuple, list] = {}
    for fc in graph.op_nodes(type="FullyConnected"):
        concat = _concat_step(fc)
        if concat is not None:
            source, t, k, columns = concat
            key = (source.id, _array_key(columns[k]))
            found.setdefault(key, []).append((t, fc, source, k, columns))
    for members in found.values():
        if _enough(members[0][2], members):
            for _, fc, _, k, columns in members:
                _split_concat_product(graph, fc, k, columns)


def _array_key(a: np.ndarray) -> tuple:
    """A hashable key equal for equal arrays (weights shared by the steps' products)."""
    return a.shape, a.dtype.str, a.tobytes()


def _weights_key(fc) -> tuple | None:
    weights = get_blob(fc, "weights")
    return None if weights is None else _array_key(weights)


def _groups(graph) -> list[tuple]:
    """[(S, [(t, fc)])]: the FullyConnected layers with equal weights reading steps of one sequence."""
    found: dict[tuple, list] = {}
    sources = {}
    for fc in graph.op_nodes(type="FullyConnected"):
        step = _step_of(fc.in_node(0)) if fc.axis == 1 else None
        weights = _weights_key(fc) if step is not None else None
        if weights is None or fc.out_node(0).soft_get("is_output"):
            continue
        source, t = step
        sources[source.id] = source
        found.setdefault((source.id, weights), []).append((t, fc))
    return [(sources[source_id], sorted(members, key=lambda m: m[0])) for (source_id, _), members in found.items()]


def _enough(source, members: list) -> bool:
    """Are these products (each (t, ...)) enough steps of `source` to hoist: one a step, at least half of them?"""
    steps = shape_tuple(source)[0]
    return len(members) >= MIN_STEPS and 2 * len(members) >= steps and len({m[0] for m in members}) == len(members)


def _op(graph, name: str, op_class, attrs: dict, inputs: list, out_shape):
    node = graph.add_op(name)
    op_class.update_node_stat(node, attrs)
    for port, data in enumerate(inputs):
        graph.connect(data, node, inp=port)
    out = graph.add_data(node.name, shape=np.array(out_shape, dtype=np.int64))
    graph.connect(node, out, out=0)
    return node


def _only_consumer(data, type_: str):
    consumers = data.consumers()
    if len(consumers) != 1 or data.soft_get("is_output") or consumers[0].soft_get("type") != type_:
        return None
    return consumers[0]


def _remove_with_blobs(graph, node, bypass: bool = False) -> None:
    """The op and the constants only it reads (unrolled steps may share one); `bypass`: its
    consumers read its input."""
    blobs = [d.id for _, d, _ in node.blob_inputs() if len(d.consumers()) == 1]
    if bypass:
        graph.bypass(node)
    else:
        graph.remove_node(node.id)
    graph.remove_nodes_from(blobs)


def _step_biases(outputs: list) -> tuple[list, np.ndarray] | None:
    """([(Eltwise, ScaleShift)] per step, the biases) when every step's product goes only into a
    two-input Eltwise sum whose result goes only into a ScaleShift of biases alone, the same
    biases everywhere; else None."""
    pairs, biases = [], None
    for data in outputs:
        add = _only_consumer(data, "Eltwise")
        if add is None or add.soft_get("operation") != "sum" or len(add.data_inputs()) != 2 or add.has_valid("coeff"):
            return None
        shift = _only_consumer(add.out_node(0), "ScaleShift")
        if shift is None or len(shift.data_inputs()) != 1:
            return None
        b, w = get_blob(shift, "biases"), get_blob(shift, "weights")
        if b is None or (w is not None and not np.all(w == 1)):
            return None
        if biases is not None and not np.array_equal(b, biases):
            return None
        biases = b
        pairs.append((add, shift))
    return pairs, biases


def _plan(members: list) -> tuple[list, np.ndarray | None, list]:
    """(the members hoisted, the one product's biases, the (Eltwise, ScaleShift) pairs whose bias
    it takes over). Products without biases whose steps add the same biases after the recurrent
    product (the bias goes into the one product) may join products that have those biases
    already (step 0 of a Keras LSTM: its recurrent product of the zero state is gone, the
    bias went into the input product); products with other biases are hoisted only among equals."""
    plain = [m for m in members if get_blob(m[1], "biases") is None]
    biased = [m for m in members if get_blob(m[1], "biases") is not None]
    values = [get_blob(fc, "biases") for _, fc in biased]
    same = all(np.array_equal(v, values[0]) for v in values)
    folded = _step_biases([fc.out_node(0) for _, fc in plain]) if plain else None
    if folded is not None and (not biased or same and np.array_equal(values[0], folded[1])):
        return members, folded[1], folded[0]
    if plain:
        return plain, None, []
    return (biased, values[0], []) if same else ([], None, [])


def _hoist(graph, source, members: list, biases, pairs: list) -> None:
    first = members[0][1]
    steps, rows = shape_tuple(source)[0], shape_tuple(first.in_node(0))[0]
    channels = shape_tuple(source)[-1]
    base = re.sub(r"/unrolled_\d+", "", first.name) + "/all_steps"
    flat = _op(graph, base + "/reshape", Reshape, {"dim": np.array([steps * rows, channels], dtype=np.int64)},
               [source], [steps * rows, channels])
    out_size = int(first["out-size"])
    product = _op(graph, base, FullyConnected, {"out-size": out_size, "axis": 1}, [flat.out_node(0)],
                  [steps * rows, out_size])
    set_blob(product, "weights", get_blob(first, "weights"))
    for t, fc in members:
        data, name = fc.out_node(0), fc.name
        _remove_with_blobs(graph, fc)  # (its input chain, read by nothing now, goes with the dead code)
        crop = graph.add_op(name)
        CropRange.update_node_stat(crop, {"axis": [0], "crop_begin": [t * rows],
                                          "crop_end": [(steps - 1 - t) * rows]})
        graph.connect(product.out_node(0), crop, inp=0)
        graph.connect(crop, data, out=0)
    for add, shift in pairs:
        _remove_with_blobs(graph, shift, bypass=True)
        forget_framework_tensor(add.out_node(0))  # it holds the biased sum now
    if biases is not None:
        set_blob(product, "biases", biases)


def hoist_projections(graph) -> int:
    """Hoists every group (module doc); returns how many products were made."""
    _split_concat_products(graph)
    made = 0
    for source, members in _groups(graph):
        members, biases, pairs = _plan(members)
        if _enough(source, members):
            _hoist(graph, source, members, biases, pairs)
            made += 1
    return made

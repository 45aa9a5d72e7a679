"""A shuffle of a tensor's last axis - a Split into k equal parts concatenated back
in another order, as the OD API converter writes the box coder's (ty, tx, th, tw) ->
(tx, ty, tw, th) swap - folded into the layers that produce the tensor: their
output channels (Convolution, FullyConnected) or values (constants) permuted, the
Split and the Concat removed, so that nothing moves at run time. The reference's
converter swapped the box predictors' weights the same way.

Which produced value lands where is found by sending value ids through the layers
between the producers and the Split (Reshape, Permute, Concat: they only move
values): the fold is made only where, for every value, the shuffle reads the same
producer's value at the same position with another channel - one permutation of
that producer's channels - or any value of the same constant, and every tensor on
the way feeds only the next layer. Anything else leaves the Split and Concat as
they are."""
from __future__ import annotations

import numpy as np

from core.graph.blobs import get_blob, set_blob
from core.graph.graph import shape_tuple
from core.validate import forget_framework_tensor

MOVES = ("Reshape", "Permute", "Concat")
CHANNEL_PRODUCERS = ("Convolution", "FullyConnected")
MAX_VALUES = 1 << 22  # ids traced per shuffle (its tensors are box encodings: small)
CHANNELS, VALUES = "channels", "values"


def fold_shuffles(graph) -> int:
    """Folds every foldable shuffle (see the module doc); returns how many."""
    folded = 0
    for split in graph.op_nodes(op="Split"):
        if split.id in graph and _fold(graph, split):
            folded += 1
    return folded


def _only_reader(data, reader) -> bool:
    return not data.soft_get("is_output") and [c.id for c in data.consumers()] == [reader.id]


def _shuffle(split):
    """(the order the Concat reads the last axis in: an index array, the Concat) when
    `split` is one half of a shuffle, else None."""
    data = split.data_inputs()
    if len(data) != 1:
        return None
    source = data[0]
    shape = shape_tuple(source)
    parts = [out for _, out in sorted(split.out_nodes().items())]
    if not shape or len(parts) < 2 or not _only_reader(source, split):
        return None
    axis = int(split.soft_get("axis", -1))
    if axis % len(shape) != len(shape) - 1 or shape[-1] % len(parts):
        return None
    width = shape[-1] // len(parts)
    consumers = {c.id for part in parts for c in part.consumers()}
    if len(consumers) != 1 or any(part.soft_get("is_output") or len(part.consumers()) != 1 for part in parts):
        return None
    concat = parts[0].consumers()[0]
    ins = concat.data_inputs()
    if concat.soft_get("op") != "Concat" or len(ins) != len(parts) or len(concat.out_nodes()) != 1:
        return None
    if concat.out_node(0).soft_get("is_output"):
        return None  # (a network output keeps its name: the Concat stays)
    if int(concat.soft_get("axis", -1)) % len(shape) != len(shape) - 1:
        return None
    index = {part.id: i for i, part in enumerate(parts)}
    order = [index.get(d.id) for d in ins]
    if None in order or sorted(order) != list(range(len(parts))) or any(shape_tuple(p)[-1] != width for p in parts):
        return None
    return np.concatenate([np.arange(i * width, (i + 1) * width) for i in order]), concat


class _Sources:
    """The producers of the traced values: each gets a range of ids."""

    def __init__(self):
        self.items: list = []  # (first id, node, shape, kind): CHANNELS (a layer's output channels) or VALUES
        # (a constant's data node, or a Const layer's blob)
        self.next = 0
        self.tensors: list = []  # the data nodes traced: their values change

    def add(self, node, shape, kind: str) -> np.ndarray:
        size = int(np.prod(shape, dtype=np.int64))
        if self.next + size > MAX_VALUES:
            raise _NotFoldable
        ids = np.arange(self.next, self.next + size, dtype=np.int64).reshape(shape)
        self.items.append((self.next, node, shape, kind))
        self.next += size
        return ids


class _NotFoldable(Exception):
    pass


def _trace(data, reader, sources: _Sources) -> np.ndarray:
    """The ids of the values of `data` (read by `reader` alone)."""
    shape = shape_tuple(data)
    sources.tensors.append(data)
    if data.soft_get("value") is not None:
        if not _only_reader(data, reader):
            raise _NotFoldable
        return sources.add(data, shape, VALUES)
    producer = data.producer()
    if producer is None or not _only_reader(data, reader) or len(producer.out_nodes()) != 1:
        raise _NotFoldable
    op = producer.soft_get("op")
    if op in CHANNEL_PRODUCERS:
        if int(producer.soft_get("group", 1) or 1) != 1 or len(shape) < 2:
            raise _NotFoldable
        weights = [d for name, d, _ in producer.blob_inputs() if name in ("weights", "biases")]
        if any(len(d.consumers()) != 1 for d in weights):  # (shared weights: another layer reads them)
            raise _NotFoldable
        return sources.add(producer, shape, CHANNELS)
    if op == "Const":  # a Const layer: its values are its one blob
        blobs = producer.blob_inputs()
        values = blobs[0][1] if len(blobs) == 1 else None
        if values is None or len(values.consumers()) != 1 or np.size(values.soft_get("value")) != np.prod(shape):
            raise _NotFoldable
        return sources.add(values, shape, VALUES)
    if op not in MOVES:
        raise _NotFoldable
    ins = producer.data_inputs()
    if op == "Concat":
        return np.concatenate([_trace(d, producer, sources) for d in ins], axis=int(producer.axis))
    if len(ins) != 1:
        raise _NotFoldable
    ids = _trace(ins[0], producer, sources)
    if op == "Permute":
        ids = ids.transpose([int(v) for v in producer.order])
    return ids.reshape(shape)


def _fold(graph, split) -> bool:
    found = _shuffle(split)
    if found is None:
        return False
    order, concat = found
    source = split.data_inputs()[0]
    sources = _Sources()
    try:
        ids = _trace(source, split, sources)
    except _NotFoldable:
        return False
    # after the shuffle, the place of value `ids[p]` holds value `moved[p]`
    moved = ids[..., order]
    read = np.empty(sources.next, np.int64)
    read[ids.reshape(-1)] = moved.reshape(-1)
    plans = []
    for first, node, shape, kind in sources.items:
        size = int(np.prod(shape, dtype=np.int64))
        mine = read[first:first + size] - first
        if mine.min() < 0 or mine.max() >= size:
            return False  # a value would come from another producer
        if kind == CHANNELS:
            mine = _channel_permutation(mine.reshape(shape))
            if mine is None:
                return False
        plans.append((node, mine, kind))
    for node, perm, kind in plans:
        if kind == VALUES:
            node.value = node.value.reshape(-1)[perm].reshape(node.value.shape)
            continue
        for name in ("weights", "biases"):
            blob = get_blob(node, name)
            if blob is not None:
                set_blob(node, name, blob.reshape(len(perm), -1)[perm].reshape(blob.shape))
    for data in sources.tensors:  # (they no longer hold the framework's tensors: --validate skips them)
        forget_framework_tensor(data)
    _remove(graph, split, concat, source)
    return True


def _channel_permutation(reads: np.ndarray) -> np.ndarray | None:
    """σ with reads[n, c, ...] == the flat index of [n, σ(c), ...] for every position,
    when the reads are one permutation of the channels axis (1), else None."""
    positions = np.arange(reads.size, dtype=np.int64).reshape(reads.shape)
    shape = reads.shape
    inner = int(np.prod(shape[2:], dtype=np.int64))
    delta = reads - positions  # (σ(c) - c) * inner at every position of channel c
    per_channel = delta.swapaxes(0, 1).reshape(shape[1], -1)
    if (per_channel != per_channel[:, :1]).any() or (per_channel[:, 0] % inner).any():
        return None
    sigma = np.arange(shape[1]) + per_channel[:, 0] // inner
    if sorted(sigma.tolist()) != list(range(shape[1])):
        return None
    return sigma


def _remove(graph, split, concat, source):
    """The Concat's readers read the Split's input; both go."""
    result = concat.out_node(0)
    for _, reader, key, attrs in list(graph.out_edges(result.id, keys=True, data=True)):
        graph.add_edge(source.id, reader, **attrs)
    graph.remove_op_with_data(concat)
    graph.remove_op_with_data(split)

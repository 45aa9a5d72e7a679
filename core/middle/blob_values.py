"""Trained weights with NaN or infinite values - a Caffe layer's blobs, a TensorFlow
Const - are kept (the model is what it is), but each one is named in a warning,
since every output that depends on it will be NaN/inf too and the cause is
otherwise hard to find."""
from __future__ import annotations

import numpy as np


def _counts(value):
    """(NaN count, infinite count) of a float array; None when all are finite or it is no float."""
    if value is None:
        return None
    value = np.asarray(value)
    if value.dtype.kind != "f":
        return None
    finite = np.isfinite(value)
    if finite.all():
        return None
    nan = int(np.count_nonzero(np.isnan(value)))
    return nan, int(value.size - np.count_nonzero(finite) - nan)


def warn_non_finite(graph, warnings: list[str]):
    for node in graph.op_nodes():
        for name, data, _ in node.blob_inputs():
            counts = _counts(data.value)
            if counts is not None:
                warnings.append("Layer '{}' ({}): its blob '{}' has {} NaN and {} infinite values of {}. The IR keeps "
                                "them; outputs that depend on them will be NaN or infinite. Check the .caffemodel."
                                .format(node.name, node.soft_get("type"), name, *counts, np.asarray(data.value).size))
        if node.soft_get("tf_op") == "Const":
            for data in node.out_nodes().values():
                counts = _counts(data.soft_get("value"))
                if counts is not None:
                    warnings.append("Node '{}' (Const): its value has {} NaN and {} infinite values of {}. The IR "
                                    "keeps them; outputs that depend on them will be NaN or infinite. Check the "
                                    "model's weights.".format(node.name, *counts, np.asarray(data.value).size))

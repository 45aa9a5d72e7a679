"""Trained blobs with NaN or infinite values: kept (the model is what it is), but
each one is named in a warning, since every output that depends on it will be
NaN/inf too and the cause is otherwise hard to find."""
from __future__ import annotations

import numpy as np


def warn_non_finite(graph, warnings: list[str]):
    for node in graph.op_nodes():
        for name, data, _ in node.blob_inputs():
            value = data.value
            if value is None or np.asarray(value).dtype.kind != "f":
                continue
            value = np.asarray(value)
            finite = np.isfinite(value)
            if finite.all():
                continue
            nan = int(np.count_nonzero(np.isnan(value)))
            inf = int(value.size - np.count_nonzero(finite) - nan)
            warnings.append("Layer '{}' ({}): its blob '{}' has {} NaN and {} infinite values of {}. The IR keeps "
                            "them; outputs that depend on them will be NaN or infinite. Check the .caffemodel."
                            .format(node.name, node.soft_get("type"), name, nan, inf, value.size))

"""--data_type: the precision of the IR, applied to the graph before emission.

Every op gets `precision`; with FP16 every float blob becomes float16 here (with the
reference's clipping warnings, FAQ #75/#76), so the network handed to the writer
already says, and holds, what is written. Runs after every pass that computes with
blob values (fusing, constant folding): those work in float32.
"""
from __future__ import annotations

import numpy as np

from core.errors import Error
from ir.precision import to_float16

DATA_TYPES = ("FP32", "FP16")  # float/half are turned into these by ConvertOptions


def ir_precision(data_type: str) -> str:
    if data_type not in DATA_TYPES:
        raise Error("--data_type must be FP32 or FP16 (or float/half), got '{}'.", data_type)
    return data_type


def set_precision(graph, data_type: str, warnings: list[str]):
    precision = ir_precision(data_type)
    converted = set()
    for node in graph.op_nodes():
        node["precision"] = precision
        if precision != "FP16":
            continue
        for name, data, _ in node.blob_inputs():
            value = data.value
            if data.id in converted or value is None or np.asarray(value).dtype.kind != "f":
                continue
            data.value = to_float16(value, node.name, warnings)
            converted.add(data.id)

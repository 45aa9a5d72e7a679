"""Structural checks of a Network, shared by the reader and the writer.

The reader runs them on untrusted files; the writer runs them so the converter can
never produce an IR that the reader (or an inference daemon) would reject.
"""

from __future__ import annotations

from .errors import IRError
from .model import PRECISION_DTYPES, Network, describe_layer


def validate_network(net: Network, where: str | None = None) -> None:
    """Raise IRError for the first structural problem found in `net`.

    Checks: unique layer ids, known precisions, unique port ids per layer (inputs and
    outputs share one id space), non-negative dims, edges from an existing output port
    to an existing input port, exactly one incoming edge per input port, results on
    existing output ports, no cycle.
    """
    def fail(message: str):
        raise IRError(message, where=where)

    layers = {}
    for layer in net.layers:
        what = describe_layer(layer.id, layer.name)
        if layer.id in layers:
            fail(f"{what} uses the same id as {describe_layer(layer.id, layers[layer.id].name)}. "
                 "Layer ids must be unique; renumber one of them")
        layers[layer.id] = layer
        if layer.precision not in PRECISION_DTYPES:
            fail(f"{what} has unknown precision {layer.precision!r}; use one of "
                 f"{', '.join(PRECISION_DTYPES)}")
        seen_ports = set()
        for port in [*layer.inputs, *layer.outputs]:
            if port.id in seen_ports:
                fail(f"{what} has two ports with id {port.id}. Input and output ports of a "
                     "layer share one id space; renumber one of them")
            seen_ports.add(port.id)
            if port.id < 0:
                fail(f"{what} has port id {port.id}; port ids must be non-negative")
            for d in port.dims:
                if d < 0:
                    fail(f"{what} port {port.id} has negative dimension {d} in "
                         f"{list(port.dims)}; dimensions must be non-negative integers")

    incoming: dict[tuple[int, int], int] = {}
    for e in net.edges:
        text = f"edge from-layer={e.from_layer} from-port={e.from_port} to-layer={e.to_layer} to-port={e.to_port}"
        src, dst = layers.get(e.from_layer), layers.get(e.to_layer)
        if src is None:
            fail(f"{text} starts at a layer that does not exist; add {describe_layer(e.from_layer)} or fix the edge")
        if dst is None:
            fail(f"{text} ends at a layer that does not exist; add {describe_layer(e.to_layer)} or fix the edge")
        src_what, dst_what = describe_layer(src.id, src.name), describe_layer(dst.id, dst.name)
        if not any(p.id == e.from_port for p in src.outputs):
            if any(p.id == e.from_port for p in src.inputs):
                fail(f"{text} starts at input port {e.from_port} of {src_what}; edges must start at an output port")
            fail(f"{text} starts at port {e.from_port}, which {src_what} does not have")
        if not any(p.id == e.to_port for p in dst.inputs):
            if any(p.id == e.to_port for p in dst.outputs):
                fail(f"{text} ends at output port {e.to_port} of {dst_what}; edges must end at an input port")
            fail(f"{text} ends at port {e.to_port}, which {dst_what} does not have")
        key = (e.to_layer, e.to_port)
        incoming[key] = incoming.get(key, 0) + 1

    for layer in net.layers:
        for port in layer.inputs:
            n = incoming.get((layer.id, port.id), 0)
            if n != 1:
                problem = "no incoming edge" if n == 0 else f"{n} incoming edges"
                fail(f"input port {port.id} of {describe_layer(layer.id, layer.name)} has {problem}; "
                     "every input port must be fed by exactly one edge")

    for layer_id, port_id in net.results:
        layer = layers.get(layer_id)
        if layer is None:
            fail(f"<result layer={layer_id} port={port_id}> names a layer that does not exist")
        if not any(p.id == port_id for p in layer.outputs):
            fail(f"<result layer={layer_id} port={port_id}>: port {port_id} is not an output of "
                 f"{describe_layer(layer.id, layer.name)}; a result must be an output port")

    try:
        net.topological_order()
    except IRError as err:
        fail(err.message)

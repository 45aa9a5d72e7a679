"""query_network: which layers of a network the GPU plugin runs.

A layer is supported when it is an Input, when a GPU custom layer is registered
for its type, or when a built-in GPU kernel exists for its type and the layer's
attributes and blobs read correctly (its CPU kernel, the reference, accepts
them) and it is within that kernel's limits (`beyond_limits`: a Permute over
more axes than the copy kernel's). Anything else is "not supported on GPU":
HETERO sends it to the next device of its list.
"""
from __future__ import annotations

from ir import IRError

from .kernels import GPU_KERNELS
from .kernels.base import reference_kernel

DEVICE = "GPU"


def supported(layer, custom_layers=None) -> bool:
    if layer.type == "Input" or (custom_layers is not None and layer.type in custom_layers):
        return True
    if layer.type not in GPU_KERNELS:
        return False
    try:
        ref = reference_kernel(layer)
    except IRError:
        return False
    return GPU_KERNELS[layer.type].beyond_limits(layer, ref) is None


def query_network(network, custom_layers=None) -> dict[str, str]:
    """{layer name: "GPU"} for every layer the GPU plugin supports (as the
    Inference Engine's QueryNetwork result)."""
    return {layer.name: DEVICE for layer in network.layers if supported(layer, custom_layers)}

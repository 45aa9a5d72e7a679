"""IR version 11: what today's OpenVINO runtime (2023-2026) reads.

The emitter takes the same ir.Network the v2 writer writes (the converter's
graph, passes and layer types are shared) and maps every layer to opset
operations (layers/, one family a module), then writes .xml + .bin:

    from ir.v11 import write_ir_v11
    warnings = write_ir_v11(network, "out/model.xml", data_type="FP16")

Layers OpenVINO has no operation for are one IRError listing them all, unless the
user names an extension op for their type (extension_ops.py).
"""
from __future__ import annotations

from ..model import Network
from .emitter import to_model
from .extension_ops import ExtensionOp, parse_extension_ops
from .fp16 import decompress_f16_constants
from .model import Model, Op, Tensor
from .writer import render_xml, write_model

__all__ = ["ExtensionOp", "Model", "Op", "Tensor", "build_model", "parse_extension_ops", "render_xml",
           "write_ir_v11", "write_model"]


def _rt_info(meta: dict[str, str]) -> dict:
    """The network's meta data as rt_info: who wrote it, and the conversion parameters."""
    info: dict = {}
    params = {}
    for key, value in meta.items():
        if key == "generator":
            info["generator"] = value
        else:
            params[key[4:] if key.startswith("cli_") else key] = value
    if params:
        info["conversion_parameters"] = params
    return info


def build_model(network: Network, *, data_type: str = "FP32",
                extension_ops: dict[str, ExtensionOp] | None = None) -> tuple[Model, list[str]]:
    """The IR v11 model of `network` and the FP16 clipping warnings.

    data_type "FP16" stores the float constants as f16 (each followed by a Convert
    to f32, as OpenVINO's own converters do); float16 blobs are always stored so.
    """
    if data_type not in ("FP32", "FP16"):
        raise ValueError(f"data_type must be FP32 or FP16, not {data_type!r}")
    model = to_model(network, extension_ops)
    warnings = decompress_f16_constants(model, compress=data_type == "FP16")
    model.rt_info = _rt_info(network.meta)
    return model, warnings


def write_ir_v11(network: Network, xml_path, bin_path=None, *, data_type: str = "FP32",
                 extension_ops: dict[str, ExtensionOp] | None = None) -> list[str]:
    """Writes `network` as IR v11 (.xml + .bin, atomically); returns the warnings."""
    model, warnings = build_model(network, data_type=data_type, extension_ops=extension_ops)
    write_model(model, xml_path, bin_path)
    return warnings

"""IR v2 (.xml topology + .bin weights): model, reader, writer and attribute helpers.

Self-contained (numpy, defusedxml, stdlib only) so that inference daemons can load
IR without importing the converter. `ir.v11` writes the same Network as IR version
11 (opset operations) for today's OpenVINO runtime.
"""

from .attrs import as_bool, as_float, as_int, floats, fmt_value, ints
from .errors import IRError
from .model import CAFFE_DEFINITION_ATTR, PRECISION_DTYPES, Edge, Layer, Network, Port
from .reader import read_ir
from .validate import validate_network
from .writer import to_xml_string, write_ir

__all__ = [
    "IRError",
    "Port", "Layer", "Edge", "Network", "PRECISION_DTYPES", "CAFFE_DEFINITION_ATTR",
    "write_ir", "to_xml_string", "read_ir", "validate_network",
    "ints", "floats", "as_int", "as_float", "as_bool", "fmt_value",
]

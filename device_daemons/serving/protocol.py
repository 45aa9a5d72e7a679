"""An inference request and response of the protocol, the same whichever wire form
(REST JSON, REST binary, gRPC) carried them; the codecs fill and read these."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class InferRequest:
    model: str
    version: str  # "" : the newest loaded
    inputs: dict[str, np.ndarray]  # decoded with the datatype and shape the request declared
    outputs: list[str] | None = None  # names asked for; None: every output
    id: str = ""
    binary: dict[str, bool] = field(default_factory=dict)  # REST: per output, the binary extension
    binary_default: bool = False  # REST: "binary_data_output"
    raw: bool = True  # gRPC: answer with raw_output_contents (the request used raw_input_contents)


@dataclass
class InferResponse:
    model: str
    version: str
    outputs: dict[str, np.ndarray]
    id: str = ""

"""The contract of the inference daemons (CPU today, GPU next): what a request may
ask, checked the same way by the daemons and the client.
"""
from __future__ import annotations

import os

# The largest tensor (elements) a daemon computes or a client generates: 8 GiB of
# float32. An IR or a reshape may declare anything up to 2^64 per dim.
MAX_TENSOR_ELEMENTS = 1 << 31


def fast_lane_max_us() -> float:
    """A network measured to compute in less than this many microseconds (moving
    average) is served on the daemon's fast lane (Server lanes: no thread hand-off,
    spinning); longer work there would delay the other fast requests.
    MO_CORE_FAST_LANE_US changes it (0: no fast lane)."""
    return float(os.environ.get("MO_CORE_FAST_LANE_US", "500"))

"""The contract of the inference daemons (CPU today, GPU next): what a request may
ask, checked the same way by the daemons and the client.
"""
from __future__ import annotations

# The largest tensor (elements) a daemon computes or a client generates: 8 GiB of
# float32. An IR or a reshape may declare anything up to 2^64 per dim.
MAX_TENSOR_ELEMENTS = 1 << 31

# A network measured to compute in less than this (moving average) is served on
# the daemon's fast lane (Server lanes: no thread hand-off, spinning); longer work
# there would delay the other fast requests.
FAST_LANE_MAX_US = 500

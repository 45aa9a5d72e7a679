"""Pooling -> MaxPool / AvgPool with Caffe's output size and averaging divisor.

Caffe rounds the output size up and drops a last window that would start in the
end padding; the size is taken from the IR's output port and reached with floor
rounding and, where needed, a longer end padding (padding never wins a max).
Caffe's average divides by the window clipped to the padded image: with no
padding that is exclude-pad; when the windows stay inside the padding OpenVINO's
include-pad divisor is the full kernel, the same; otherwise the zero padding is
made explicit with a Pad so that exclude-pad counts it.
"""
from __future__ import annotations

from .base import Mapping, maps

def _end_pads(size, kernel, stride, pad, pad_end, out):
    """Per axis: the end padding that makes floor rounding give `out` windows."""
    result = []
    for n, k, s, pb, pe, o in zip(size, kernel, stride, pad, pad_end, out):
        if (n + pb + pe - k) // s + 1 == o:
            result.append(pe)
        else:
            result.append((o - 1) * s + k - n - pb)
    return result


@maps("Pooling")
def pooling(m: Mapping):
    a = m.attrs
    kernel, stride, pad, pad_end = a["kernel"], a["stride"], a["pad"], a["pad_end"]
    method, exclude_pad = a["pool-method"], a["exclude-pad"]
    n, c, *size = m.in_dims()
    out = m.out_dims()
    ends = _end_pads(size, kernel, stride, pad, pad_end, out[2:])
    if min(ends) < 0:
        raise a.error(f"output size {list(out[2:])} cannot come from input {size} with kernel {list(kernel)}, "
                      f"stride {list(stride)} and padding {list(pad)}")
    attrs = {"strides": stride, "pads_begin": pad, "pads_end": ends, "kernel": kernel, "rounding_type": "floor",
             "auto_pad": "explicit"}
    x = m.inputs[0]
    if method == "max":
        return [m.op("MaxPool", [x], out, attrs=attrs)]
    padded = max(pad) > 0 or max(pad_end) > 0
    if not exclude_pad and padded:
        if list(ends) == list(pad_end):
            return [m.op("AvgPool", [x], out, attrs={**attrs, "exclude-pad": False})]
        # the windows reach past the padding: pad explicitly, then count only that
        shape = (n, c, *(s + pb + pe for s, pb, pe in zip(size, pad, pad_end)))
        x = m.op("Pad", [x, m.ints([0, 0, *pad], "pads_begin"), m.ints([0, 0, *pad_end], "pads_end"),
                         m.const(0.0, "pad_value")],
                 shape, "padded", attrs={"pad_mode": "constant"})
        zeros = [0] * len(size)
        ends = _end_pads(shape[2:], kernel, stride, zeros, zeros, out[2:])
        attrs = {**attrs, "pads_begin": zeros, "pads_end": ends}
    return [m.op("AvgPool", [x], out, attrs={**attrs, "exclude-pad": True})]

"""The reference guide's custom layer example, Interp (DeepLab): a bilinear resize
to interp_param's height x width with corners aligned, as an OpenCV-style CPU
kernel for mo-core (`mo-core infer -l interp_kernel.py`, `ie.add_extension`)."""
import numpy as np


class InterpLayer:
    type = "Interp"

    def __init__(self, layer):
        self.out_h = int(layer.data["height"])
        self.out_w = int(layer.data["width"])

    def getMemoryShapes(self, inputs):
        n, c = inputs[0][0], inputs[0][1]
        return [(n, c, self.out_h, self.out_w)]

    @staticmethod
    def _axis(size_in, size_out):
        """Source coordinates with corners aligned: lower index, upper index, weight."""
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
        src = np.arange(size_out) * scale
        lo = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
        hi = np.minimum(lo + 1, size_in - 1)
        return lo, hi, (src - lo).astype(np.float32)

    def forward(self, inputs):
        x = inputs[0]
        y0, y1, wy = self._axis(x.shape[2], self.out_h)
        x0, x1, wx = self._axis(x.shape[3], self.out_w)
        rows = x[:, :, y0] * (1 - wy)[:, None] + x[:, :, y1] * wy[:, None]
        out = rows[:, :, :, x0] * (1 - wx) + rows[:, :, :, x1] * wx
        return [out.astype(np.float32)]

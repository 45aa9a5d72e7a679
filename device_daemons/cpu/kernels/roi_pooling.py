"""ROIPooling (Fast R-CNN max pooling over ROI bins) and PSROIPooling (R-FCN
position-sensitive average pooling). The second input holds ROIs
[batch_index, x1, y1, x2, y2] in image pixels, scaled by spatial_scale. A batch
index of -1 ends the list (a Proposal's marker after its last ROI): that row and
the ones after it pool to zeros, as OpenVINO does."""
from __future__ import annotations

import numpy as np

from .base import Kernel, register


def _c_round(v):
    """C's round(): halves away from zero."""
    v = np.asarray(v, np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


class _RoiBase(Kernel):
    def _rois(self, rois):
        rois = rois.reshape(-1, rois.shape[-1]) if rois.ndim != 2 else rois
        if rois.shape[-1] != 5:
            raise self.error(f"ROIs must have 5 values [batch, x1, y1, x2, y2], got shape {list(rois.shape)}")
        return rois

    @staticmethod
    def _real(rois) -> int:
        """How many ROIs come before the end marker (batch index -1)."""
        end = np.flatnonzero(rois[:, 0] == -1)
        return int(end[0]) if end.size else len(rois)

    def _check(self, input_shapes):
        self.expect_inputs(input_shapes, 2)
        if len(input_shapes[0]) != 4:
            raise self.error(f"needs a 4-D feature map, got {list(input_shapes[0])}")
        rois = input_shapes[1]
        if rois[-1] != 5 and not (len(rois) == 4 and rois[1] == 5):
            raise self.error(f"ROIs must be [R, 5], got {list(rois)}")
        return rois[0]

    def _batch_index(self, value, n):
        b = int(value)
        if not 0 <= b < n:
            raise self.error(f"ROI batch index {b} is out of range for a batch of {n}")
        return b


@register("ROIPooling")
class ROIPooling(_RoiBase):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.pooled_h, self.pooled_w, self.spatial_scale = a["pooled_h"], a["pooled_w"], a["spatial_scale"]
        self.method = a["method"]
        self._bilinear = roi_bilinear

    def accelerate(self):
        """Its C variant (native/roi_bilinear.c), for the bilinear method."""
        if self.method != "bilinear":
            return None
        from ..native import roi_bilinear as native
        native.load()
        self._bilinear = native.roi_bilinear
        return "native"

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        r = self._check(input_shapes)
        return [(r, input_shapes[0][1], self.pooled_h, self.pooled_w)]

    def forward(self, inputs):
        if self.method == "bilinear":
            rois = self._rois(inputs[1])
            return [self._bilinear(inputs[0], rois, self._real(rois), self.pooled_h, self.pooled_w,
                                   self._batch_index)]
        feat, rois = inputs[0], self._rois(inputs[1])
        n, c, h, w = feat.shape
        ph_n, pw_n = self.pooled_h, self.pooled_w
        out = np.zeros((len(rois), c, ph_n, pw_n), np.float32)
        scaled = _c_round(rois[:, 1:].astype(np.float64) * np.float32(self.spatial_scale))
        for r in range(self._real(rois)):
            b = self._batch_index(rois[r, 0], n)
            x1, y1, x2, y2 = (int(v) for v in scaled[r])
            roi_h = max(y2 - y1 + 1, 1)
            roi_w = max(x2 - x1 + 1, 1)
            bin_h = np.float32(roi_h) / np.float32(ph_n)
            bin_w = np.float32(roi_w) / np.float32(pw_n)
            hs = np.clip(np.floor(np.arange(ph_n, dtype=np.float32) * bin_h).astype(int) + y1, 0, h)
            he = np.clip(np.ceil(np.arange(1, ph_n + 1, dtype=np.float32) * bin_h).astype(int) + y1, 0, h)
            ws = np.clip(np.floor(np.arange(pw_n, dtype=np.float32) * bin_w).astype(int) + x1, 0, w)
            we = np.clip(np.ceil(np.arange(1, pw_n + 1, dtype=np.float32) * bin_w).astype(int) + x1, 0, w)
            plane = feat[b]
            for i in range(ph_n):
                if he[i] <= hs[i]:
                    continue
                rows = plane[:, hs[i]:he[i]].max(axis=1)  # (c, w)
                for j in range(pw_n):
                    if we[j] > ws[j]:
                        out[r, :, i, j] = rows[:, ws[j]:we[j]].max(axis=1)
        return [out]


def roi_bilinear(feat, rois, count, pooled_h, pooled_w, batch_index):
    """ROIPooling method=bilinear (OpenVINO's; TensorFlow's crop_and_resize): ROIs
    [batch, x1, y1, x2, y2] normalized to [0, 1]; the output grid spans the ROI corner
    to corner over the map's H - 1 x W - 1 pixel distances (the centre for a 1-pixel
    side); samples outside the map are 0; rows from `count` on (the end marker) are 0.
    In float32 on the map itself, as TensorFlow computes it. A map small next to the
    output (Faster R-CNN's 4x5 crops to 14x14) is resampled by two matrix products per
    ROI, a larger one by gathering the four neighbours of each output pixel."""
    n, c, h, w = feat.shape
    out = np.zeros((len(rois), c, pooled_h, pooled_w), np.float32)
    feat = np.asarray(feat, np.float32)
    by_products = h * pooled_w * (w + pooled_h) < 10 * pooled_h * pooled_w  # (element operations per channel)
    for r in range(count):
        plane = feat[batch_index(rois[r, 0], n)]
        x1, y1, x2, y2 = (float(v) for v in rois[r, 1:])
        ys, xs = _grid(y1, y2, h, pooled_h), _grid(x1, x2, w, pooled_w)
        if by_products:
            # rows: (c*h, w) @ (w, pw); then columns: (ph, h) @ (h, c*pw)
            across = (plane.reshape(c * h, w) @ _lerp_matrix(xs, w).T).reshape(c, h, pooled_w)
            down = _lerp_matrix(ys, h) @ across.transpose(1, 0, 2).reshape(h, c * pooled_w)
            out[r] = down.reshape(pooled_h, c, pooled_w).transpose(1, 0, 2)
            continue
        y_ok = (ys >= 0) & (ys <= h - 1)
        x_ok = (xs >= 0) & (xs <= w - 1)
        top, left = np.floor(ys).astype(int), np.floor(xs).astype(int)
        bottom, right = np.ceil(ys).astype(int), np.ceil(xs).astype(int)
        dy, dx = (ys - top).astype(np.float32)[:, None], (xs - left).astype(np.float32)[None, :]
        top, bottom = np.clip(top, 0, h - 1)[:, None], np.clip(bottom, 0, h - 1)[:, None]
        left, right = np.clip(left, 0, w - 1)[None, :], np.clip(right, 0, w - 1)[None, :]
        tl, tr = plane[:, top, left], plane[:, top, right]  # (c, pooled_h, pooled_w) each, one gather
        bl, br = plane[:, bottom, left], plane[:, bottom, right]
        upper = tl + (tr - tl) * dx
        lower = bl + (br - bl) * dx
        value = upper + (lower - upper) * dy
        out[r] = np.where(y_ok[:, None] & x_ok[None, :], value, np.float32(0))
    return out


def _grid(start, end, size, pooled):
    """The sample positions of one ROI side, in map pixels."""
    if pooled > 1:
        return start * (size - 1) + np.arange(pooled) * ((end - start) * (size - 1) / (pooled - 1))
    return np.array([0.5 * (start + end) * (size - 1)])


def _lerp_matrix(pos, size) -> np.ndarray:
    """(len(pos), size) float32: row i takes pos[i] from a line of `size` pixels by linear
    interpolation of its two neighbours; zero where pos is outside the line."""
    m = np.zeros((len(pos), size), np.float32)
    ok = np.flatnonzero((pos >= 0) & (pos <= size - 1))
    low = np.floor(pos[ok]).astype(int)
    d = (pos[ok] - low).astype(np.float32)
    np.add.at(m, (ok, low), 1 - d)
    np.add.at(m, (ok, np.minimum(low + 1, size - 1)), d)  # (d is 0 where pos is a whole pixel)
    return m


@register("PSROIPooling")
class PSROIPooling(_RoiBase):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.output_dim, self.group_size, self.spatial_scale = a["output_dim"], a["group_size"], a["spatial_scale"]
        if a["mode"] != "average":
            raise self.error(f"mode {a['mode']!r} is not supported; the CPU plugin implements average")

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        r = self._check(input_shapes)
        g = self.group_size
        if input_shapes[0][1] != self.output_dim * g * g:
            raise self.error(f"input has {input_shapes[0][1]} channels; output_dim {self.output_dim} x group_size "
                             f"{g}^2 = {self.output_dim * g * g} are needed")
        return [(r, self.output_dim, g, g)]

    def forward(self, inputs):
        feat, rois = inputs[0], self._rois(inputs[1])
        n, c, h, w = feat.shape
        g, od = self.group_size, self.output_dim
        scale = np.float32(self.spatial_scale)
        out = np.zeros((len(rois), od, g, g), np.float32)
        f32 = np.float32
        # channel of output (ctop, gh, gw) is (ctop * g + gh) * g + gw
        chan = (np.arange(od)[:, None, None] * g + np.arange(g)[None, :, None]) * g + np.arange(g)[None, None, :]
        for r in range(self._real(rois)):
            b = self._batch_index(rois[r, 0], n)
            x1 = f32(_c_round(rois[r, 1])) * scale
            y1 = f32(_c_round(rois[r, 2])) * scale
            x2 = f32(_c_round(rois[r, 3]) + 1.0) * scale
            y2 = f32(_c_round(rois[r, 4]) + 1.0) * scale
            roi_w = max(x2 - x1, f32(0.1))
            roi_h = max(y2 - y1, f32(0.1))
            bin_h, bin_w = f32(roi_h / f32(g)), f32(roi_w / f32(g))
            for gh in range(g):
                hs = min(max(int(np.floor(f32(gh) * bin_h + y1)), 0), h)
                he = min(max(int(np.ceil(f32(gh + 1) * bin_h + y1)), 0), h)
                for gw in range(g):
                    ws = min(max(int(np.floor(f32(gw) * bin_w + x1)), 0), w)
                    we = min(max(int(np.ceil(f32(gw + 1) * bin_w + x1)), 0), w)
                    if he <= hs or we <= ws:
                        continue
                    region = feat[b, chan[:, gh, gw], hs:he, ws:we]
                    out[r, :, gh, gw] = region.reshape(od, -1).sum(axis=1) / f32((he - hs) * (we - ws))
        return [out]

"""Kernels pycaffe does not have (or cannot run on the CPU), against independent
references: plain-loop numpy implementations of the catalog / Caffe semantics and
OpenCV's resize. The IRs are built directly with ir.Network + write_ir.

REFERENCE_CASES (one-layer IRs with their expected outputs) are shared with the
IR v11 tests, which run the same cases on OpenVINO."""
from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import pytest

from tests.cpu.cpu_helpers import assert_close, caffe_case, import_caffe, run_single

# the parity tests run on both CPU backends (tests/cpu/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_backend")

RNG = np.random.default_rng(7)


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@dataclass
class RefCase:
    """One layer on inputs in0, in1, ... and what it must output."""
    layer_type: str
    data: dict
    inputs: list
    out_shapes: list
    expected: list
    rtol: float | None = None     # None: exactly equal
    blobs: dict | None = None

    def check(self, outputs):
        assert len(outputs) == len(self.expected)
        for out, want in zip(outputs, self.expected):
            if self.rtol is None:
                np.testing.assert_array_equal(out, want)
            else:
                assert_close(out, want, self.rtol, self.layer_type)


# --- RegionYolo / ReorgYolo -------------------------------------------------------------
def region_yolo_ref(x, coords, classes, regions, do_softmax):
    b_n, c, h, w = x.shape
    flat = x.astype(np.float64).ravel().copy()
    hw = h * w
    entry = coords + 1 + classes
    logistic = lambda v: 1.0 / (1.0 + math.exp(-v))  # noqa: E731
    for b in range(b_n):
        for n in range(regions):
            base = b * c * hw + n * entry * hw
            for i in range(2 * hw):
                flat[base + i] = logistic(flat[base + i])
            for i in range(hw):
                flat[base + coords * hw + i] = logistic(flat[base + coords * hw + i])
            for s in range(hw):
                idx = [base + (coords + 1 + k) * hw + s for k in range(classes)]
                vals = [flat[i] for i in idx]
                if do_softmax:
                    m = max(vals)
                    e = [math.exp(v - m) for v in vals]
                    vals = [v / sum(e) for v in e]
                else:
                    vals = [logistic(v) for v in vals]
                for i, v in zip(idx, vals):
                    flat[i] = v
    return flat


def region_yolo_case(do_softmax) -> RefCase:
    coords, classes, num = 4, 3, 3
    mask = [0, 2] if not do_softmax else []
    regions = num if do_softmax else len(mask)
    x = rand(2, regions * (coords + 1 + classes), 3, 4, scale=2.0)
    data = {"coords": coords, "classes": classes, "num": num, "do_softmax": do_softmax, "axis": 1, "end_axis": 3,
            "anchors": "1,2,3,4,5,6"}
    if mask:
        data["mask"] = ",".join(map(str, mask))
    out_shape = (2, x[0].size) if do_softmax else x.shape
    ref = region_yolo_ref(x, coords, classes, regions, do_softmax).reshape(out_shape)
    return RefCase("RegionYolo", data, [x], [out_shape], [ref], 1e-5)


def reorg_ref(x, stride):
    n, c, h, w = x.shape
    oc, oh, ow = c * stride * stride, h // stride, w // stride
    out = np.zeros((n, oc, oh, ow), np.float32)
    for b in range(n):
        for k in range(oc):
            c_in, offset = k % c, k // c
            dy, dx = offset // stride, offset % stride
            for y in range(oh):
                for xx in range(ow):
                    out[b, k, y, xx] = x[b, c_in, y * stride + dy, xx * stride + dx]
    return out


def reorg_yolo_case() -> RefCase:
    x = rand(2, 3, 6, 4)
    return RefCase("ReorgYolo", {"stride": 2}, [x], [(2, 12, 3, 2)], [reorg_ref(x, 2)])


# --- CTCGreedyDecoder --------------------------------------------------------------------
def ctc_ref(probs, seq, merge):
    t_len, n, c = probs.shape
    out = np.full((n, t_len), -1.0, np.float32)
    for b in range(n):
        prev, pos = -1, 0
        for t in range(t_len):
            if seq[t, b] == 0:
                break
            k = int(np.argmax(probs[t, b]))
            if k != c - 1 and not (merge and k == prev):
                out[b, pos] = k
                pos += 1
            prev = k
    return out.reshape(n, t_len, 1, 1)


def ctc_case(merge) -> RefCase:
    t_len, n, c = 12, 3, 4
    # few classes and sticky steps so repeats and blanks occur
    labels = RNG.integers(0, c, (t_len, n))
    labels[1::3] = labels[0::3][:len(labels[1::3])]
    probs = rand(t_len, n, c, scale=0.1)
    probs[np.arange(t_len)[:, None], np.arange(n)[None, :], labels] += 1.0
    seq = np.ones((t_len, n), np.float32)
    seq[8:, 1] = 0
    seq[5:, 2] = 0
    return RefCase("CTCGreedyDecoder", {"ctc_merge_repeated": merge}, [probs, seq], [(n, t_len, 1, 1)],
                   [ctc_ref(probs, seq, merge)])


# --- GRN, Clamp, BatchNormalization -----------------------------------------------------
def grn_case() -> RefCase:
    x = rand(2, 5, 3, 4)
    ref = np.empty_like(x)
    for b in range(2):
        for i in range(3):
            for j in range(4):
                v = x[b, :, i, j].astype(np.float64)
                ref[b, :, i, j] = v / math.sqrt(float(np.dot(v, v)) + 0.5)
    return RefCase("GRN", {"bias": 0.5}, [x], [x.shape], [ref], 1e-5)


def clamp_case() -> RefCase:
    x = rand(2, 3, 4, 5, scale=3.0)
    ref = np.array([[min(max(v, -1.5), 2.0) for v in row] for row in x.reshape(-1, 5)]).reshape(x.shape)
    return RefCase("Clamp", {"min": -1.5, "max": 2}, [x], [x.shape], [ref.astype(np.float32)])


@pytest.mark.parametrize("names", [("mean", "variance"), ("biases", "weights")], ids=["named", "legacy_names"])
def test_batch_normalization_matches_pycaffe(tmp_path, names):
    """The IR type BatchNormalization (IRs of other tools) against pycaffe's BatchNorm."""
    c = caffe_case(tmp_path, 'layer { name: "bn" type: "BatchNorm" bottom: "data" top: "out" '
                             'batch_norm_param { use_global_stats: true eps: 0.002 } }\n',
                   {"data": (2, 4, 3, 3)}, positive=("bn",))
    mean, var, factor = (b.data.copy() for b in c.net.params["bn"])
    s = 1.0 / float(factor.ravel()[0])
    c.net.blobs["data"].data[...] = c.inputs["data"]
    c.net.forward()
    ref = c.net.blobs["out"].data.copy()
    (out,), _ = run_single(tmp_path, "BatchNormalization", {"epsilon": 0.002}, [c.inputs["data"]],
                           [(2, 4, 3, 3)], blobs={names[0]: mean * s, names[1]: var * s})
    assert_close(out, ref, 1e-4, "BatchNormalization")


# --- Resample (OpenCV reference) ----------------------------------------------------------
def cv_resize(x, oh, ow, interp):
    n, c = x.shape[:2]
    return np.stack([np.stack([cv2.resize(x[b, k], (ow, oh), interpolation=interp) for k in range(c)])
                     for b in range(n)])


def resample_case(kind, interp, size, data) -> RefCase:
    x = rand(2, 3, 5, 7)
    return RefCase("Resample", dict(data, type=kind, antialias=0), [x], [(2, 3) + size],
                   [cv_resize(x, size[0], size[1], interp)], 1e-5)


# --- PriorBoxClustered ---------------------------------------------------------------------
def prior_clustered_ref(fh, fw, img_h, img_w, widths, heights, step, offset, clip, variance):
    boxes, vars_ = [], []
    for h in range(fh):
        for w in range(fw):
            cx, cy = (w + offset) * step[1], (h + offset) * step[0]
            for bw, bh in zip(widths, heights):
                box = [(cx - bw / 2) / img_w, (cy - bh / 2) / img_h, (cx + bw / 2) / img_w, (cy + bh / 2) / img_h]
                if clip:
                    box = [min(max(v, 0.0), 1.0) for v in box]
                boxes += box
                vars_ += variance
    return np.array([[boxes, vars_]], np.float32)


def prior_box_clustered_case(data, step) -> RefCase:
    feat, image = rand(1, 2, 4, 6), rand(1, 3, 32, 48)
    n = len(data["width"].split(","))
    img_h, img_w = data.get("img_h", 32), data.get("img_w", 48)
    step = step or (img_h / 4, img_w / 6)
    variance = [float(v) for v in data["variance"].split(",")]
    ref = prior_clustered_ref(4, 6, img_h, img_w, [float(v) for v in data["width"].split(",")],
                              [float(v) for v in data["height"].split(",")], step, data["offset"], data["clip"],
                              variance * 4 if len(variance) == 1 else variance)
    return RefCase("PriorBoxClustered", data, [feat, image], [(1, 2, 4 * 6 * n * 4)], [ref], 1e-6)


# --- ROIPooling / PSROIPooling ------------------------------------------------------------
def c_round(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def roi_pool_ref(feat, rois, ph_n, pw_n, scale):
    n, c, h, w = feat.shape
    out = np.zeros((len(rois), c, ph_n, pw_n), np.float32)
    for r, roi in enumerate(rois):
        b = int(roi[0])
        x1, y1, x2, y2 = (c_round(float(v) * scale) for v in roi[1:])
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bh, bw = rh / ph_n, rw / pw_n
        for i in range(ph_n):
            for j in range(pw_n):
                hs = min(max(math.floor(i * bh) + y1, 0), h)
                he = min(max(math.ceil((i + 1) * bh) + y1, 0), h)
                ws = min(max(math.floor(j * bw) + x1, 0), w)
                we = min(max(math.ceil((j + 1) * bw) + x1, 0), w)
                for k in range(c):
                    if he > hs and we > ws:
                        out[r, k, i, j] = max(feat[b, k, y, x] for y in range(hs, he) for x in range(ws, we))
    return out


def roi_pooling_case() -> RefCase:
    feat = rand(2, 3, 12, 10)
    rois = np.array([[0, 0, 0, 79, 95], [1, 10.4, 20, 40, 60], [0, 33, 5, 34, 6], [1, 60, 70, 200, 300],
                     [0, 2, 2, 17.5, 30]], np.float32)
    return RefCase("ROIPooling", {"pooled_h": 3, "pooled_w": 4, "spatial_scale": 0.125}, [feat, rois],
                   [(5, 3, 3, 4)], [roi_pool_ref(feat, rois, 3, 4, 0.125)], 1e-6)


def psroi_ref(feat, rois, od, g, scale):
    n, c, h, w = feat.shape
    out = np.zeros((len(rois), od, g, g), np.float32)
    for r, roi in enumerate(rois):
        b = int(roi[0])
        x1, y1 = c_round(float(roi[1])) * scale, c_round(float(roi[2])) * scale
        x2, y2 = (c_round(float(roi[3])) + 1) * scale, (c_round(float(roi[4])) + 1) * scale
        rw, rh = max(x2 - x1, 0.1), max(y2 - y1, 0.1)
        bh, bw = rh / g, rw / g
        for ct in range(od):
            for i in range(g):
                for j in range(g):
                    hs = min(max(math.floor(i * bh + y1), 0), h)
                    he = min(max(math.ceil((i + 1) * bh + y1), 0), h)
                    ws = min(max(math.floor(j * bw + x1), 0), w)
                    we = min(max(math.ceil((j + 1) * bw + x1), 0), w)
                    if he <= hs or we <= ws:
                        continue
                    ch = (ct * g + i) * g + j
                    vals = [feat[b, ch, y, x] for y in range(hs, he) for x in range(ws, we)]
                    out[r, ct, i, j] = sum(vals) / len(vals)
    return out


def psroi_pooling_case() -> RefCase:
    od, g = 2, 3
    feat = rand(2, od * g * g, 9, 11)
    rois = np.array([[0, 0, 0, 60, 50], [1, 8, 16, 40, 70], [1, 30, 30, 31, 31], [0, 50, 40, 200, 100]],
                    np.float32)
    return RefCase("PSROIPooling", {"output_dim": od, "group_size": g, "spatial_scale": 0.125}, [feat, rois],
                   [(4, od, g, g)], [psroi_ref(feat, rois, od, g, 0.125)], 1e-5)


# --- SimplerNMS ----------------------------------------------------------------------------
def simpler_nms_anchors(scales):
    base = [0.0, 0.0, 15.0, 15.0]
    w, h = base[2] - base[0] + 1, base[3] - base[1] + 1
    cx, cy = base[0] + 0.5 * (w - 1), base[1] + 0.5 * (h - 1)
    anchors = []
    for ratio in (0.5, 1.0, 2.0):
        rw = c_round(math.sqrt(w * h / ratio))
        rh = c_round(rw * ratio)
        for s in scales:
            sw, sh = rw * s, rh * s
            anchors.append([cx - 0.5 * (sw - 1), cy - 0.5 * (sh - 1), cx + 0.5 * (sw - 1), cy + 0.5 * (sh - 1)])
    return anchors


def simpler_nms_ref(cls, delta, info, scales, feat_stride, min_size, pre, post, iou):
    anchors = simpler_nms_anchors(scales)
    a = len(anchors)
    _, _, h, w = cls.shape
    img_h, img_w, img_s = int(info[0]), int(info[1]), int(info[2])
    props = []
    for y in range(h):
        for x in range(w):
            for k in range(a):
                x0, y0, x1, y1 = anchors[k]
                aw, ah = x1 - x0 + 1, y1 - y0 + 1
                ctr_x, ctr_y = x0 + 0.5 * aw + x * feat_stride, y0 + 0.5 * ah + y * feat_stride
                dx, dy, dw, dh = (float(delta[0, k * 4 + i, y, x]) for i in range(4))
                px, py = dx * aw + ctr_x, dy * ah + ctr_y
                hw, hh = math.exp(dw) * aw * 0.5, math.exp(dh) * ah * 0.5
                box = [min(max(px - hw, 0), img_w - 1), min(max(py - hh, 0), img_h - 1),
                       min(max(px + hw, 0), img_w - 1), min(max(py + hh, 0), img_h - 1)]
                if int(box[2] - box[0]) + 1 >= min_size * img_s and int(box[3] - box[1]) + 1 >= min_size * img_s:
                    props.append((float(cls[0, a + k, y, x]), len(props), box))
    props.sort(key=lambda p: (-p[0], -p[1]))
    props = props[:pre]

    def area(b):
        return max(0.0, b[3] - b[1] + 1) * max(0.0, b[2] - b[0] + 1)
    kept = []
    for score, _, box in props:
        if score <= 0:
            continue
        ok = True
        for k in kept:
            inter = area([max(box[0], k[0]), max(box[1], k[1]), min(box[2], k[2]), min(box[3], k[3])])
            if inter > iou * (area(k) + area(box) - inter):
                ok = False
                break
        if ok:
            kept.append(box)
            if len(kept) == post:
                break
    out = np.zeros((post, 5), np.float32)
    for i, box in enumerate(kept):
        out[i, 1:] = box
    return out


def test_simpler_nms(tmp_path):
    scales = [1.0, 2.0, 4.0]
    h, w = 5, 6
    cls = RNG.uniform(0.01, 1, (1, 18, h, w)).astype(np.float32)
    delta = rand(1, 36, h, w, scale=0.3)
    info = np.array([[h * 16, w * 16, 1]], np.float32)
    data = {"cls_threshold": 0.5, "iou_threshold": 0.6, "min_bbox_size": 12, "feat_stride": 16,
            "pre_nms_topn": 150, "post_nms_topn": 30, "scale": "1,2,4"}
    (out,), _ = run_single(tmp_path, "SimplerNMS", data, [cls, delta, info], [(30, 5)])
    ref = simpler_nms_ref(cls, delta, info[0], scales, 16, 12, 150, 30, 0.6)
    assert np.count_nonzero(ref[:, 3]) > 5
    assert_close(out, ref, 1e-5, "SimplerNMS")


# --- Memory ----------------------------------------------------------------------------------
def memory_net(tmp_path):
    from ir import Edge, Layer, Network, Port, read_ir, write_ir
    s = (1, 4)
    layers = [
        Layer(0, "in0", "Input", outputs=[Port(0, s)]),
        Layer(1, "mem_read", "Memory", data={"id": "r_1-3", "index": "1", "size": "2"}, outputs=[Port(0, s)]),
        Layer(2, "acc", "Eltwise", data={"operation": "sum"}, inputs=[Port(0, s), Port(1, s)],
              outputs=[Port(2, s)]),
        Layer(3, "mem_write", "Memory", data={"id": "r_1-3", "index": "0", "size": "2"}, inputs=[Port(0, s)]),
        Layer(4, "out", "Power", data={"power": "1", "scale": "2", "shift": "0"}, inputs=[Port(0, s)],
              outputs=[Port(1, s)]),
    ]
    # the writer comes first in the file: the plan must still read before it writes
    layers = [layers[0], layers[3], layers[2], layers[1], layers[4]]
    edges = [Edge(0, 0, 2, 0), Edge(1, 0, 2, 1), Edge(2, 2, 3, 0), Edge(2, 2, 4, 0)]
    write_ir(Network("mem", layers, edges), tmp_path / "mem.xml")
    return read_ir(tmp_path / "mem.xml")


def test_memory_keeps_state_between_calls(tmp_path):
    from device_daemons.cpu import ExecutionPlan
    plan = ExecutionPlan(memory_net(tmp_path))
    xs = [rand(1, 4) for _ in range(3)]
    total = np.zeros((1, 4), np.float32)
    for x in xs:
        total = total + x
        out = plan.infer({"in0": x})
        assert sorted(out) == ["out"]
        np.testing.assert_allclose(out["out"], 2 * total, rtol=1e-6)
    plan.reset_state()
    np.testing.assert_allclose(plan.infer({"in0": xs[0]})["out"], 2 * xs[0], rtol=1e-6)
    plan.reshape({"in0": (3, 4)})  # a new batch starts from zeros again
    x = rand(3, 4)
    np.testing.assert_allclose(plan.infer({"in0": x})["out"], 2 * x, rtol=1e-6)
    np.testing.assert_allclose(plan.infer({"in0": x})["out"], 4 * x, rtol=1e-6)


# --- shape ops only the catalog has ----------------------------------------------------------
def crop_dim_case() -> RefCase:
    x = rand(2, 3, 10, 9)
    return RefCase("Crop", {"axis": "2,3", "offset": "1,2", "dim": "6,5"}, [x], [(2, 3, 6, 5)], [x[:, :, 1:7, 2:7]])


def crop_begin_end_case() -> RefCase:
    x = rand(2, 3, 10, 9)
    return RefCase("Crop", {"axis": "1,3", "crop_begin": "1,3", "crop_end": "0,2"}, [x], [(2, 2, 10, 4)],
                   [x[:, 1:, :, 3:7]])


def flatten_case() -> RefCase:
    x = rand(2, 3, 4, 5)
    return RefCase("Flatten", {"axis": 1, "end_axis": 2}, [x], [(2, 12, 5)], [x.reshape(2, 12, 5)])


def split_case() -> RefCase:
    x = rand(2, 3, 4, 5)
    return RefCase("Split", {"axis": 1}, [x], [(2, 1, 4, 5), (2, 2, 4, 5)], [x[:, :1], x[:, 1:]])


# id -> builder of the case (called when the test runs)
# --- 3-D Convolution / Deconvolution / Pooling (NCDHW volumes) ----------------------------
def volume_window(size, kernel, stride, pad, pad_end, ceil=False, dilation=(1, 1, 1)):
    """Output sizes: floor, or Caffe's ceil (a last window starting past the image and its begin padding
    dropped)."""
    out = []
    for n, k, s, p, pe, d in zip(size, kernel, stride, pad, pad_end, dilation):
        span = n + p + pe - (d * (k - 1) + 1)
        o = (-(-span // s) if ceil else span // s) + 1
        if ceil and any(pad) and (o - 1) * s >= n + p:
            o -= 1
        out.append(o)
    return out


def conv3d_ref(x, w, b, stride, pad, pad_end, dilation, group):
    n, c, *size = x.shape
    o = w.shape[0]
    out = volume_window(size, w.shape[2:], stride, pad, pad_end, dilation=dilation)
    xp = np.zeros((n, c, *(s + p + pe + 8 for s, p, pe in zip(size, pad, pad_end))))
    xp[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1], pad[2]:pad[2] + size[2]] = x
    y = np.zeros((n, o, *out))
    cg, og = c // group, o // group
    for idx in np.ndindex(*out):
        starts = [i * s for i, s in zip(idx, stride)]
        for g in range(group):
            for t in np.ndindex(*w.shape[2:]):
                at = tuple(st + tt * d for st, tt, d in zip(starts, t, dilation))
                y[(slice(None), slice(g * og, (g + 1) * og), *idx)] += (
                    xp[(slice(None), slice(g * cg, (g + 1) * cg), *at)] @ w[(slice(g * og, (g + 1) * og),
                                                                              slice(None), *t)].T)
    return (y + b.reshape(1, -1, 1, 1, 1)).astype(np.float32)


def deconv3d_ref(x, w, b, stride, pad, pad_end, group, output):
    """Caffe's deconvolution: each input value times the (C_in, O/g, kd, kh, kw) kernel added at i*stride."""
    n, c, *size = x.shape
    k = w.shape[2:]
    full = [s * (i - 1) + kk for i, s, kk in zip(size, stride, k)]
    y = np.zeros((n, output, *full))
    cg, og = c // group, output // group
    for ci in range(c):
        g = ci // cg
        for idx in np.ndindex(*size):
            for t in np.ndindex(*k):
                at = tuple(i * s + tt for i, s, tt in zip(idx, stride, t))
                y[(slice(None), slice(g * og, (g + 1) * og), *at)] += np.outer(x[(slice(None), ci, *idx)],
                                                                                w[(ci, slice(None), *t)])
    crop = tuple(slice(p, f - pe) for p, f, pe in zip(pad, full, pad_end))
    return (y[(slice(None), slice(None), *crop)] + b.reshape(1, -1, 1, 1, 1)).astype(np.float32)


def pool3d_ref(x, kernel, stride, pad, pad_end, ceil, method, exclude_pad):
    n, c, *size = x.shape
    out = volume_window(size, kernel, stride, pad, pad_end, ceil)
    y = np.zeros((n, c, *out))
    for idx in np.ndindex(*out):
        start = [i * s - p for i, s, p in zip(idx, stride, pad)]
        end = [min(st + k, sz + pe) for st, k, sz, pe in zip(start, kernel, size, pad_end)]
        inside = tuple(slice(max(st, 0), min(e, sz)) for st, e, sz in zip(start, end, size))
        region = x[(slice(None), slice(None), *inside)].reshape(n, c, -1)
        if method == "max":
            y[(slice(None), slice(None), *idx)] = region.max(axis=2)
        else:
            count = np.prod([sl.stop - sl.start for sl in inside] if exclude_pad else
                            [e - st for st, e in zip(start, end)])
            y[(slice(None), slice(None), *idx)] = region.sum(axis=2, dtype=np.float64) / count
    return y.astype(np.float32)


def _lists(**attrs):
    return {name: ",".join(str(v) for v in value) for name, value in attrs.items()}


def conv3d_case() -> RefCase:
    x, w, b = rand(1, 4, 5, 7, 6), rand(6, 2, 2, 3, 2), rand(6)
    stride, pad, pad_end, dilation = (1, 2, 1), (1, 1, 0), (0, 1, 1), (2, 1, 1)
    y = conv3d_ref(x.astype(np.float64), w.astype(np.float64), b, stride, pad, pad_end, dilation, 2)
    data = {**_lists(kernel=(2, 3, 2), strides=stride, pads_begin=pad, pads_end=pad_end, dilations=dilation),
            "group": 2, "output": 6}
    return RefCase("Convolution", data, [x], [y.shape], [y], rtol=1e-5, blobs={"weights": w, "biases": b})


def deconv3d_case() -> RefCase:
    x, w, b = rand(1, 4, 3, 4, 3), rand(4, 3, 3, 2, 3), rand(6)
    stride, pad, pad_end = (2, 1, 2), (1, 0, 1), (0, 1, 1)
    y = deconv3d_ref(x.astype(np.float64), w.astype(np.float64), b, stride, pad, pad_end, 2, 6)
    data = {**_lists(kernel=(3, 2, 3), strides=stride, pads_begin=pad, pads_end=pad_end), "group": 2, "output": 6}
    return RefCase("Deconvolution", data, [x], [y.shape], [y], rtol=1e-5, blobs={"weights": w, "biases": b})


def pool3d_case(kernel, stride, pad, pad_end, rounding, method, exclude_pad) -> RefCase:
    x = rand(2, 3, 5, 6, 7)
    y = pool3d_ref(x, kernel, stride, pad, pad_end, rounding == "ceil", method, exclude_pad)
    data = {**_lists(kernel=kernel, strides=stride, pads_begin=pad, pads_end=pad_end), "pool-method": method,
            "rounding_type": rounding, "exclude-pad": "true" if exclude_pad else "false"}
    return RefCase("Pooling", data, [x], [y.shape], [y], rtol=1e-6)


REFERENCE_CASES = {
    "region_yolo_v2_softmax": lambda: region_yolo_case(1),
    "region_yolo_v3_mask": lambda: region_yolo_case(0),
    "reorg_yolo": reorg_yolo_case,
    "ctc_greedy_decoder_merge": lambda: ctc_case(1),
    "ctc_greedy_decoder_no_merge": lambda: ctc_case(0),
    "grn": grn_case,
    "clamp": clamp_case,
    "resample_nearest_x2": lambda: resample_case("caffe.ResampleParameter.NEAREST", cv2.INTER_NEAREST, (10, 14),
                                                 {"factor": 2}),
    "resample_nearest_size": lambda: resample_case("caffe.ResampleParameter.NEAREST", cv2.INTER_NEAREST, (7, 9),
                                                   {"factor": 0, "height": 7, "width": 9}),
    "resample_linear_x2": lambda: resample_case("caffe.ResampleParameter.LINEAR", cv2.INTER_LINEAR, (10, 14),
                                                {"factor": 2}),
    "resample_linear_size": lambda: resample_case("caffe.ResampleParameter.LINEAR", cv2.INTER_LINEAR, (13, 4),
                                                  {"factor": 0, "height": 13, "width": 4}),
    "prior_box_clustered_from_image": lambda: prior_box_clustered_case(
        {"width": "10,20.5,4", "height": "8,12,30", "clip": 0, "offset": 0.5, "variance": "0.1,0.1,0.2,0.2"}, None),
    "prior_box_clustered_step_clip": lambda: prior_box_clustered_case(
        {"width": "30,6", "height": "14,40", "clip": 1, "offset": 0.25, "step": 7, "variance": "0.1"}, (7, 7)),
    "prior_box_clustered_img_hw_step_hw": lambda: prior_box_clustered_case(
        {"width": "9", "height": "5", "clip": 1, "offset": 0.5, "step_h": 6, "step_w": 5, "img_h": 40, "img_w": 36,
         "variance": "0.1,0.2,0.3,0.4"}, (6, 5)),
    "roi_pooling": roi_pooling_case,
    "psroi_pooling": psroi_pooling_case,
    "crop_axis_offset_dim": crop_dim_case,
    "crop_begin_end": crop_begin_end_case,
    "flatten": flatten_case,
    "split": split_case,
    "convolution_3d_group_dilation": conv3d_case,
    "deconvolution_3d_group": deconv3d_case,
    "pooling_3d_max_ceil": lambda: pool3d_case((2, 3, 3), (2, 2, 2), (1, 1, 0), (1, 1, 0), "ceil", "max", False),
    "pooling_3d_avg_ceil_with_pad": lambda: pool3d_case((3, 3, 2), (2, 1, 2), (1, 1, 1), (1, 1, 1), "ceil", "avg",
                                                        False),
    "pooling_3d_avg_exclude_pad_end": lambda: pool3d_case((2, 2, 3), (1, 2, 2), (0, 0, 1), (1, 1, 1), "floor",
                                                          "avg", True),
}


@pytest.mark.parametrize("name", list(REFERENCE_CASES))
def test_layer_matches_reference(tmp_path, name):
    case = REFERENCE_CASES[name]()
    outputs, _ = run_single(tmp_path, case.layer_type, case.data, case.inputs, case.out_shapes, blobs=case.blobs)
    case.check(outputs)


def test_fp16_blobs_are_computed_in_float32(tmp_path):
    x = rand(1, 4, 6, 6)
    w = rand(5, 4, 3, 3)
    b = rand(5)
    data = {"kernel-x": 3, "kernel-y": 3, "stride-x": 1, "stride-y": 1, "pad-x": 1, "pad-y": 1, "output": 5,
            "group": 1, "dilation-x": 1, "dilation-y": 1}
    (ref,), _ = run_single(tmp_path, "Convolution", data, [x], [(1, 5, 6, 6)], blobs={"weights": w, "biases": b})
    (out,), plan = run_single(tmp_path, "Convolution", data, [x], [(1, 5, 6, 6)],
                              blobs={"weights": w, "biases": b}, precision="FP16")
    assert plan.network.layers[-1].blobs["weights"].dtype == np.float16
    assert out.dtype == np.float32
    assert_close(out, ref, 1e-2, "FP16 convolution")
    # the FP16 run is exactly the FP32 computation with weights rounded to float16
    (exact,), _ = run_single(tmp_path, "Convolution", data, [x], [(1, 5, 6, 6)],
                             blobs={"weights": w.astype(np.float16), "biases": b.astype(np.float16)})
    assert_close(out, exact, 1e-6, "FP16 = rounded FP32")


def test_pycaffe_has_no_cpu_kernels_for_the_independently_tested_layers():
    """Why these layers use independent references: this pycaffe lacks them (or,
    for PSROIPooling, has only a GPU forward that aborts on the CPU)."""
    caffe = import_caffe()
    have = set(caffe.layer_type_list())
    for layer in ("ROIPooling", "RegionYolo", "ReorgYolo", "CTCGreedyDecoder", "GRN", "SimplerNMS", "Resample"):
        assert layer not in have

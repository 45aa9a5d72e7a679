"""Caffemodels built without pycaffe: the project's own protos (package mo_caffe).

`make_caffemodel(prototxt, path)` reads a deploy prototxt, works out the shape of
every trained blob with Caffe's own rules (implemented here, independently of the
converter: a test must not take its expectations from the code under test), fills
the blobs with random values and writes a .caffemodel as Caffe's Net::ToProto does
(every layer's definition plus its blobs). The converter tests use it so that they
run with no framework at all (`tox -e core`); the comparisons against real Caffe
keep using pycaffe (tests/support.py make_caffemodel).
"""
from __future__ import annotations

import math

import numpy as np
from google.protobuf import text_format

from core.front.caffe.proto import mo_caffe_pb2 as pb

# V1LayerParameter.LayerType numbers -> the type names of LayerParameter
_V1_TYPES = {4: "Convolution", 18: "ReLU", 17: "Pooling", 14: "InnerProduct", 20: "Softmax", 21: "SoftmaxWithLoss",
             15: "LRN", 3: "Concat", 6: "Dropout", 8: "Flatten", 25: "Eltwise", 22: "Split", 33: "Slice",
             19: "Sigmoid", 23: "TanH", 39: "Deconvolution", 26: "Power", 35: "AbsVal", 5: "Data"}


def read_net(prototxt: str, net_class=None) -> pb.NetParameter:
    """A prototxt path or its text (in our schema, or a fork's NetParameter class)."""
    text = prototxt
    if "\n" not in prototxt and not prototxt.lstrip().startswith(("name", "layer", "input")):
        with open(prototxt) as f:
            text = f.read()
    return text_format.Parse(text, (net_class or pb.NetParameter)())


def _pair(param, name, name_h, name_w, default):
    if name_h and param.HasField(name_h):
        return getattr(param, name_h), getattr(param, name_w)
    value = getattr(param, name)
    if isinstance(value, int):
        return (value, value) if param.HasField(name) else (default, default)
    values = list(value)
    return (values[0], values[-1]) if values else (default, default)


def _conv_geometry(p):
    k = _pair(p, "kernel_size", "kernel_h", "kernel_w", 0)
    s = _pair(p, "stride", "stride_h", "stride_w", 1)
    pad = _pair(p, "pad", "pad_h", "pad_w", 0)
    d = _pair(p, "dilation", None, None, 1)
    return k, s, pad, d


def _pool_out(size, k, s, p):
    out = int(math.ceil((size + 2 * p - k) / s)) + 1
    if p and (out - 1) * s >= size + p:
        out -= 1
    return out


def _prior_count(p):
    ratios = [1.0]
    for ar in p.aspect_ratio:
        for r in ([ar, 1.0 / ar] if p.flip else [ar]):
            if all(abs(r - x) > 1e-6 for x in ratios):
                ratios.append(r)
    return len(ratios) * len(p.min_size) + len(p.max_size)


def _shapes(layer, ltype, bottoms):
    """(top shapes, param blob shapes) of one layer from its bottom shapes."""
    b0 = bottoms[0] if bottoms else None
    same = [b0] * max(1, len(layer.top))
    channels = b0[1] if b0 and len(b0) > 1 else None
    if ltype in ("Convolution", "Deconvolution"):
        p = layer.convolution_param
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _conv_geometry(p)
        g = p.group or 1
        if ltype == "Convolution":
            params = [(p.num_output, channels // g, kh, kw)]
            hw = [(b0[2] + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1, (b0[3] + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1]
        else:
            params = [(channels, p.num_output // g, kh, kw)]
            hw = [sh * (b0[2] - 1) + dh * (kh - 1) + 1 - 2 * ph, sw * (b0[3] - 1) + dw * (kw - 1) + 1 - 2 * pw]
        if p.bias_term:
            params.append((p.num_output,))
        return [[b0[0], p.num_output, *hw]], params
    if ltype == "InnerProduct":
        p = layer.inner_product_param
        axis = p.axis % len(b0)
        k = int(np.prod(b0[axis:]))
        params = [(k, p.num_output) if p.transpose else (p.num_output, k)]
        if p.bias_term:
            params.append((p.num_output,))
        return [list(b0[:axis]) + [p.num_output]], params
    if ltype == "Pooling":
        p = layer.pooling_param
        if p.global_pooling:
            return [[b0[0], b0[1], 1, 1]], []
        (kh, kw), (sh, sw), (ph, pw) = (_pair(p, "kernel_size", "kernel_h", "kernel_w", 0),
                                        _pair(p, "stride", "stride_h", "stride_w", 1),
                                        _pair(p, "pad", "pad_h", "pad_w", 0))
        return [[b0[0], b0[1], _pool_out(b0[2], kh, sh, ph), _pool_out(b0[3], kw, sw, pw)]], []
    if ltype == "BatchNorm":
        return same, [(channels,), (channels,), (1,)]
    if ltype == "Scale":
        p = layer.scale_param
        params = [] if len(bottoms) > 1 else [(channels,)]
        return same, params + ([(channels,)] if p.bias_term else [])
    if ltype == "Bias":
        return same, [] if len(bottoms) > 1 else [(channels,)]
    if ltype == "PReLU":
        return same, [(1,) if layer.prelu_param.channel_shared else (channels,)]
    if ltype == "Normalize":
        return same, [(1,) if layer.norm_param.channel_shared else (channels,)]
    if ltype in ("Concat",):
        axis = layer.concat_param.axis % len(b0)
        out = list(b0)
        out[axis] = sum(b[axis] for b in bottoms)
        return [out], []
    if ltype == "Flatten":
        p = layer.flatten_param
        a, e = p.axis % len(b0), p.end_axis % len(b0)
        return [list(b0[:a]) + [int(np.prod(b0[a:e + 1]))] + list(b0[e + 1:])], []
    if ltype == "Reshape":
        p = layer.reshape_param
        dims = [b0[i] if d == 0 else d for i, d in enumerate(p.shape.dim)]
        if -1 in dims:
            dims[dims.index(-1)] = int(np.prod(b0)) // int(-np.prod(dims))
        return [dims], []
    if ltype == "Permute":
        order = list(layer.permute_param.order)
        order += [a for a in range(len(b0)) if a not in order]
        return [[b0[a] for a in order]], []
    if ltype == "Slice":
        p = layer.slice_param
        axis = p.axis % len(b0)
        bounds = [0, *p.slice_point, b0[axis]] if p.slice_point else \
            [i * b0[axis] // len(layer.top) for i in range(len(layer.top) + 1)]
        tops = []
        for lo, hi in zip(bounds, bounds[1:]):
            t = list(b0)
            t[axis] = hi - lo
            tops.append(t)
        return tops, []
    if ltype == "Crop":
        axis = layer.crop_param.axis % len(b0)
        return [list(b0[:axis]) + list(bottoms[1][axis:])], []
    if ltype == "PriorBox":
        return [[1, 2, b0[2] * b0[3] * _prior_count(layer.prior_box_param) * 4]], []
    if ltype == "Proposal":
        return [[layer.proposal_param.post_nms_topn or 300, 5]], []
    if ltype == "ROIPooling":
        p = layer.roi_pooling_param
        return [[bottoms[1][0], channels, p.pooled_h, p.pooled_w]], []
    if ltype == "PSROIPooling":
        p = layer.psroi_pooling_param
        return [[bottoms[1][0], p.output_dim, p.group_size, p.group_size]], []
    if ltype in ("Input", "Python", "DetectionOutput", "Silence") or b0 is None:
        return [None] * len(layer.top), []
    # element-wise layers and the rest: the first bottom's shape, no trained blobs
    return same, []


def blob_shapes(net: pb.NetParameter) -> dict[str, list[tuple]]:
    """{layer name: shapes of its trained blobs} by Caffe's rules."""
    return walk(net)[1]


def top_shapes(net: pb.NetParameter) -> dict[str, list[int] | None]:
    """{top name: shape} by Caffe's rules (None where a layer's output is unknown);
    an in-place top keeps the last shape given to it."""
    return walk(net)[0]


def walk(net: pb.NetParameter):
    """(top shapes, trained blob shapes) of a net, layer by layer."""
    shapes = {}
    if net.input:
        dims = [list(s.dim) for s in net.input_shape] or \
            [list(net.input_dim[i * 4:i * 4 + 4]) for i in range(len(net.input))]
        shapes.update(zip(net.input, dims))
    result = {}
    layers = [(layer, layer.type) for layer in net.layer] + [(layer, _V1_TYPES.get(layer.type, str(layer.type)))
                                                            for layer in getattr(net, "layers", ())]
    for layer, ltype in layers:
        if ltype == "Input":
            for top, shape in zip(layer.top, layer.input_param.shape):
                shapes[top] = list(shape.dim)
            continue
        bottoms = [shapes.get(b) for b in layer.bottom]
        if any(b is None for b in bottoms) and ltype not in ("Python", "DetectionOutput", "Silence"):
            tops, params = [None] * len(layer.top), []
        else:
            try:
                tops, params = _shapes(layer, ltype, bottoms)
            except (ZeroDivisionError, ValueError, IndexError):  # a broken layer (tests feed those on purpose)
                tops, params = [None] * len(layer.top), []
        for top, shape in zip(layer.top, tops):
            shapes[top] = shape
        if params:
            result[layer.name] = [tuple(int(d) for d in s) for s in params]
    return shapes, result


def make_caffemodel(prototxt: str, path: str, seed: int = 0, scale: float | None = 0.01, positive=(),
                    blobs: dict | None = None, net_class=None) -> dict[str, list[np.ndarray]]:
    """Writes a caffemodel for the prototxt (path or text); returns {layer: [blobs]}.

    Values N(0, scale^2), He-scaled weights (N(0, 2/fan_in), biases N(0, 1e-4)) when
    scale is None, [0.5, 1.5) for layers named in `positive`; `blobs` gives some
    layers' blobs explicitly."""
    net = read_net(prototxt, net_class)
    rng = np.random.default_rng(seed)
    values = {}
    for name, shapes in blob_shapes(net).items():
        arrays = []
        for i, shape in enumerate(shapes):
            if name in positive:
                arrays.append(rng.uniform(0.5, 1.5, shape).astype(np.float32))
                continue
            if scale is None:
                fan_in = int(np.prod(shape[1:])) or 1
                std = np.sqrt(2.0 / fan_in) if i == 0 else 0.01
            else:
                std = scale
            normal = rng.standard_normal(shape, dtype=np.float32)
            normal *= np.float32(std)
            arrays.append(normal)
        values[name] = arrays
    values.update({k: [np.asarray(a, np.float32) for a in v] for k, v in (blobs or {}).items()})
    with open(path, "wb") as f:
        for chunk in _serialize(net, values):
            f.write(chunk)
    return values


# --- wire format: blob data written straight from numpy, in pieces (protobuf's
# repeated-float fields take seconds for AlexNet's 61M weights) ------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _header(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(length)


def _blob(array: np.ndarray) -> list:
    shape = pb.BlobShape(dim=list(array.shape)).SerializeToString()
    data = memoryview(np.ascontiguousarray(array, dtype="<f4")).cast("B")
    # BlobProto.shape = 7, BlobProto.data = 5 (packed floats)
    return [_header(7, len(shape)), shape, _header(5, len(data)), data]


def _serialize(net: pb.NetParameter, values: dict):
    """NetParameter bytes in chunks: the net's own fields, then each layer with its
    blobs (field 7 of LayerParameter, field 6 of V1LayerParameter) appended."""
    head = type(net)()
    head.CopyFrom(net)
    del head.layer[:]
    if hasattr(head, "layers"):
        del head.layers[:]
    yield head.SerializeToString()
    for number, layers, blob_field in ((100, net.layer, 7), (2, getattr(net, "layers", ()), 6)):
        for layer in layers:
            body = [layer.SerializeToString()]
            for array in values.get(layer.name, ()):
                blob = _blob(array)
                body += [_header(blob_field, sum(len(c) for c in blob))] + blob
            yield _header(number, sum(len(c) for c in body))
            yield from body

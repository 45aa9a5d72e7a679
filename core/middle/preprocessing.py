"""--mean_values, --scale_values, --scale and --reverse_input_channels.

The IR input takes raw data; the model sees (reverse(x) - mean) / scale, with
mean and scale in the model's channel order. An input kept NHWC
(--disable_nhwc_to_nchw) gets them after the Permute that makes it NCHW, where
its channels are axis 1 as everywhere else. The ops added here are linear, so
fusing folds them into the first Convolution where that is exact; otherwise they
stay as a ScaleShift. The channel reversal is folded into the weights of the
convolutions that read the input, or becomes a 1x1 permutation Convolution.
"""
import numpy as np

from core.errors import Error
from core.middle.linear_lowering import replace_with_linear
from core.graph.blobs import get_blob, set_blob
from core.ops.convolution import Convolution
from core.ops.identity import Identity


def _insert_after(graph, data, name, op_class_attrs):
    """Inserts a one-in/one-out op reading `data`; its consumers read the new op."""
    consumers = [(v, k, a) for _, v, k, a in graph.out_edges(data.id, keys=True, data=True)]
    node = graph.add_op(name)
    op_class, attrs = op_class_attrs
    op_class.update_node_stat(node, attrs)
    out = graph.add_data(name)
    out.shape = data.shape
    graph.connect(data, node, inp=0)
    graph.connect(node, out, out=0)
    for v, k, a in consumers:
        graph.remove_edge(data.id, v, k)
        graph.add_edge(out.id, v, **a)
    return node


def _values_for(values: dict, name: str, n_inputs: int):
    if name in values:
        return values[name]
    if None in values and n_inputs == 1:
        return values[None]
    return None


def _listed(values) -> str:
    return "[{}]".format(", ".join("{:g}".format(float(v)) for v in np.ravel(values)))


def add_preprocessing(graph, mean_values: dict, scale_values: dict, scale: float | None, reverse: bool,
                      fusing: bool) -> list[str]:
    """Adds the ops; returns warnings (a --reverse_input_channels that found nothing to reverse)."""
    inputs = graph.op_nodes(op="Parameter")
    reversed_any = False
    known = {p.name for p in inputs}
    for values, what, faq in ((mean_values, "mean", 60), (scale_values, "scale", 61)):
        if None in values and len(inputs) > 1:
            raise Error("You should specify input for each {} value: the model has {} inputs ({}); write "
                        "name[values] or name them with --input.", what, len(inputs), ", ".join(sorted(known)),
                        faq=faq)
    for name in list(mean_values) + list(scale_values):
        if name is not None and name not in known:
            raise Error("Input with name {} not found! The inputs are: {}.", name, ", ".join(sorted(known)), faq=82)
    for param in inputs:
        data = param.out_node(0)
        for reader in data.consumers():
            if reader.soft_get("input_to_nchw"):
                data = reader.out_node(0)
        shape = data.shape
        mean = _values_for(mean_values, param.name, len(inputs))
        scl = _values_for(scale_values, param.name, len(inputs))
        if param.soft_get("channels_last") and (mean is not None or scl is not None or scale is not None or reverse):
            raise Error("Input \"{}\" is a 5-D volume kept NDHWC by --disable_nhwc_to_nchw: its channels are its "
                        "last axis, where --mean_values, --scale_values, --scale and --reverse_input_channels do "
                        "not apply. Convert without --disable_nhwc_to_nchw (the input is then NCDHW) to use them.",
                        param.name)
        if scl is None and scale is not None:
            scl = np.array([scale], dtype=np.float32)
        channels = int(shape[1]) if len(shape) > 1 else 1
        for what, vec, faq in (("mean", mean, 59), ("scale", scl, 59)):
            if vec is not None and vec.size not in (1, channels):
                raise Error("{} channels are expected for given values: input \"{}\" has shape {} but {} {} values "
                            "were given.", channels, param.name, list(shape), vec.size, what, faq=faq)
        if scl is not None and np.any(scl == 0):
            raise Error("Scale values for input \"{}\" contain 0: the input would be divided by zero.", param.name,
                        faq=97)
        if reverse and channels == 3:  # the reference applies it to 3-channel inputs only
            reversed_any = True
            rev = _insert_after(graph, data, param.name + "/reverse_channels", (Identity, {"op": "ReverseChannels"}))
            data = rev.out_node(0)
        if mean is None and scl is None:
            continue
        mean = np.zeros(channels, np.float32) if mean is None else np.broadcast_to(mean, (channels,)).astype(np.float32)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            inv = np.ones(channels, np.float32) if scl is None else (1.0 / np.broadcast_to(scl, (channels,))).astype(
                np.float32)
            shift = -mean * inv
        if not (np.all(np.isfinite(inv)) and np.all(np.isfinite(shift))):
            # e.g. --scale 1e-45: the factor 1/scale does not fit float32, the IR would hold inf or NaN
            raise Error("The preprocessing of input \"{}\" cannot be represented in float32: the scale {} gives the "
                        "factor {} and the mean {} the shift {}. Give scale values of at least {:.3g} (and means "
                        "that stay finite when divided by them).", param.name,
                        _listed(scl if scl is not None else [1.0]), _listed(inv), _listed(mean), _listed(shift),
                        1.0 / float(np.finfo(np.float32).max), faq=97)
        node = _insert_after(graph, data, param.name + "/mean_scale", (Identity, {}))
        node.epsilon = 0.0
        replace_with_linear(node, inv, shift, split=fusing)
    if reverse and not reversed_any:
        shapes = ", ".join("{} {}".format(p.name, list(p.out_node(0).shape)) for p in inputs)
        return ["--reverse_input_channels reversed nothing: it applies to inputs with 3 channels (axis 1 in the IR), "
                "and none has them ({})".format(shapes)]
    return []


def fold_reverse_channels(graph):
    """Moves each channel reversal past per-channel linear ops into the reading convolutions."""
    for rev in graph.op_nodes(op="ReverseChannels"):
        chain, data = [], rev.out_node(0)
        while True:
            consumers = data.consumers()
            if len(consumers) == 1 and consumers[0].soft_get("op") in ("Mul", "Add", "ScaleShift") \
                    and not data.soft_get("is_output"):
                chain.append(consumers[0])
                data = consumers[0].out_node(0)
                continue
            break
        convs = data.consumers()
        foldable = convs and not data.soft_get("is_output") and all(
            c.soft_get("op") == "Convolution" and int(c.group) == 1 and c.in_node(0).id == data.id for c in convs)
        if foldable:
            for op in chain:
                for bname, blob, _ in op.blob_inputs():
                    if blob.value.size > 1:
                        blob.value = blob.value[::-1].copy()
            for conv in convs:
                w = get_blob(conv, "weights").reshape(int(conv.output), 3, -1)
                set_blob(conv, "weights", w[:, ::-1, :].ravel())
            graph.bypass(rev)
        else:  # an exact 1x1 (1x1x1 on a volume) convolution that swaps channel 0 and 2
            perm = np.eye(3, dtype=np.float32)[::-1]
            ones = np.ones(len(rev.in_node(0).shape) - 2, np.int64)
            Convolution.update_node_stat(rev, {"kernel": ones, "stride": ones, "pad": ones * 0, "dilation": ones,
                                               "group": 1, "output": 3})
            set_blob(rev, "weights", perm.ravel())

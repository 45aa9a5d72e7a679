"""TensorFlow graphs (tests/tf/graphs.py) of the transformer family - embeddings, attention, LayerNorm, masks and
comparisons - and of the ops the converter learnt since the GPU plugin was checked on a GPU - gathers of the data,
Exp/Log/Floor/Ceil/Round/casts/Softplus, Sign and the trigonometric and hyperbolic functions, LRN, Selu, pixel
shuffles, reductions, Cumsum, ArgMax/ArgMin, Pad, resizes, strided slices, reverses and rolls, LogSoftmax, Softsign,
OneHot, IsNan/IsInf/IsFinite, CropAndResize, GatherNd, FakeQuant, ResizeBicubic, Atan2, DivNoNan, Xdivy, Xlogy,
MulNoNan, TF1's Reverse, BiasAddV1, ClipByValue, AdjustContrast, ExtractImagePatches, and volumes (Conv3D,
MaxPool3D / AvgPool3D, conv3d_transpose: kernels/volume.cl), unrolled loops (Keras' LSTM / GRU / SimpleRNN, masked, ConvLSTM2D,
tf.scan, counted and nested tf.while_loop) - converted by our front end
and run on the GPU plan (real OpenCL: PoCL here), against TensorFlow's own outputs: every layer on the GPU
(query_network leaves none to HETERO), FP32 within 1e-4 and FP16 IRs (half storage) within 1e-2, as max |diff| /
max |TensorFlow's|."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.built_models import Models, built
from tests.tf.tf_helpers import compare_with_tf, nchw, nhwc

CASES = ["embedding_lookup", "keras_embedding", "comparisons", "layer_norm", "attention_heads", "attention_einsum",
         "causal_select", "batch_matmul", "gelu_forms", "gather_of_data", "plain_functions", "math_functions",
         "narrow_and_bool_casts", "lrn_selu_depth_space", "cumsum_positions", "reduce_mean_sum", "argmax_addn",
         "argmin_ties_broadcast", "gather_data_by_data", "gather_batch_dims", "pad_layers", "resize_bilinear",
         "resize_nearest", "strided_slices", "transpose", "reverse_roll", "log_softmax_softsign",
         "one_hot_float_classes", "crop_and_resize", "gather_nd", "fake_quant", "resize_bicubic", "atan2_div_no_nan",
         "legacy_tf1_ops", "extract_patches", "conv3d_pool3d", "conv3d_transpose", "conv3d_zero_padding",
         "conv3d_batch_norm_global_pool", "keras_recurrent", "counted_loops", "concat_cells",
         "keras_masked_lstm", "keras_conv_lstm"]


@pytest.fixture(scope="module")
def tf_graphs() -> Models:
    return Models(built("graphs"))


def run_on_gpu_plan(device, xml: str, feeds: dict, nhwc_io: bool = False):
    """run_on_daemon's signature (tests/tf/tf_helpers.py) on the GPU plan in-process, which must run every layer."""
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.query import query_network
    from ir import read_ir
    net = read_ir(xml)
    left = [f"{layer.name} ({layer.type})" for layer in net.layers if layer.name not in query_network(net)]
    assert not left, f"not on the GPU: {left}"
    out = GpuPlan(net, device).infer({k: v if nhwc_io else nchw(v) for k, v in feeds.items()})
    return net, {k: np.array(v if nhwc_io else nhwc(np.asarray(v))) for k, v in out.items()}


@pytest.mark.parametrize("data_type,tol", [("FP32", 1e-4), ("FP16", 1e-2)])
@pytest.mark.parametrize("case", CASES)
def test_gpu_plan_equals_tensorflow(tf_graphs, gpu_device, tmp_path, case, data_type, tol):
    compare_with_tf(gpu_device, tf_graphs, case, tmp_path, data_type=data_type, tol=tol, run=run_on_gpu_plan)

"""Every kernel that pycaffe also has, against pycaffe: a tiny net (Input layers +
the layer under test) with random weights, converted with the converter API, run
by the ExecutionPlan and compared with net.forward() to 1e-4 of max |reference|."""
from __future__ import annotations

import numpy as np
import pytest

from device_daemons.cpu import folding
from tests.cpu.cpu_helpers import assert_close, caffe_case
from tests.support import assert_detection_padding

# the parity tests run on both CPU backends (tests/cpu/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_backend")


def conv(name, bottom, top, params, kind="Convolution"):
    return (f'layer {{ name: "{name}" type: "{kind}" bottom: "{bottom}" top: "{top}" '
            f'convolution_param {{ {params} }} }}\n')


def one(kind, params="", bottom="data", name="t", top="out"):
    return f'layer {{ name: "{name}" type: "{kind}" bottom: "{bottom}" top: "{top}" {params} }}\n'


# (id, layers, inputs {name: shape}, [(plan output key, caffe blob)], options)
CASES = [
    # --- convolution -----------------------------------------------------------------
    ("conv_3x3_pad", conv("t", "data", "out", "num_output: 8 kernel_size: 3 pad: 1"),
     {"data": (2, 5, 9, 11)}, [("t", "out")], {}),
    ("conv_group_dilation_stride_rect_nobias",
     conv("t", "data", "out", "num_output: 6 kernel_h: 3 kernel_w: 5 pad_h: 2 pad_w: 1 stride_h: 2 stride_w: 1 "
                              "dilation: 2 group: 2 bias_term: false"),
     {"data": (2, 4, 13, 12)}, [("t", "out")], {}),
    ("conv_dilation2_s1", conv("t", "data", "out", "num_output: 4 kernel_size: 3 pad: 2 dilation: 2"),
     {"data": (1, 3, 9, 10)}, [("t", "out")], {}),
    ("conv_group3_s1_k3x1", conv("t", "data", "out", "num_output: 6 kernel_h: 3 kernel_w: 1 pad_h: 1 group: 3"),
     {"data": (2, 6, 7, 5)}, [("t", "out")], {}),
    ("conv_5x5_pad2_tiny_input", conv("t", "data", "out", "num_output: 5 kernel_size: 5 pad: 2"),
     {"data": (1, 4, 3, 4)}, [("t", "out")], {}),
    ("conv_1x1", conv("t", "data", "out", "num_output: 7 kernel_size: 1"), {"data": (2, 6, 5, 4)},
     [("t", "out")], {}),
    ("conv_1x1_stride2", conv("t", "data", "out", "num_output: 7 kernel_size: 1 stride: 2"),
     {"data": (1, 6, 7, 6)}, [("t", "out")], {}),
    ("conv_depthwise", conv("t", "data", "out", "num_output: 6 kernel_size: 3 pad: 1 stride: 2 group: 6"),
     {"data": (1, 6, 10, 9)}, [("t", "out")], {}),
    ("conv_7x7_stride3_pad", conv("t", "data", "out", "num_output: 4 kernel_size: 7 stride: 3 pad: 3"),
     {"data": (1, 3, 20, 17)}, [("t", "out")], {}),
    # Caffe's N-D convolution on a 5-D blob: one value for the three axes, or three values (d, h, w)
    ("conv3d_uniform", conv("t", "data", "out", "num_output: 4 kernel_size: 3 pad: 1 stride: 2"),
     {"data": (2, 3, 5, 7, 6)}, [("t", "out")], {}),
    ("conv3d_lists_group_dilation",
     conv("t", "data", "out", "num_output: 6 kernel_size: 2 kernel_size: 3 kernel_size: 1 pad: 0 pad: 2 pad: 1 "
                              "stride: 1 stride: 2 stride: 1 dilation: 2 group: 2 bias_term: false"),
     {"data": (1, 4, 6, 9, 5)}, [("t", "out")], {}),
    ("deconv3d_stride2", conv("t", "data", "out", "num_output: 4 kernel_size: 3 stride: 2 pad: 1 group: 2",
                              kind="Deconvolution"), {"data": (1, 2, 3, 4, 5)}, [("t", "out")], {}),
    ("deconv_stride2", conv("t", "data", "out", "num_output: 5 kernel_size: 4 stride: 2 pad: 1",
                            kind="Deconvolution"), {"data": (2, 3, 5, 6)}, [("t", "out")], {}),
    ("deconv_group_dilation_nobias",
     conv("t", "data", "out", "num_output: 4 kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 3 pad_h: 1 pad_w: 0 "
                              "dilation: 2 group: 2 bias_term: false", kind="Deconvolution"),
     {"data": (1, 6, 5, 4)}, [("t", "out")], {}),
    # --- pooling ---------------------------------------------------------------------
    ("pool_max_ceil", one("Pooling", "pooling_param { pool: MAX kernel_size: 3 stride: 2 }"),
     {"data": (2, 3, 10, 11)}, [("t", "out")], {}),
    ("pool_max_pad", one("Pooling", "pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }"),
     {"data": (1, 4, 9, 8)}, [("t", "out")], {}),
    ("pool_ave_pad_s1", one("Pooling", "pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 }"),
     {"data": (1, 3, 7, 6)}, [("t", "out")], {}),
    ("pool_ave_ceil_pad", one("Pooling", "pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }"),
     {"data": (1, 3, 10, 7)}, [("t", "out")], {}),
    ("pool_ave_rect", one("Pooling", "pooling_param { pool: AVE kernel_h: 2 kernel_w: 3 stride_h: 2 "
                                     "stride_w: 1 pad_h: 1 pad_w: 2 }"),
     {"data": (1, 2, 7, 8)}, [("t", "out")], {}),
    ("pool_max_s1_5x5_narrow", one("Pooling", "pooling_param { pool: MAX kernel_size: 5 stride: 1 pad: 2 }"),
     {"data": (2, 3, 4, 3)}, [("t", "out")], {}),
    ("pool_ave_s1_shrinking", one("Pooling", "pooling_param { pool: AVE kernel_size: 4 stride: 1 pad: 1 }"),
     {"data": (1, 3, 6, 5)}, [("t", "out")], {}),
    ("pool_max_s1_nopad", one("Pooling", "pooling_param { pool: MAX kernel_h: 2 kernel_w: 3 stride: 1 }"),
     {"data": (1, 2, 5, 6)}, [("t", "out")], {}),
    # padding on one axis only: Caffe clips the last window on both (pooling_layer.cpp: pad_h_ || pad_w_)
    ("pool_max_pad_one_axis", one("Pooling", "pooling_param { pool: MAX kernel_h: 2 kernel_w: 1 stride: 2 "
                                             "pad_h: 1 pad_w: 0 }"),
     {"data": (1, 2, 18, 10)}, [("t", "out")], {}),
    ("pool_max_floor", one("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 ceil_mode: false }"),
     {"data": (1, 3, 7, 9)}, [("t", "out")], {}),
    ("pool_global_max", one("Pooling", "pooling_param { pool: MAX global_pooling: true }"),
     {"data": (2, 5, 6, 7)}, [("t", "out")], {}),
    ("pool_global_ave", one("Pooling", "pooling_param { pool: AVE global_pooling: true }"),
     {"data": (2, 5, 6, 7)}, [("t", "out")], {}),
    # --- fully connected -------------------------------------------------------------
    ("fc", one("InnerProduct", "inner_product_param { num_output: 10 }"), {"data": (3, 4, 3, 2)},
     [("t", "out")], {}),
    ("fc_axis2_nobias", one("InnerProduct", "inner_product_param { num_output: 6 axis: 2 bias_term: false }"),
     {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("fc_transpose", one("InnerProduct", "inner_product_param { num_output: 5 transpose: true }"),
     {"data": (2, 7)}, [("t", "out")], {}),
    # --- activations -----------------------------------------------------------------
    ("relu", one("ReLU"), {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("relu_leaky", one("ReLU", "relu_param { negative_slope: 0.2 }"), {"data": (2, 3, 4)}, [("t", "out")], {}),
    ("relu6_clamp", one("ReLU6"), {"data": (1, 3, 4, 5)}, [("t", "out")], {"input_scale": 8.0}),
    ("sigmoid", one("Sigmoid"), {"data": (2, 3, 4, 5)}, [("t", "out")], {"input_scale": 5.0}),
    ("tanh", one("TanH"), {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("absval", one("AbsVal"), {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("elu", one("ELU", "elu_param { alpha: 0.5 }"), {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("prelu", one("PReLU"), {"data": (2, 4, 3, 3)}, [("t", "out")], {}),
    ("prelu_shared", one("PReLU", "prelu_param { channel_shared: true }"), {"data": (2, 4, 3, 3)},
     [("t", "out")], {}),
    ("power", one("Power", "power_param { power: 2 scale: 0.5 shift: -1 }"), {"data": (2, 3, 4)},
     [("t", "out")], {}),
    ("power_sqrt", one("Power", "power_param { power: 0.5 scale: 0.25 shift: 2 }"), {"data": (2, 3, 4)},
     [("t", "out")], {}),
    ("power_fractional", one("Power", "power_param { power: 1.7 scale: 0.3 shift: 3 }"), {"data": (2, 3, 4)},
     [("t", "out")], {}),
    ("power_linear", one("Power", "power_param { scale: -2 shift: 0.5 }"), {"data": (2, 3, 4)},
     [("t", "out")], {}),
    # --- normalizations ---------------------------------------------------------------
    ("softmax", one("Softmax"), {"data": (2, 5, 3, 2)}, [("t", "out")], {"input_scale": 3.0}),
    ("softmax_axis2", one("Softmax", "softmax_param { axis: 2 }"), {"data": (2, 3, 6, 2)}, [("t", "out")], {}),
    ("softmax_axis_last", one("Softmax", "softmax_param { axis: -1 }"), {"data": (3, 7)}, [("t", "out")], {}),
    ("lrn_across", one("LRN", "lrn_param { local_size: 5 alpha: 0.1 beta: 0.75 }"), {"data": (2, 7, 4, 5)},
     [("t", "out")], {}),
    ("lrn_across_k", one("LRN", "lrn_param { local_size: 3 alpha: 0.3 beta: 0.6 k: 2 }"),
     {"data": (1, 2, 4, 5)}, [("t", "out")], {}),
    ("lrn_within", one("LRN", "lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 norm_region: WITHIN_CHANNEL }"),
     {"data": (2, 3, 6, 5)}, [("t", "out")], {}),
    ("lrn_within_5", one("LRN", "lrn_param { local_size: 5 alpha: 0.2 beta: 0.5 norm_region: WITHIN_CHANNEL }"),
     {"data": (1, 2, 7, 8)}, [("t", "out")], {}),
    ("normalize", one("Normalize", "norm_param { across_spatial: false channel_shared: false }"),
     {"data": (2, 4, 3, 5)}, [("t", "out")], {}),
    ("normalize_across_spatial", one("Normalize", "norm_param { across_spatial: true channel_shared: false }"),
     {"data": (2, 4, 3, 5)}, [("t", "out")], {}),
    ("normalize_shared", one("Normalize", "norm_param { across_spatial: false channel_shared: true eps: 0.01 }"),
     {"data": (2, 4, 3, 5)}, [("t", "out")], {}),
    ("normalize_across_shared", one("Normalize", "norm_param { across_spatial: true channel_shared: true }"),
     {"data": (1, 3, 4, 4)}, [("t", "out")], {}),
    ("mvn", one("MVN"), {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("mvn_across_channels", one("MVN", "mvn_param { across_channels: true }"), {"data": (2, 3, 4, 5)},
     [("t", "out")], {}),
    ("mvn_mean_only", one("MVN", "mvn_param { normalize_variance: false }"), {"data": (2, 3, 4, 5)},
     [("t", "out")], {}),
    ("mvn_across_mean_only_eps",
     one("MVN", "mvn_param { across_channels: true normalize_variance: false eps: 0.1 }"),
     {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    # --- linear ------------------------------------------------------------------------
    ("eltwise_sum_coeff",
     'layer { name: "t" type: "Eltwise" bottom: "a" bottom: "b" bottom: "c" top: "out" '
     'eltwise_param { operation: SUM coeff: 0.5 coeff: -2 coeff: 1 } }\n',
     {"a": (2, 3, 4, 5), "b": (2, 3, 4, 5), "c": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("eltwise_prod", 'layer { name: "t" type: "Eltwise" bottom: "a" bottom: "b" top: "out" '
                     'eltwise_param { operation: PROD } }\n',
     {"a": (2, 3, 4), "b": (2, 3, 4)}, [("t", "out")], {}),
    ("eltwise_max", 'layer { name: "t" type: "Eltwise" bottom: "a" bottom: "b" bottom: "c" top: "out" '
                    'eltwise_param { operation: MAX } }\n',
     {"a": (1, 3, 4, 5), "b": (1, 3, 4, 5), "c": (1, 3, 4, 5)}, [("t", "out")], {}),
    ("scale_bias", one("Scale", "scale_param { bias_term: true }"), {"data": (2, 4, 3, 3)}, [("t", "out")], {}),
    ("scale_2d", one("Scale", "scale_param { bias_term: false }"), {"data": (3, 6)}, [("t", "out")], {}),
    ("bias", one("Bias"), {"data": (2, 4, 3, 3)}, [("t", "out")], {}),
    # --- shape ops -----------------------------------------------------------------
    ("concat_axis1", 'layer { name: "t" type: "Concat" bottom: "a" bottom: "b" bottom: "c" top: "out" }\n',
     {"a": (2, 3, 4, 5), "b": (2, 1, 4, 5), "c": (2, 2, 4, 5)}, [("t", "out")], {}),
    ("concat_axis2", 'layer { name: "t" type: "Concat" bottom: "a" bottom: "b" top: "out" '
                     'concat_param { axis: 2 } }\n',
     {"a": (2, 3, 4, 5), "b": (2, 3, 2, 5)}, [("t", "out")], {}),
    ("slice_points", 'layer { name: "t" type: "Slice" bottom: "data" top: "o1" top: "o2" top: "o3" '
                     'slice_param { axis: 1 slice_point: 1 slice_point: 4 } }\n',
     {"data": (2, 6, 3, 2)}, [("t.1", "o1"), ("t.2", "o2"), ("t.3", "o3")], {}),
    ("slice_equal_axis2", 'layer { name: "t" type: "Slice" bottom: "data" top: "o1" top: "o2" '
                          'slice_param { axis: 2 } }\n',
     {"data": (2, 3, 6, 2)}, [("t.1", "o1"), ("t.2", "o2")], {}),
    ("crop_axis2_offsets", 'layer { name: "t" type: "Crop" bottom: "data" bottom: "ref" top: "out" '
                           'crop_param { axis: 2 offset: 1 offset: 3 } }\n',
     {"data": (2, 3, 8, 9), "ref": (1, 1, 5, 4)}, [("t", "out")], {}),
    ("crop_axis1_single_offset", 'layer { name: "t" type: "Crop" bottom: "data" bottom: "ref" top: "out" '
                                 'crop_param { axis: 1 offset: 1 } }\n',
     {"data": (2, 5, 8, 9), "ref": (2, 3, 6, 7)}, [("t", "out")], {}),
    ("reshape_0_minus1", one("Reshape", "reshape_param { shape { dim: 0 dim: -1 dim: 2 } }"),
     {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("reshape_axis_numaxes", one("Reshape", "reshape_param { shape { dim: 2 dim: 2 } axis: 1 num_axes: 1 }"),
     {"data": (2, 4, 3)}, [("t", "out")], {}),
    ("flatten", one("Flatten"), {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("flatten_axis2", one("Flatten", "flatten_param { axis: 2 }"), {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("permute", one("Permute", "permute_param { order: 0 order: 2 order: 3 order: 1 }"),
     {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("permute_partial", one("Permute", "permute_param { order: 1 order: 0 }"),
     {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("tile", one("Tile", "tile_param { axis: 1 tiles: 3 }"), {"data": (2, 3, 4, 5)}, [("t", "out")], {}),
    ("tile_axis3", one("Tile", "tile_param { axis: 3 tiles: 2 }"), {"data": (1, 2, 3, 4)}, [("t", "out")], {}),
    # Scale / Bias with a second input of fewer axes, broadcast from `axis` (an SE block's [N, C] scale)
    ("scale_second_input_axis0", 'layer { name: "t" type: "Scale" bottom: "data" bottom: "s" top: "out" '
                                 'scale_param { axis: 0 } }\n',
     {"data": (2, 3, 4, 5), "s": (2, 3)}, [("t", "out")], {}),
    ("scale_second_input_1d", 'layer { name: "t" type: "Scale" bottom: "data" bottom: "s" top: "out" '
                              'scale_param { axis: 1 } }\n',
     {"data": (2, 3, 4, 5), "s": (3,)}, [("t", "out")], {}),
    ("bias_second_input_axis1", 'layer { name: "t" type: "Bias" bottom: "data" bottom: "b" top: "out" '
                                'bias_param { axis: 1 } }\n',
     {"data": (2, 3, 4, 5), "b": (3, 4)}, [("t", "out")], {}),
    # --- resampling ------------------------------------------------------------------
    ("upsample_nearest", one("Upsample", "upsample_param { scale: 2 }"), {"data": (2, 3, 4, 5)},
     [("t", "out")], {}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_layer_matches_pycaffe(tmp_path, case):
    _, layers, inputs, compare, opts = case
    c = caffe_case(tmp_path, layers, inputs)
    if "input_scale" in opts:
        c.inputs = {k: v * opts["input_scale"] for k, v in c.inputs.items()}
    ours, ref = c.run()
    for key, blob in compare:
        assert key in ours, f"plan outputs {sorted(ours)} have no {key!r}"
        assert_close(ours[key], ref[blob], 1e-4, f"{case[0]} {key}")


ARGMAX = [
    ("top1", "argmax_param { top_k: 1 }", (2, 5, 3, 2)),
    ("top3_max_val", "argmax_param { top_k: 3 out_max_val: true }", (2, 7, 2, 2)),
    ("axis1_top2", "argmax_param { top_k: 2 axis: 1 }", (2, 6, 3, 4)),
    ("axis1_max_val", "argmax_param { top_k: 2 axis: 1 out_max_val: true }", (2, 6, 3, 4)),
    ("axis_last_2d", "argmax_param { axis: -1 }", (3, 8)),
]


@pytest.mark.parametrize("params,shape", [a[1:] for a in ARGMAX], ids=[a[0] for a in ARGMAX])
def test_argmax_matches_pycaffe(tmp_path, params, shape):
    c = caffe_case(tmp_path, one("ArgMax", params), {"data": shape})
    ours, ref = c.run()
    np.testing.assert_array_equal(ours["t"], ref["out"])


BN_SCALE = (conv("conv", "data", "c", "num_output: 6 kernel_size: 3 pad: 1")
            + 'layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c" '
              'batch_norm_param { use_global_stats: true eps: 0.001 } }\n'
            + 'layer { name: "sc" type: "Scale" bottom: "c" top: "c" scale_param { bias_term: true } }\n'
            + 'layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }\n'
            # a BatchNorm + Scale with no convolution before it: a ScaleShift either way
            + 'layer { name: "bn2" type: "BatchNorm" bottom: "data" top: "d" '
              'batch_norm_param { use_global_stats: true } }\n'
            + 'layer { name: "sc2" type: "Scale" bottom: "d" top: "d" scale_param { bias_term: true } }\n'
            + conv("conv2", "d", "e", "num_output: 4 kernel_size: 1"))
BN_SCALE_INPUTS = {"data": (2, 3, 6, 5)}
BN_SCALE_POSITIVE = ("bn", "bn2")


def check_batchnorm_scale(ours, ref):
    assert_close(ours["relu"], ref["c"], 1e-4, "conv+bn+scale+relu")
    assert_close(ours["conv2"], ref["e"], 1e-4, "bn+scale+conv")


@pytest.mark.parametrize("fusing", [True, False], ids=["fusing", "no_fusing"])
def test_batchnorm_scale_matches_pycaffe(tmp_path, fusing):
    c = caffe_case(tmp_path, BN_SCALE, BN_SCALE_INPUTS, positive=BN_SCALE_POSITIVE, disable_fusing=not fusing)
    types = [layer.type for layer in c.network.layers]
    if fusing:
        assert "ScaleShift" not in types, types
    else:
        assert "ScaleShift" in types, types
    check_batchnorm_scale(*c.run())


PRIOR_BOX = [
    ("min_max_ar_flip_clip", "min_size: 8 max_size: 16 aspect_ratio: 2 aspect_ratio: 3 flip: true clip: true"),
    ("no_flip_no_clip_variance", "min_size: 6 aspect_ratio: 2 flip: false clip: false variance: 0.1 variance: 0.1 "
                                 "variance: 0.2 variance: 0.2"),
    ("step_offset", "min_size: 4 min_size: 10 max_size: 8 max_size: 16 aspect_ratio: 2 flip: true step: 6 "
                    "offset: 0.25 variance: 0.2"),
    ("img_size", "min_size: 5 aspect_ratio: 3 flip: true img_size: 40 clip: true"),
    ("img_hw_step_hw", "min_size: 5 max_size: 9 img_h: 36 img_w: 50 step_h: 7 step_w: 9"),
]


def prior_box_layer(params):
    return f'layer {{ name: "t" type: "PriorBox" bottom: "feat" bottom: "data" top: "out" prior_box_param {{ {params} }} }}\n'


PRIOR_BOX_INPUTS = {"feat": (1, 2, 4, 5), "data": (1, 3, 32, 30)}


@pytest.mark.parametrize("params", [p[1] for p in PRIOR_BOX], ids=[p[0] for p in PRIOR_BOX])
def test_priorbox_matches_pycaffe(tmp_path, params):
    c = caffe_case(tmp_path, prior_box_layer(params), PRIOR_BOX_INPUTS)
    ours, ref = c.run()
    assert_close(ours["t"], ref["out"], 1e-5, "priorbox")


SSD_HEAD = """
layer { name: "conv1" type: "Convolution" bottom: "data" top: "f1"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 stride: 2 } }
layer { name: "relu1" type: "ReLU" bottom: "f1" top: "f1" }
layer { name: "pool1" type: "Pooling" bottom: "f1" top: "f2" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "norm1" type: "Normalize" bottom: "f1" top: "f1n"
  norm_param { across_spatial: false channel_shared: false } }
""" + "".join(f"""
layer {{ name: "loc{i}" type: "Convolution" bottom: "{src}" top: "loc{i}"
  convolution_param {{ num_output: {p * 4} kernel_size: 3 pad: 1 }} }}
layer {{ name: "loc{i}_perm" type: "Permute" bottom: "loc{i}" top: "loc{i}_perm"
  permute_param {{ order: 0 order: 2 order: 3 order: 1 }} }}
layer {{ name: "loc{i}_flat" type: "Flatten" bottom: "loc{i}_perm" top: "loc{i}_flat" }}
layer {{ name: "conf{i}" type: "Convolution" bottom: "{src}" top: "conf{i}"
  convolution_param {{ num_output: {p * 3} kernel_size: 3 pad: 1 }} }}
layer {{ name: "conf{i}_perm" type: "Permute" bottom: "conf{i}" top: "conf{i}_perm"
  permute_param {{ order: 0 order: 2 order: 3 order: 1 }} }}
layer {{ name: "conf{i}_flat" type: "Flatten" bottom: "conf{i}_perm" top: "conf{i}_flat" }}
layer {{ name: "prior{i}" type: "PriorBox" bottom: "{src}" bottom: "data" top: "prior{i}"
  prior_box_param {{ {prior} variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 }} }}
""" for i, (src, p, prior) in enumerate([
    ("f1n", 4, "min_size: 6 max_size: 12 aspect_ratio: 2 flip: true clip: false"),
    ("f2", 3, "min_size: 14 aspect_ratio: 2 flip: true clip: true"),
])) + """
layer { name: "loc" type: "Concat" bottom: "loc0_flat" bottom: "loc1_flat" top: "loc" concat_param { axis: 1 } }
layer { name: "conf" type: "Concat" bottom: "conf0_flat" bottom: "conf1_flat" top: "conf" concat_param { axis: 1 } }
layer { name: "prior" type: "Concat" bottom: "prior0" bottom: "prior1" top: "prior" concat_param { axis: 2 } }
layer { name: "conf_reshape" type: "Reshape" bottom: "conf" top: "conf_reshape"
  reshape_param { shape { dim: 0 dim: -1 dim: 3 } } }
layer { name: "conf_softmax" type: "Softmax" bottom: "conf_reshape" top: "conf_softmax" softmax_param { axis: 2 } }
layer { name: "conf_flatten" type: "Flatten" bottom: "conf_softmax" top: "conf_flatten" }
layer { name: "det" type: "DetectionOutput" bottom: "loc" bottom: "conf_flatten" bottom: "prior" top: "det"
  detection_output_param { num_classes: 3 share_location: true background_label_id: 0
    nms_param { nms_threshold: 0.45 top_k: 60 } code_type: CENTER_SIZE keep_top_k: 40
    confidence_threshold: 0.2 } }
"""


SSD_HEAD_CASES = [(1, 0.3, 0.2), (2, 0.3, 0.2), (2, 0.1, 0.5)]
SSD_HEAD_IDS = ["b1_keep_top_k_cut", "b2_keep_top_k_cut", "b2_padded"]


def ssd_head(threshold):
    return SSD_HEAD.replace("confidence_threshold: 0.2", f"confidence_threshold: {threshold}")


def check_detections(det, want, batch, threshold):
    """[1, 1, batch * 40, 7] detections: the reference's rows, then rows of image -1."""
    assert det.shape == (1, 1, batch * 40, 7)
    kept = want.shape[2]
    assert 5 < kept <= batch * 40, kept  # the case must exercise NMS with real detections
    assert sorted(set(want[0, 0, :, 0].astype(int))) == list(range(batch))
    assert_close(det[:, :, :kept], want, 1e-4, "detections")
    if threshold > 0.2:
        assert kept < batch * 40, "this case should leave padding rows"
    assert kept == batch * 40 or det[0, 0, kept, 0] == -1


@pytest.mark.parametrize("batch,scale,threshold", SSD_HEAD_CASES, ids=SSD_HEAD_IDS)
def test_ssd_head_detection_output_matches_pycaffe(tmp_path, batch, scale, threshold):
    c = caffe_case(tmp_path, ssd_head(threshold), {"data": (batch, 3, 32, 32)}, scale=scale,
                   extra_outputs=["loc", "conf_flatten", "prior"])
    ours, ref = c.run()
    for key in ("loc", "conf_flatten", "prior"):
        assert_close(ours[key], ref[key], 1e-4, key)
    check_detections(ours["det"], ref["det"], batch, threshold)
    assert_detection_padding(ours["det"], ref["det"].shape[2])  # OpenVINO's: an end row, then zeros


PROPOSAL = ('layer { name: "t" type: "Proposal" bottom: "cls" bottom: "bbox" bottom: "info" top: "rois" '
            'proposal_param { feat_stride: 16 base_size: 16 min_size: 4 ratio: 0.5 ratio: 1 ratio: 2 '
            'scale: 2 scale: 4 scale: 8 pre_nms_topn: 200 post_nms_topn: 40 nms_thresh: 0.6 } }\n')


def proposal_inputs():
    h = w = 6
    a = 9
    rng = np.random.default_rng(3)
    return {"cls": rng.uniform(0.01, 1.0, (1, 2 * a, h, w)).astype(np.float32),
            "bbox": (rng.standard_normal((1, 4 * a, h, w)) * 0.2).astype(np.float32),
            "info": np.array([[h * 16, w * 16, 1.0]], np.float32)}


def test_ssd_head_plan_reshape_to_batch_3(tmp_path):
    """An IR made for batch 1 (its Reshape dims say 1) re-shaped by the plan to batch 3
    (Reshape scales dim[0], PriorBox stays [1, 2, ...], DetectionOutput grows), against
    pycaffe run at batch 3."""
    c = caffe_case(tmp_path, SSD_HEAD, {"data": (1, 3, 32, 32)}, scale=0.3, extra_outputs=["conf_flatten"])
    c.plan.reshape({"data": (3, 3, 32, 32)})
    assert c.plan.output_shapes()["det"] == (1, 1, 120, 7)
    x = np.random.default_rng(4).standard_normal((3, 3, 32, 32)).astype(np.float32)
    c.net.blobs["data"].reshape(3, 3, 32, 32)
    c.net.reshape()
    ours, ref = c.run({"data": x})
    assert_close(ours["conf_flatten"], ref["conf_flatten"], 1e-4, "conf")
    kept = ref["det"].shape[2]
    assert kept == 120
    assert_close(ours["det"], ref["det"], 1e-4, "detections")


def test_ssd_priors_are_computed_once_per_shape(tmp_path):
    """The prior boxes read only shapes: computed when the plan is made (folding.py), not
    per call - no step of theirs, no feature map exported to numpy for them."""
    c = caffe_case(tmp_path, SSD_HEAD, {"data": (1, 3, 32, 32)}, scale=0.3)
    rows = []
    ours = c.plan.infer(c.inputs, rows)
    _, ref = c.run()
    kept = ref["det"].shape[2]
    assert_close(ours["det"][:, :, :kept], ref["det"], 1e-4, "detections")
    status = {r.name: (r.status, r.note) for r in rows}
    assert status["prior0"] == status["prior1"] == ("not_run", folding.NOTE)
    assert status["prior"] == ("executed", folding.NOTE)  # the constant DetectionOutput reads
    assert not [r for r in rows if "PriorBox" in r.note], rows  # nothing exported to numpy for them


def test_folded_priors_follow_a_reshape(tmp_path):
    """Folded values belong to the input shapes: a reshape to another image size computes
    them again (here the network's output), against pycaffe at both sizes."""
    net = conv("f1", "data", "f1", "num_output: 4 kernel_size: 3 stride: 2 pad: 1") + (
        'layer { name: "prior0" type: "PriorBox" bottom: "f1" bottom: "data" top: "prior0" prior_box_param { '
        'min_size: 6 max_size: 12 aspect_ratio: 2 flip: true clip: true '
        'variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 } }\n')
    c = caffe_case(tmp_path, net, {"data": (1, 3, 32, 32)})
    for shape in ((1, 3, 32, 32), (1, 3, 40, 48)):
        c.plan.reshape({"data": shape})
        c.net.blobs["data"].reshape(*shape)
        c.net.reshape()
        x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
        ours, ref = c.run({"data": x})
        assert ours["prior0"].shape == ref["prior0"].shape
        assert_close(ours["prior0"], ref["prior0"], 1e-6, f"priors at {shape}")
        assert "prior0" not in [layer.name for layer in c.plan.folded]  # an output: handed out each call


FCN_HEAD = (conv("score", "data", "score", "num_output: 4 kernel_size: 3 stride: 2")
            + conv("up", "score", "up", "num_output: 4 kernel_size: 4 stride: 2 bias_term: false", kind="Deconvolution")
            + 'layer { name: "crop" type: "Crop" bottom: "up" bottom: "data" top: "out" crop_param { axis: 2 offset: 1 } }\n')


def test_fcn_deconv_crop_matches_pycaffe_and_reshapes(tmp_path):
    """FCN-style upsampling: Deconvolution then Crop to the input's size (Crop form 1)."""
    c = caffe_case(tmp_path, FCN_HEAD, {"data": (1, 3, 17, 15)})
    ours, ref = c.run()
    assert_close(ours["crop"], ref["out"], 1e-4, "crop")
    c.plan.reshape({"data": (2, 3, 17, 15)})
    x = np.random.default_rng(6).standard_normal((2, 3, 17, 15)).astype(np.float32)
    c.net.blobs["data"].reshape(2, 3, 17, 15)
    c.net.reshape()
    ours, ref = c.run({"data": x})
    assert_close(ours["crop"], ref["out"], 1e-4, "crop batch 2")

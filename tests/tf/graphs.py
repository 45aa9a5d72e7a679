"""Builder of the small TensorFlow test graphs: one per op / attribute case.

Run as `python tests/tf/graphs.py OUT_DIR` (tests/tf/conftest.py does it once and
caches the result keyed by this file's hash). Each case is a function of its
inputs using seeded constant weights; tf_build freezes it and stores the .pb,
the inputs and TensorFlow's outputs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tf_build import build_cases, case_registry, main, np, tf, w  # noqa: E402

CASES, case = case_registry()


def positive(rng, *shape):
    return tf.constant(rng.uniform(0.5, 1.5, shape).astype(np.float32))


# --- convolutions ---------------------------------------------------------------------
@case("conv_same_odd", (1, 9, 9, 3))
def _(rng, x):
    return tf.nn.conv2d(x, w(rng, 3, 3, 3, 4), strides=1, padding="SAME")


@case("conv_same_even_stride2", (1, 8, 8, 3), batches=(1, 2))
def _(rng, x):
    return tf.nn.conv2d(x, w(rng, 3, 3, 3, 5), strides=2, padding="SAME")


@case("conv_valid_stride2_rect", (1, 11, 9, 2))
def _(rng, x):
    return tf.nn.conv2d(x, w(rng, 3, 2, 2, 4), strides=[1, 2, 3, 1], padding="VALID")


@case("conv_dilated", (1, 12, 12, 3))
def _(rng, x):
    return tf.nn.conv2d(x, w(rng, 3, 3, 3, 4), strides=1, padding="SAME", dilations=2)


@case("conv_explicit_pads", (1, 7, 7, 2))
def _(rng, x):
    return tf.nn.conv2d(x, w(rng, 3, 3, 2, 3), strides=1, padding=[[0, 0], [2, 0], [1, 3], [0, 0]])


@case("depthwise_multiplier2", (1, 8, 8, 3))
def _(rng, x):
    return tf.nn.depthwise_conv2d(x, w(rng, 3, 3, 3, 2), strides=[1, 2, 2, 1], padding="SAME")


@case("atrous_space_to_batch", (1, 12, 12, 3))
def _(rng, x):
    # what tf.nn.atrous_conv2d wrote in TF1: SpaceToBatchND -> Conv2D (VALID) -> BatchToSpaceND
    y = tf.space_to_batch_nd(x, [2, 2], [[2, 2], [2, 2]])
    y = tf.nn.conv2d(y, w(rng, 3, 3, 3, 4), strides=1, padding="VALID")
    return tf.batch_to_space(y, [2, 2], [[0, 0], [0, 0]])


@case("conv_transpose_same_stride2", (1, 5, 5, 4))
def _(rng, x):
    return tf.nn.conv2d_transpose(x, w(rng, 3, 3, 2, 4), output_shape=[1, 10, 10, 2], strides=2, padding="SAME")


@case("conv_transpose_valid", (1, 4, 4, 3))
def _(rng, x):
    return tf.nn.conv2d_transpose(x, w(rng, 3, 3, 2, 3), output_shape=[1, 9, 9, 2], strides=2, padding="VALID")


@case("nested_function_call", (1, 6, 6, 8))
def _(rng, x):
    # Keras 3's grouped Conv2D: a function of its own marked not to inline, so freezing keeps the call
    k = w(rng, 3, 3, 4, 8)

    @tf.function(experimental_attributes={"_noinline": True}, autograph=False)
    def grouped(t):
        return tf.nn.conv2d(t, k, 1, "SAME")
    return tf.nn.relu(grouped(x))


@case("conv1d_dilated", (1, 10, 4))
def _(rng, x):
    # Keras' dilated Conv1D: SpaceToBatchND of NWC -> ExpandDims -> Conv2D -> Squeeze -> BatchToSpaceND
    y = tf.nn.convolution(x, w(rng, 3, 4, 6), padding="SAME", dilations=2)
    return tf.nn.bias_add(y, w(rng, 6))


@case("conv_transpose_output_padding", (1, 5, 6, 3))
def _(rng, x):
    # Keras' output_padding: a VALID output one row and column larger than the kernels cover (11x13 -> 12x14),
    # then the bias (the uncovered border is the bias alone)
    y = tf.nn.conv2d_transpose(x, w(rng, 3, 3, 2, 3), output_shape=[1, 12, 14, 2], strides=2, padding="VALID")
    return tf.nn.bias_add(y, w(rng, 2))


@case("conv_bias_relu", (1, 8, 8, 3))
def _(rng, x):
    y = tf.nn.conv2d(x, w(rng, 3, 3, 3, 6), strides=1, padding="SAME")
    return tf.nn.relu(tf.nn.bias_add(y, w(rng, 6)))


@case("fused_batch_norm", (1, 6, 6, 4))
def _(rng, x):
    y = tf.nn.conv2d(x, w(rng, 1, 1, 4, 4), strides=1, padding="SAME")
    return tf.compat.v1.nn.fused_batch_norm(y, positive(rng, 4), w(rng, 4), mean=w(rng, 4), variance=positive(rng, 4),
                                            epsilon=1e-3, is_training=False)[0]


# --- pooling ---------------------------------------------------------------------------
@case("maxpool_same_even", (1, 8, 8, 3))
def _(rng, x):
    return tf.nn.max_pool2d(x, 3, 2, "SAME")


@case("maxpool_valid", (1, 9, 9, 2))
def _(rng, x):
    return tf.nn.max_pool2d(x, 2, 2, "VALID")


@case("avgpool_same_excludes_padding", (1, 7, 7, 3))
def _(rng, x):
    return tf.nn.avg_pool2d(x, 3, 2, "SAME")


# --- dense ---------------------------------------------------------------------------
@case("matmul_bias", (1, 12))
def _(rng, x):
    return tf.nn.bias_add(tf.matmul(x, w(rng, 12, 5)), w(rng, 5))


@case("matmul_transpose_b", (2, 6), fixed=True)
def _(rng, x):
    return tf.matmul(x, w(rng, 4, 6), transpose_b=True)


@case("matmul_transpose_a", (6, 3), fixed=True)
def _(rng, x):
    return tf.matmul(x, w(rng, 6, 4), transpose_a=True)


@case("conv_flatten_dense_softmax", (1, 6, 6, 3), batches=(1, 2))
def _(rng, x):
    y = tf.nn.relu(tf.nn.conv2d(x, w(rng, 3, 3, 3, 4), strides=2, padding="SAME"))
    y = tf.reshape(y, [-1, 3 * 3 * 4])
    return tf.nn.softmax(tf.matmul(y, w(rng, 36, 7)))


# --- activations -------------------------------------------------------------------------
@case("activations", (1, 5, 5, 4))
def _(rng, x):
    return [tf.nn.relu6(x * 4.0), tf.nn.leaky_relu(x, 0.15), tf.nn.elu(x), tf.sigmoid(x), tf.tanh(x)]


@case("maximum_as_leaky_relu", (1, 6, 6, 3))
def _(rng, x):
    return tf.maximum(x, 0.2 * x)


@case("gelu_forms", (1, 5, 6, 4))
def _(rng, x):
    # each GELU form is one Activation gelu (test_tf_options.py checks the IR); inputs out to |x| ~ 10,
    # where exact GELU's negative tail is ~1e-23
    x = x * 4.0
    return [tf.nn.gelu(x, approximate=False), tf.nn.gelu(x, approximate=True),
            x * 0.5 * (1.0 + tf.math.erf(x / tf.sqrt(2.0))), 0.5 * (x * (1.0 + tf.math.erf(x * 0.70710678)))]


@case("erf_erfc_not_gelu", (1, 4, 4, 3))
def _(rng, x):
    # Erf and Erfc alone, a product that is not GELU (0.4), and a GELU whose gate is also an output
    x = x * 3.0
    gate = 1.0 + tf.math.erf(x * 0.70710678)
    return [tf.math.erf(x), tf.math.erfc(x), 0.4 * x * (1.0 + tf.math.erf(x / tf.sqrt(2.0))), 0.5 * x * gate, gate]


@case("named_identity_output", (1, 6))
def _(rng, x):
    # a tf.identity naming the output, then freezing's own Identity: IR v11 names the Result by both
    return tf.identity(x * 2.0, name="named")


@case("gelu_broadcast_one", (1, 6))
def _(rng, x):
    # GELU's 1 as a higher-rank constant: the result has another shape than x, so it is no one-input layer
    return 0.5 * x * (tf.constant([[[1.0]]]) + tf.math.erf(x * 0.70710678))


@case("batch_matmul", (1, 5, 8))
def _(rng, x):
    # a dense layer on a 3-D tensor (BatchMatMulV2 with a constant: FullyConnected, leading axes kept) and
    # products of two tensors (MatMul), transposed either way
    h = tf.matmul(x, w(rng, 8, 6))
    return [h, tf.matmul(h, x, transpose_a=True), tf.matmul(x, h, adjoint_a=True) * 0.5,
            tf.matmul(h, h, adjoint_b=True)]


@case("attention_einsum", (1, 6, 8))
def _(rng, x):
    # Keras' MultiHeadAttention: heads split by a Reshape, scores and values by Einsum (4-D: NCHW in the IR)
    q, k, v = (tf.reshape(tf.matmul(x, w(rng, 8, 8)), [-1, 6, 2, 4]) for _ in range(3))
    scores = tf.nn.softmax(tf.einsum("BTNH,BSNH->BNTS", q, k) * 0.5)
    return [tf.einsum("BNTS,BSNH->BTNH", scores, v), scores]


@case("attention_heads", (1, 6, 8))
def _(rng, x):
    # the same as Keras has it, the scores no output: the Reshapes around the softmax cancel (move_fold.py), the
    # CPU plan runs the head transposes as views its MatMuls read, the scale as their post-op
    q, k, v = (tf.reshape(tf.matmul(x, w(rng, 8, 8)), [-1, 6, 2, 4]) for _ in range(3))
    scores = tf.nn.softmax(tf.einsum("BTNH,BSNH->BNTS", q, k) * 0.5)
    return [tf.einsum("BNTS,BSNH->BTNH", scores, v)]


@case("embedding_lookup", (1, 7), ints=(0, 40))
def _(rng, x):
    # Keras' Embedding on int32 ids (the model's input): a Gather layer with the table as its blob; twice from
    # one table (token and a second lookup), then what a transformer does with it
    table = w(rng, 40, 6)
    return [tf.nn.relu(tf.gather(table, x) * 2.0 + tf.gather(table, 39 - x, axis=0)), tf.gather(w(rng, 5, 40), x,
                                                                                              axis=1)]


@case("keras_embedding", (1, 7), ints=(-40, 40))
def _(rng, x):
    # Keras' Embedding: negative ids count from the end (where(ids < 0, ids + n, ids)), then the Gather
    return [tf.gather(w(rng, 40, 6), tf.where(x < 0, x + 40, x))]


@case("plain_functions", (1, 3, 4, 5))
def _(rng, x):
    # Exp, Log, Floor, Ceil, Round / Rint (halves to even), a float's Cast to int32 / int64 (toward zero) and back,
    # Softplus (and Mish, x tanh(softplus(x))) on the model's data: IR Activation types (were offload-only)
    y = x * 3.0
    ints = tf.cast(tf.cast(y, tf.int32), tf.float32) + tf.cast(tf.cast(y * 2.0, tf.int64), tf.float32)
    return [tf.exp(x) + tf.math.log(tf.abs(x) + 0.5), tf.floor(y) - tf.math.ceil(y * 0.5),
            tf.round(y * 2.0) + tf.math.rint(y), ints, tf.nn.softplus(y * 8.0), x * tf.tanh(tf.nn.softplus(x))]


@case("math_functions", (1, 3, 4, 5))
def _(rng, x):
    # Sign, the trigonometric and hyperbolic functions and their inverses (each inside its domain), Log1p and Expm1
    # on the model's data: IR Activation types (were offload-only)
    u = tf.tanh(x) * 0.9  # (in (-1, 1))
    return [tf.sign(x) + tf.sin(x * 2.0) * tf.cos(x), tf.tan(tf.clip_by_value(x, -1.2, 1.2)),
            tf.asin(u) - tf.acos(u) + tf.atan(x * 3.0), tf.sinh(x) + tf.cosh(x * 0.5),
            tf.asinh(x * 4.0) + tf.acosh(tf.abs(x) + 1.0) + tf.atanh(u), tf.math.log1p(tf.abs(x)) + tf.math.expm1(x)]


@case("cumsum_positions", (1, 3, 4, 5))
def _(rng, x):
    # Cumsum along the NHWC axes (IR axes 3, 1 and 2), exclusive and reversed, and position ids from a mask as
    # Hugging Face's RoBERTa computes them (cumsum(mask) * mask, 2-D): our CumSum layer (was offload-only)
    mask = tf.cast(tf.reshape(x, [1, -1]) > 0.0, tf.float32)
    return [tf.math.cumsum(x, axis=2), tf.math.cumsum(x, axis=-1, exclusive=True),
            tf.math.cumsum(x * 2.0, axis=1, exclusive=True, reverse=True), tf.math.cumsum(mask, axis=1) * mask + 1.0]


@case("narrow_and_bool_casts", (1, 3, 4, 5))
def _(rng, x):
    # casts of the model's data to bool (x != 0), to uint8 / int8 / int16 (a float's fraction dropped, within the
    # type's range) and between integer types that hold the values (nothing to do): were offload-only
    pixels = tf.cast(tf.clip_by_value(x * 100.0 + 100.0, 0.0, 255.0), tf.uint8)
    small = tf.cast(tf.clip_by_value(x * 50.0, -100.0, 100.0), tf.int8)
    on = tf.cast(tf.nn.relu(x), tf.bool)
    return [tf.cast(pixels, tf.float32), tf.cast(tf.cast(small, tf.int16), tf.float32) + 0.5,
            tf.cast(on, tf.float32) * 2.0, tf.cast(tf.cast(on, tf.int8), tf.float32) + tf.cast(pixels, tf.float32)]


@case("gather_data_by_data", (1, 6, 8))
def _(rng, x):
    # the model's data gathered at indices the data holds (a Gather layer with the dictionary its second input):
    # the row of the best score, and per column the row of its maximum (TensorFlow's first among ties)
    scores = tf.reduce_sum(x * w(rng, 8), axis=-1)
    picked = tf.gather(x, tf.argmax(scores, axis=1), axis=1)
    rows = x[0]
    return [picked * 2.0, tf.gather(rows, tf.argmax(rows, axis=0)) + 1.0]


@case("gather_batch_dims", (1, 6, 8))
def _(rng, x):
    # tf.gather with batch_dims 1 (each batch's rows at its own indices, as BERT-style heads pick token positions):
    # at indices the data holds and at constant ones - the Gather layer's batch_dims, Gather-8's in IR v11
    best = tf.argmax(x, axis=1, output_type=tf.int32)  # [1, 8] rows of the 6
    return [tf.gather(x, best, axis=1, batch_dims=1) * 2.0, tf.gather(x, [[5, 0, 2]], batch_dims=1) + 1.0]


@case("reverse_roll", (1, 3, 4, 5))
def _(rng, x):
    # tf.reverse on the channels (RGB <-> BGR inside a graph) and on both spatial axes, tf.roll over two axes and over
    # a 3-D tensor's middle one (Swin's shifted windows): a StridedSlice of stride -1, Crops and Concats (were
    # offload-only)
    return [tf.reverse(x, [3]) * 2.0, tf.reverse(x, [1, 2]) + 1.0, tf.roll(x, shift=[1, -2], axis=[1, 2]),
            tf.roll(tf.reshape(x, [1, 12, 5]), 5, axis=1) - 1.0]


@case("log_softmax_softsign", (1, 3, 4, 5))
def _(rng, x):
    # tf.nn.log_softmax where the softmax underflows to 0 (x * 60: the LogSoftmax layer stays finite) and over rows
    # of 120 (the GPU's work group a row), tf.nn.softsign (were offload-only)
    rows = tf.reshape(tf.concat([x, x * 0.5], axis=3), [1, 120])
    return [tf.nn.log_softmax(x * 60.0), tf.nn.log_softmax(rows), tf.nn.softsign(x * 3.0)]


@case("top_k", (1, 3, 4, 5))
def _(rng, x):
    # tf.math.top_k over the channels (values and indices) and over rounded values (ties: the lower index first):
    # two ArgMax layers each (were offload-only)
    values, indices = tf.math.top_k(x, 3)
    tied, tied_at = tf.math.top_k(tf.round(tf.reshape(x, [1, 60]) * 2.0), 7)
    return [values * 2.0, tf.cast(indices, tf.float32), tied, tf.cast(tied_at, tf.float32)]


@case("one_hot_float_classes", (1, 3, 4, 5))
def _(rng, x):
    # tf.one_hot of the model's data (the arg max per pixel; then shifted by 2 past depth 6, on/off 2/-1, axis 1);
    # tf.math.is_nan / is_inf / is_finite of data holding NaN (sqrt of negatives) and inf (1 / 0) as tf.where's
    # condition and cast (were offload-only)
    best = tf.argmax(x, axis=-1)
    root, inverse = tf.sqrt(x), 1.0 / tf.round(x)
    return [tf.one_hot(best, 6), tf.one_hot(best + 2, 6, on_value=2.0, off_value=-1.0, axis=1),
            tf.where(tf.math.is_nan(root), tf.zeros_like(root), root), tf.cast(tf.math.is_inf(inverse), tf.float32),
            tf.where(tf.math.is_finite(inverse), inverse, -tf.ones_like(inverse))]


@case("shape_arith_ops", (1, 3, 4, 5))
def _(rng, x):
    # shape arithmetic of TF1 graphs, folded at conversion: ShapeN, BroadcastArgs, InvertPermutation, LinSpace,
    # TruncateMod (were unknown ops) and Div of integers (toward zero: -11 / 2 = -5)
    a, b = tf.shape_n([x, x[:, :1]])
    size = tf.raw_ops.BroadcastArgs(s0=a, s1=b)
    perm = tf.math.invert_permutation(tf.constant([0, 2, 3, 1]) + tf.zeros_like(a))
    five = -tf.raw_ops.Div(x=-(a[3] * 2 + 1), y=2) * (tf.truncatemod(a[3] + 7, 8) - 3)
    y = tf.reshape(x, tf.stack([a[0], a[1] * a[2], five]))
    return [tf.transpose(tf.broadcast_to(x, size), perm) + 1.0, y * tf.raw_ops.LinSpace(start=0.5, stop=1.5, num=5)]


@case("crop_and_resize", (1, 8, 10, 3))
def _(rng, x):
    # tf.image.crop_and_resize outside the OD API: constant boxes (one past the image's edges: zeros there, one a
    # line) at constant indices, and boxes and indices the model computes (flipped where y1 > y2): ROIPooling
    # method=bilinear (was offload-only)
    boxes = tf.constant([[0.1, 0.2, 0.7, 0.9], [-0.2, 0.0, 0.5, 1.1], [0.3, 0.3, 0.3, 0.8]])
    fixed = tf.image.crop_and_resize(x, boxes, [0, 0, 0], [5, 4])
    learnt = tf.sigmoid(tf.reshape(tf.reduce_mean(x, axis=[1, 2]) @ w(rng, 3, 8, scale=2.0), [2, 4]))
    index = tf.cast(tf.floor(learnt[:, 0] * 0.5), tf.int32)  # (0: the one image)
    return [fixed, tf.image.crop_and_resize(x * 2.0, learnt, index, [3, 3])]


@case("gather_nd", (1, 6, 8))
def _(rng, x):
    # tf.gather_nd of the model's data at constant index tuples (entries; rows), at tuples the data holds (each row's
    # arg max picked: CenterNet-style), and of a constant table at tuples the data holds (were offload-only)
    best = tf.argmax(x, axis=2, output_type=tf.int32)  # [1, 6]
    rows = tf.range(6)[None]
    picks = tf.stack([tf.zeros_like(rows), rows, best], -1)  # [1, 6, 3]: (batch, row, column)
    ids = tf.stack([tf.minimum(best[0], 4), best[0]], -1)  # [6, 2] into a [5, 8, 4] table
    return [tf.gather_nd(x, [[0, 2, 3], [0, 5, 0]]) * 2.0, tf.gather_nd(x, [[0, 4], [0, 1]]) + 1.0,
            tf.gather_nd(x, picks), tf.gather_nd(w(rng, 5, 8, 4), ids)]


@case("fake_quant", (1, 6, 6, 3))
def _(rng, x):
    # a quantization-aware-trained block as its frozen graph holds it: 8-bit weights with a range per output
    # channel (folded at conversion), ranges on the activations (our FakeQuantize layer: Args, Vars; 4 bits with
    # narrow_range and a range nudged to hold 0) - were offload-only
    weights = tf.quantization.fake_quant_with_min_max_vars_per_channel(
        w(rng, 3, 3, 3, 4), -tf.ones(4) * 0.8, tf.constant([0.5, 0.9, 1.1, 0.7]))
    y = tf.nn.conv2d(tf.quantization.fake_quant_with_min_max_args(x, min=-2.5, max=3.1), weights, 1, "SAME")
    return [tf.quantization.fake_quant_with_min_max_vars(tf.nn.relu6(y), tf.constant(0.0), tf.constant(6.0)),
            tf.quantization.fake_quant_with_min_max_vars(x * 2.0, tf.constant(-1.7), tf.constant(2.3), num_bits=4,
                                                         narrow_range=True)]


@case("resize_bicubic", (1, 5, 7, 3))
def _(rng, x):
    # tf.image.resize(method="bicubic") up and down (half-pixel centres: Keys' a = -0.5, no weight outside the
    # image), and the TF1 resize_bicubic with aligned corners and with neither (a = -0.75, edge taps clamped): our
    # Interpolate's cubic mode (was offload-only)
    return [tf.image.resize(x, [11, 9], method="bicubic"), tf.image.resize(x * 2.0, [3, 4], method="bicubic"),
            tf.compat.v1.image.resize_bicubic(x, [9, 13], align_corners=True),
            tf.compat.v1.image.resize_bicubic(x + 1.0, [8, 10])]


@case("atan2_div_no_nan", (1, 4, 5, 4))
def _(rng, x):
    # tf.math.atan2 in all four quadrants and on the axes (x exactly 0, y 0 too), of a constant x;
    # tf.math.divide_no_nan by data holding zeros (0 there), of a constant by it; xdivy and xlogy with x holding
    # zeros (0 there, log(0) too); multiply_no_nan by data holding zeros: were offload-only
    a, b = x[..., :2], tf.round(x[..., 2:] * 1.5)
    return [tf.math.atan2(a, b), tf.math.atan2(tf.round(a), b) * 2.0, tf.math.atan2(a, 0.5),
            tf.math.divide_no_nan(a, b), tf.math.divide_no_nan(3.0, b), tf.math.xdivy(b, a + 3.0),
            tf.math.xlogy(b, tf.abs(a) * tf.abs(b)), tf.math.multiply_no_nan(1.0 / a, b)]


@case("legacy_tf1_ops", (1, 4, 5, 3))
def _(rng, x):
    # ops of old TF1 graphs: Reverse (a bool per axis), BiasAddV1, ClipByValue of constant bounds and of tensor
    # ones; tf.image.adjust_contrast (AdjustContrastv2) - were unknown or offload-only
    y = tf.raw_ops.Reverse(tensor=x, dims=[False, True, False, True])
    z = tf.raw_ops.BiasAddV1(value=x, bias=tf.constant([0.5, -1.0, 2.0]))
    low = tf.broadcast_to(tf.reduce_min(x, axis=3, keepdims=True) * 0.5, [1, 4, 5, 3])
    return [y * 2.0, z, tf.raw_ops.ClipByValue(t=x, clip_value_min=-0.5, clip_value_max=0.75),
            tf.raw_ops.ClipByValue(t=x, clip_value_min=low, clip_value_max=tf.abs(x) * 0.5 + 0.1),
            tf.image.adjust_contrast(x, 1.7), tf.image.adjust_contrast(x + 1.0, 0.4)]


@case("floor_div_mod", (1, 6, 8))
def _(rng, x):
    # FloorDiv and FloorMod on the model's data: the row and column of an arg max in a flattened map (CenterNet's
    # decoding, integers), and of floats by constant divisors of both signs and by a tensor (were conversion-only)
    best = tf.argmax(tf.reshape(x, [1, 48]), axis=1, output_type=tf.int32)
    rows_cols = tf.cast(tf.stack([best // 8, best % 8, (best - 50) // 7, (best - 50) % 7], axis=1), tf.float32)
    f = x * 3.0
    divisor = -(tf.abs(x[:, :, :1]) + 0.5)
    return [rows_cols, tf.math.floormod(f, 0.75), tf.math.floordiv(f, -1.25), tf.math.floormod(f, divisor),
            tf.math.floordiv(f, divisor)]


@case("extract_patches", (1, 8, 12, 3))
def _(rng, x):
    # tf.image.extract_patches: a ViT's 4x4 patchify (VALID, stride 4), 3x3 windows every 2 pixels with SAME padding
    # (zeros past the edges), and dilated (rates 2) windows: a Convolution of one-hot weights (was offload-only)
    patches = tf.image.extract_patches(x, [1, 4, 4, 1], [1, 4, 4, 1], [1, 1, 1, 1], "VALID")
    return [tf.reshape(patches, [1, 6, 48]), tf.image.extract_patches(x, [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1],
                                                                         "SAME"),
            tf.image.extract_patches(x * 2.0, [1, 2, 3, 1], [1, 1, 2, 1], [1, 2, 2, 1], "VALID")]


# --- volumes (NDHWC: video, scans) ------------------------------------------------------
@case("conv3d_pool3d", (1, 5, 9, 8, 3), batches=(1, 2))
def _(rng, x):
    # a C3D / 3-D U-Net block: Conv3D SAME + bias + ReLU, MaxPool3D 2x2x2 over odd sizes (SAME: padded at the end),
    # Conv3D VALID with strides (1, 2, 2), AvgPool3D SAME 3x3x3 (the average of the values inside only), and a
    # 1x3x3 Conv3D of depth stride 2 (TensorFlow's CPU kernels take no grouped or dilated Conv3D)
    y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv3d(x, w(rng, 3, 3, 3, 3, 8), [1] * 5, "SAME"), w(rng, 8)))
    pooled = tf.nn.max_pool3d(y, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "SAME")
    strided = tf.nn.conv3d(y, w(rng, 2, 3, 3, 8, 4), [1, 1, 2, 2, 1], "VALID")
    return [pooled, tf.nn.avg_pool3d(strided, [1, 3, 3, 3, 1], [1, 1, 1, 1, 1], "SAME"),
            tf.nn.avg_pool3d(y, [1, 1, 3, 2, 1], [1, 1, 2, 2, 1], "VALID"),
            tf.nn.conv3d(y, w(rng, 1, 3, 3, 8, 6), [1, 2, 1, 1, 1], "SAME")]


@case("conv3d_zero_padding", (1, 4, 6, 5, 2))
def _(rng, x):
    # Keras' ZeroPadding3D before a VALID Conv3D and before an AvgPool3D (the padded zeros counted): the Pads fold
    # into the layers' padding
    y = tf.pad(x, [[0, 0], [1, 1], [2, 0], [0, 1], [0, 0]])
    return [tf.nn.conv3d(y, w(rng, 3, 3, 2, 2, 3), [1] * 5, "VALID"),
            tf.nn.avg_pool3d(tf.pad(x, [[0, 0], [0, 1], [1, 1], [1, 0], [0, 0]]), [1, 2, 3, 2, 1], [1, 2, 2, 1, 1],
                             "VALID")]


@case("conv3d_batch_norm_global_pool", (1, 4, 6, 5, 3))
def _(rng, x):
    # Keras' BatchNormalization of a 5-D tensor (x * scale + shift per channel: folded into the convolution through
    # the layout Permute) and GlobalAveragePooling3D / a sum and max over D, H, W (global 3-D poolings)
    y = tf.nn.conv3d(x, w(rng, 3, 3, 3, 3, 6), [1] * 5, "SAME")
    y = tf.nn.relu(y * positive(rng, 6) + w(rng, 6))
    return [tf.reduce_mean(y, axis=[1, 2, 3]), tf.reduce_sum(y, axis=[1, 2, 3], keepdims=True),
            tf.reduce_max(y, axis=[1, 2, 3])]


@case("conv3d_transpose", (1, 3, 5, 4, 4))
def _(rng, x):
    # a 3-D U-Net's up path: conv3d_transpose stride 2 SAME (to 6x10x8; a scale and bias per channel after it fold
    # into its weights and biases) and VALID with an odd output (7x11x9, what
    # Keras' Conv3DTranspose makes of stride 2, kernel 3), then a stride (1, 2, 2) one whose output size leaves the
    # last rows to no kernel (output_padding: zeros)
    up = tf.nn.conv3d_transpose(x, w(rng, 2, 2, 2, 6, 4), [1, 6, 10, 8, 6], [1, 2, 2, 2, 1], "SAME")
    odd = tf.nn.conv3d_transpose(x, w(rng, 3, 3, 3, 2, 4), [1, 7, 11, 9, 2], [1, 2, 2, 2, 1], "VALID")
    padded = tf.nn.conv3d_transpose(x, w(rng, 1, 2, 2, 3, 4), [1, 3, 11, 9, 3], [1, 1, 2, 2, 1], "VALID")
    return [tf.nn.relu(up * positive(rng, 6) + w(rng, 6)), odd, padded]


@case("lrn_selu_depth_space", (1, 6, 8, 8))
def _(rng, x):
    # TensorFlow's LRN (the IR's Norm across channels: Caffe's window and alpha), Selu (elu, then its scale),
    # DepthToSpace into a convolution (a pixel shuffle) and SpaceToDepth (YOLOv2's reorg): Reshape, Permute, Reshape
    shuffled = tf.nn.depth_to_space(x, 2)
    return [tf.nn.local_response_normalization(x, depth_radius=2, bias=1.5, alpha=0.05, beta=0.75),
            tf.nn.selu(x * 2.0), tf.nn.relu(tf.nn.conv2d(shuffled, w(rng, 3, 3, 2, 4), 1, "SAME")),
            tf.nn.space_to_depth(x, 2)]


@case("argmin_ties_broadcast", (1, 4, 5, 6))
def _(rng, x):
    # ArgMax and ArgMin with ties (a ReLU's zeros: TensorFlow takes the first index, Caffe's ArgMax the last) and
    # BroadcastTo (a Reshape to its rank where needed, then Tiles)
    r = tf.nn.relu(x - 0.5)
    return [tf.argmax(r, axis=-1), tf.argmin(r, axis=1), tf.broadcast_to(x[:, :1], [1, 4, 5, 6]) * 2.0,
            tf.broadcast_to(tf.reshape(x, [4, 5, 6])[0], [3, 5, 6]) + 1.0]


@case("gather_of_data", (1, 5, 6, 4))
def _(rng, x):
    # the model's data gathered at constant indices (Crops of the runs of consecutive indices and a Concat):
    # BGR <-> RGB of the channels (NCHW's axis 1 in the IR), runs and repeats, a scalar index (drops the axis),
    # 2-D indices (split the axis), of a 3-D tensor
    y = tf.reshape(x, [1, 30, 4])
    return [tf.nn.relu(tf.gather(x, [2, 1, 0], axis=-1)), tf.gather(x, [0, 1, 2, 5, 3, 4, 5, 5], axis=2),
            tf.gather(x, 3, axis=1), tf.gather(y, [[4, 5], [29, 0], [7, 7]], axis=1),
            tf.gather(x, [1, 2, 3], axis=3) * 2.0]


@case("comparisons", (1, 4, 6), (1, 4, 6))
def _(rng, x, y):
    # every comparison on the model's data (an Eltwise comparison: 1.0 where it holds): of a tensor and a constant
    # either way round, of two tensors (ties: where max(x, 0) is x); read by tf.where and by a Cast to float
    c = tf.constant(rng.standard_normal(6).astype(np.float32))
    held = [x < 0.25, 0.25 < x, x <= c, x >= y, tf.equal(tf.maximum(x, 0.0), x), x != y]
    # and, or, not of them (Keras joins an attention mask and the causal one with logical_and)
    held += [tf.logical_and(held[1], held[3]), tf.logical_or(held[2], tf.constant([True, False] * 3)),
             tf.logical_not(held[5])]
    return [tf.where(held[0], x, y)] + [tf.cast(h, tf.float32) * (i + 1.0) for i, h in enumerate(held[1:])]


_LAYER_NORMS = []  # (Keras layers made once, outside the traced function: their variables are its constants)


@case("causal_select", (1, 6, 4))
def _(rng, x):
    # a causal attention mask: band_part of constant ones (folded), then tf.where over the scores (Select);
    # and a SelectV2 whose condition broadcasts
    scores = tf.matmul(x, x, transpose_b=True)
    causal = tf.linalg.band_part(tf.ones([6, 6]), -1, 0) > 0.5
    masked = tf.nn.softmax(tf.where(causal, scores, -1e9))
    return [masked, tf.where(tf.constant([True, False, True, True]), x, x * -2.0)]


@case("layer_norm", (1, 5, 8))
def _(rng, x):
    # Keras 3's LayerNormalization: Mean, SquaredDifference, Mean, eps, Rsqrt, gamma, beta -> one LayerNorm;
    # without beta / gamma; and a 4-D one (ConvNeXt's: the channels of each pixel, IR axis 1)
    import keras
    inputs = [x * 3.0 + 1.0, x, x, tf.reshape(x, [-1, 2, 4, 5])]
    if not _LAYER_NORMS:
        with tf.init_scope():
            for (center, scale), data in zip(((True, True), (False, True), (True, False), (True, True)), inputs):
                layer = keras.layers.LayerNormalization(epsilon=1e-3, center=center, scale=scale)
                layer.build((None,) + tuple(data.shape[1:]))
                if scale:
                    layer.gamma.assign(rng.uniform(0.5, 1.5, layer.gamma.shape).astype(np.float32))
                if center:
                    layer.beta.assign(rng.standard_normal(layer.beta.shape).astype(np.float32))
                _LAYER_NORMS.append(layer)
    return [layer(data) for layer, data in zip(_LAYER_NORMS, inputs)]


@case("dense_bias_moves", (1, 6, 8))
def _(rng, x):
    # Keras' Dense on a 3-D tensor (Tensordot: Reshape, MatMul, Reshape, then BiasAdd) and EinsumDense's heads
    # (its bias [heads, size] added after the Reshape to 4-D: NCHW in the IR, a Permute before the Add): both
    # biases go into their FullyConnected (core/middle/move_fold.py); a bias per row is no FC bias and stays
    dense = tf.nn.bias_add(tf.tensordot(x, w(rng, 8, 12), axes=1), tf.constant(rng.standard_normal(12), tf.float32))
    heads = tf.reshape(tf.matmul(tf.reshape(x, [-1, 8]), w(rng, 8, 8)), [-1, 6, 2, 4])
    heads = heads + tf.constant(rng.standard_normal((2, 4)), tf.float32)
    rows = tf.tensordot(x, w(rng, 8, 4), axes=1) + tf.constant(rng.standard_normal((6, 1)), tf.float32)
    return [tf.nn.relu(dense), tf.transpose(heads, [0, 2, 1, 3]), rows]


_BLOCK_NORMS = []  # (as _LAYER_NORMS)


@case("convnext_block", (1, 5, 6, 8))
def _(rng, x):
    # ConvNeXt's block: a depthwise convolution, LayerNorm over the channels, a dense layer 4x wide, GELU, a
    # dense layer back, the layer scale, the residual. Folded: the biases and the scale into the FullyConnected
    # layers, the layout Permutes around GELU (they cancel), the one before the LayerNorm moved above it
    import keras
    if not _BLOCK_NORMS:
        with tf.init_scope():
            layer = keras.layers.LayerNormalization(epsilon=1e-6)
            layer.build((None, 5, 6, 8))
            layer.gamma.assign(rng.uniform(0.5, 1.5, 8).astype(np.float32))
            layer.beta.assign(rng.standard_normal(8).astype(np.float32))
            _BLOCK_NORMS.append(layer)
    y = tf.nn.depthwise_conv2d(x, w(rng, 3, 3, 8, 1), [1, 1, 1, 1], "SAME")
    y = _BLOCK_NORMS[0](y)
    y = tf.nn.gelu(tf.tensordot(y, w(rng, 8, 32), axes=1) + tf.constant(rng.standard_normal(32), tf.float32))
    y = tf.tensordot(y, w(rng, 32, 8), axes=1) + tf.constant(rng.standard_normal(8), tf.float32)
    return [x + y * tf.constant(rng.uniform(0.5, 1.5, 8), tf.float32)]


@case("softmax_4d", (1, 3, 4, 6))
def _(rng, x):
    return tf.nn.softmax(x * 3.0)


# --- element-wise -----------------------------------------------------------------------
@case("eltwise_constants", (1, 4, 5, 3))
def _(rng, x):
    c = rng.standard_normal(3).astype(np.float32)
    full = rng.standard_normal((4, 5, 1)).astype(np.float32)
    return [x + 1.5, x - c, c - x, x * c, x / (np.abs(c) + 1), 2.0 / (x * x + 1), x * full, tf.maximum(x, -0.3),
            tf.minimum(x, 0.4), tf.minimum(x, full), tf.square(x), tf.sqrt(tf.abs(x) + 1),
            tf.math.rsqrt(tf.abs(x) + 1), -x, tf.math.squared_difference(x, c)]


@case("eltwise_tensors", (1, 4, 4, 3), (1, 4, 4, 3))
def _(rng, x, y):
    return [x + y, x - y, x * y, x / (tf.abs(y) + 1), tf.maximum(x, y), tf.minimum(x, y),
            tf.math.squared_difference(x, y)]


@case("eltwise_broadcast_tensors", (1, 5, 6, 4))
def _(rng, x):
    se = tf.reduce_mean(x, axis=[1, 2], keepdims=True)   # (N, 1, 1, C): squeeze-excite style
    row = tf.reduce_mean(x, axis=[2], keepdims=True)     # (N, H, 1, C)
    return [x * tf.sigmoid(se), x + row, x - tf.reduce_mean(x, axis=3, keepdims=True)]


@case("rank3_per_channel", (1, 6, 5))
def _(rng, x):
    return tf.nn.bias_add(x, w(rng, 5)) * w(rng, 5)


# --- shapes, joins, slices ------------------------------------------------------------------
@case("concat_axes", (1, 4, 4, 3), (1, 4, 4, 2))
def _(rng, x, y):
    return [tf.concat([x, y], axis=-1), tf.concat([x, x], axis=1), tf.concat([x, tf.zeros_like(x) + 2.0], axis=2)]


@case("reduce_mean_sum", (1, 5, 6, 4))
def _(rng, x):
    return [tf.reduce_mean(x, axis=[1, 2]), tf.reduce_mean(x, axis=[1, 2], keepdims=True),
            tf.reduce_sum(x, axis=[1, 2]), tf.reduce_sum(x, axis=3), tf.reduce_mean(x, axis=1),
            tf.reduce_max(x, axis=[1, 2]), tf.reduce_mean(x, axis=[1, 3], keepdims=True),
            x * tf.reduce_sum(x) * 0.01]  # (a full reduction: a 0-D tensor)


@case("pad_into_conv", (1, 7, 7, 3))
def _(rng, x):
    y = tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]])
    return tf.nn.conv2d(y, w(rng, 3, 3, 3, 4), strides=2, padding="VALID")


@case("pad_into_maxpool_after_relu", (1, 8, 8, 3))
def _(rng, x):
    y = tf.pad(tf.nn.relu(x), [[0, 0], [1, 1], [1, 1], [0, 0]])
    return tf.nn.max_pool2d(y, 3, 2, "VALID")


@case("pad_layers", (1, 5, 6, 3))
def _(rng, x):
    return [tf.pad(x, [[0, 0], [2, 1], [1, 2], [0, 0]], mode="REFLECT"),
            tf.pad(x, [[0, 0], [1, 2], [2, 0], [0, 0]], mode="SYMMETRIC"),
            tf.pad(x, [[0, 0], [1, 0], [0, 1], [1, 1]], constant_values=1.5),
            tf.nn.max_pool2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), 3, 2, "VALID")]


@case("resize_bilinear", (1, 5, 7, 3))
def _(rng, x):
    return [tf.compat.v1.image.resize_bilinear(x, [10, 9], half_pixel_centers=True),
            tf.compat.v1.image.resize_bilinear(x, [9, 13], align_corners=True),
            tf.compat.v1.image.resize_bilinear(x, [8, 11])]


@case("resize_nearest", (1, 18, 7, 2))
def _(rng, x):
    return [tf.compat.v1.image.resize_nearest_neighbor(x, [20, 14]),
            tf.compat.v1.image.resize_nearest_neighbor(x, [20, 9], align_corners=True),
            tf.compat.v1.image.resize_nearest_neighbor(x, [13, 16], half_pixel_centers=True)]


@case("reshape_squeeze_expand", (1, 4, 6, 2))
def _(rng, x):
    return [tf.reshape(x, [1, 8, 3, 2]), tf.reshape(x, [1, 48]), tf.expand_dims(tf.reduce_mean(x, axis=[1, 2]), 1),
            tf.squeeze(tf.reduce_mean(x, axis=[1, 2], keepdims=True), axis=[1, 2]),
            tf.reshape(tf.reshape(x, [1, 24, 2]), [1, 2, 12, 2])]


@case("split_and_splitv", (1, 4, 6, 6))
def _(rng, x):
    a, b, c = tf.split(x, 3, axis=3)
    d, e, _ = tf.split(x, [1, 3, 2], axis=2)
    f, _ = tf.split(x, [3, -1], axis=1)
    return [a * 2.0 + c, b, d, e * 3.0, f]


@case("strided_slices", (1, 6, 8, 4))
def _(rng, x):
    return [x[:, 1:5, ::2, :3], x[:, -3:, 2, 1:], x[..., 1], x[:, tf.newaxis, 2:4, 3:7, 0:2], x[:, ::-1, 1:7:3, :]]


@case("transpose", (1, 3, 4, 5))
def _(rng, x):
    return [tf.transpose(x, [0, 3, 1, 2]), tf.transpose(x, [0, 2, 1, 3])]


@case("shape_arithmetic", (1, 4, 4, 3), batches=(1, 2))
def _(rng, x):
    n = tf.shape(x)[0]
    flat = tf.reshape(x, tf.stack([n, -1]))
    bias = tf.fill([tf.shape(x)[3]], 0.5) + tf.cast(tf.range(3), tf.float32)
    return [flat, x + bias]


@case("pack_unpack", (1, 3, 4, 2))
def _(rng, x):
    rows = tf.unstack(x, axis=1)
    return [tf.stack([rows[0], rows[2]], axis=1), rows[1] * 2.0, tf.stack([x[..., 0], x[..., 1]], axis=-1)]


@case("l2_normalize", (1, 4, 5, 6))
def _(rng, x):
    return [tf.math.l2_normalize(x, axis=-1), tf.math.l2_normalize(x, axis=[1, 2, 3]),
            tf.math.l2_normalize(x, axis=1)]


@case("tile", (1, 2, 3, 2))
def _(rng, x):
    return tf.tile(x, [1, 2, 1, 3])


@case("cast_identity_chain", (1, 4, 4, 2))
def _(rng, x):
    y = tf.identity(tf.identity(tf.cast(x, tf.float32)))
    return tf.stop_gradient(y) * 2.0


@case("two_inputs_two_outputs", (1, 6, 6, 3), (1, 6), names=["image", "v"])
def _(rng, x, v):
    y = tf.nn.relu(tf.nn.conv2d(x, w(rng, 3, 3, 3, 6), strides=1, padding="SAME"))
    pooled = tf.reduce_mean(y, axis=[1, 2])
    return [pooled + v, tf.nn.max_pool2d(y, 2, 2, "VALID")]


@case("argmax_addn", (1, 4, 5, 6))
def _(rng, x):
    total = tf.math.add_n([x, x * 2.0, tf.nn.relu(x)])
    return [total, tf.cast(tf.argmax(x, axis=-1), tf.float32), tf.cast(tf.argmax(x, axis=1), tf.float32)]


# --- options: cutting and preprocessing ------------------------------------------------
def cutting_net(rng, x):
    relu1 = tf.nn.relu(tf.nn.conv2d(x, w(rng, 3, 3, 3, 4), strides=1, padding="SAME", name="conv1"), name="relu1")
    conv2 = tf.nn.conv2d(relu1, w(rng, 3, 3, 4, 5), strides=1, padding="SAME", name="conv2")
    pool = tf.nn.max_pool2d(tf.nn.relu(conv2, name="relu2"), 2, 2, "VALID", name="pool")
    return relu1, conv2, pool


def cutting_intermediates(seed, inputs):
    """TensorFlow's relu1 and conv2 of the cutting case (run eagerly with the same weights)."""
    relu1, conv2, _ = cutting_net(np.random.default_rng(seed), tf.constant(inputs["x"]))
    return {"intermediate": lambda: [relu1.numpy(), conv2.numpy()]}


@case("cutting", (1, 8, 8, 3), runs=cutting_intermediates)
def _(rng, x):
    return cutting_net(rng, x)[2]


MEAN, SCALE = np.array([120.0, 110.0, 100.0], np.float32), np.array([60.0, 50.0, 40.0], np.float32)


def preprocessed(rng, inputs):
    """Model inputs for raw images r: (r - mean) / scale, the same with r's channels reversed, r / 255."""
    raw = rng.uniform(0, 255, inputs["x"].shape).astype(np.float32)
    return {"raw": {"x": raw}, "mean_scale": {"x": (raw - MEAN) / SCALE},
            "mean_scale_reversed": {"x": (raw[..., ::-1] - MEAN) / SCALE}, "scale255": {"x": raw / 255.0}}


_RECURRENT = []  # (as _LAYER_NORMS)


def _recurrent_layers(rng) -> list:
    import keras
    if not _RECURRENT:
        with tf.init_scope():
            for layer, features in ((keras.layers.LSTM(6), 5), (keras.layers.GRU(4, return_sequences=True), 5),
                                    (keras.layers.SimpleRNN(3, go_backwards=True, return_sequences=True), 5),
                                    (keras.layers.Bidirectional(keras.layers.LSTM(4, return_sequences=True)), 5),
                                    (keras.layers.GRU(3, reset_after=False), 8)):
                layer.build((None, 7, features))
                layer.set_weights([(rng.standard_normal(v.shape) * 0.5).astype(np.float32)
                                   for v in layer.get_weights()])
                _RECURRENT.append(layer)
    return _RECURRENT


@case("keras_recurrent", (1, 7, 5), batches=(1, 2))
def _(rng, x):
    # Keras' recurrent layers as freezing lowers them - a while loop over TensorLists of the time steps - unrolled
    # (core/front/tf/loops/): LSTM's last output, GRU's sequence (reset_after), SimpleRNN backwards, a
    # Bidirectional LSTM's sequence into a GRU with reset_after=False
    lstm, gru, simple, bidirectional, gru_before_reset = _recurrent_layers(rng)
    return [lstm(x), gru(x), simple(x), gru_before_reset(bidirectional(x))]


_MASKED = []  # (as _LAYER_NORMS)


def _keras_made(rng, store: list, build):
    """`build()`'s layers, made once outside the traced function with seeded weights."""
    if not store:
        with tf.init_scope():
            for layer in build():
                layer.set_weights([(rng.standard_normal(v.shape) * 0.5).astype(np.float32)
                                   for v in layer.get_weights()])
                store.append(layer)
    return store


@case("keras_masked_lstm", (1, 8), ints=(0, 12))
def _(rng, x):
    # an Embedding with mask_zero into an LSTM that returns its states: the mask makes each step a Select between
    # the new state and the last (ids 0 are padding, here anywhere in the sequence)
    import keras

    def build():
        embedding, lstm = keras.layers.Embedding(12, 6, mask_zero=True), keras.layers.LSTM(5, return_state=True)
        embedding.build((None, 8))
        lstm.build((None, 8, 6))
        return [embedding, lstm]
    embedding, lstm = _keras_made(rng, _MASKED, build)
    return list(lstm(embedding(x), mask=embedding.compute_mask(x)))


_CONV_LSTM = []  # (as _LAYER_NORMS)


@case("keras_conv_lstm", (1, 4, 6, 6, 2))
def _(rng, x):
    # ConvLSTM2D: a Conv2D of the input and one of the state per step (5-D input, NCDHW in the IR)
    import keras

    def build():
        layer = keras.layers.ConvLSTM2D(3, 3, padding="same")
        layer.build((None, 4, 6, 6, 2))
        return [layer]
    return _keras_made(rng, _CONV_LSTM, build)[0](x)


@case("counted_loops", (1, 6, 4), batches=(1, 2))
def _(rng, x):
    # loops of a fixed trip count: tf.scan over the time steps, a counter against a constant, maximum_iterations
    # with an always-true condition, and a loop in a loop (the inner one unrolled first)
    wx, wh = w(rng, 4, 5), w(rng, 5, 5)
    h0 = tf.matmul(x[:, 0, :], tf.zeros([4, 5]))
    scanned = tf.scan(lambda h, xt: tf.tanh(tf.matmul(xt, wx) + tf.matmul(h, wh)), tf.transpose(x, [1, 0, 2]),
                      initializer=h0)
    _, counted = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, tf.tanh(a) + x), (tf.constant(0), x))
    capped = tf.while_loop(lambda a: tf.constant(True), lambda a: a * 0.5 + x, (x,), maximum_iterations=4)

    def outer(i, a):
        _, inner = tf.while_loop(lambda j, b: j < 2, lambda j, b: (j + 1, tf.sin(b) * 0.9 + a * 0.1), (0, a))
        return i + 1, inner + tf.cast(i, tf.float32)
    _, nested = tf.while_loop(lambda i, a: i < 3, outer, (tf.constant(0), x))
    return [tf.transpose(scanned, [1, 0, 2]), counted, capped, nested]


@case("concat_cells", (1, 6, 4), batches=(1, 2))
def _(rng, x):
    # TF1's cells: the step and the state side by side in one product (BasicRNNCell; BasicLSTMCell's gates i, j,
    # f, o with its forget bias), scanned over the time steps
    w_rnn, b_rnn, w_lstm, b_lstm = w(rng, 9, 5), w(rng, 5), w(rng, 9, 20), w(rng, 20)
    steps = tf.transpose(x, [1, 0, 2])
    zeros = tf.matmul(x[:, 0, :], tf.zeros([4, 5]))
    rnn = tf.scan(lambda h, xt: tf.tanh(tf.matmul(tf.concat([xt, h], 1), w_rnn) + b_rnn), steps, initializer=zeros)

    def lstm(state, xt):
        c, h = tf.unstack(state)
        i, j, f, o = tf.split(tf.nn.bias_add(tf.matmul(tf.concat([xt, h], 1), w_lstm), b_lstm), 4, axis=1)
        c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
        return tf.stack([c, tf.tanh(c) * tf.sigmoid(o)])
    states = tf.scan(lstm, steps, initializer=tf.stack([zeros, zeros]))
    return [tf.transpose(rnn, [1, 0, 2]), tf.transpose(states[:, 1], [1, 0, 2])]


@case("preprocess_into_conv", (1, 8, 8, 3), feeds=preprocessed)
def _(rng, x):
    return tf.nn.bias_add(tf.nn.conv2d(x, w(rng, 3, 3, 3, 4), strides=2, padding="VALID"), w(rng, 4))


@case("preprocess_padded_conv", (1, 8, 8, 3), feeds=preprocessed)
def _(rng, x):
    # the mean cannot go into a padded convolution: the border would see it where the padding is zero
    return tf.nn.bias_add(tf.nn.conv2d(x, w(rng, 3, 3, 3, 4), strides=2, padding="SAME"), w(rng, 4))


@case("preprocess_no_conv", (1, 4, 4, 3), feeds=preprocessed)
def _(rng, x):
    return tf.nn.max_pool2d(x, 2, 2, "VALID") * w(rng, 3)


@case("erf_extension", (1, 4, 5, 3))
def _(rng, x):
    return tf.nn.relu(tf.math.erf(x) + 0.25)


if __name__ == "__main__":
    main(lambda writer: build_cases(writer, CASES))

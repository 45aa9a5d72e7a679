"""Builder of the TensorFlow graphs of the TF worker tests: ops the converter does
not support (Cumprod, Igamma, Einsum with '...', BesselI0e, BesselI1e, Any, ApproximateEqual, while loops whose
trip count depends on the data or passes the unrolling limit; a tf.scan, unrolled unless a pattern names it)
and Erf and Softplus (native, the tests offload them by pattern), mixed with ops it
does (a cast to int, Floor, a Gather of the data at constant indices: native now), in
name scopes the offload patterns select.

Run as `python tests/tf_worker/offload_graphs.py OUT_DIR` (tests/tf_worker/conftest.py does
it once in a subprocess and caches the result keyed by this file's hash). Each case
is a function of its inputs with seeded constant weights; tests/tf/tf_build.py
freezes it and stores the .pb, the inputs and TensorFlow's outputs.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tf"))

from tf_build import build_cases, case_registry, main, tf, w  # noqa: E402

CASES, case = case_registry()


def conv(rng, x, cout, k=3, name=None):
    cin = int(x.shape[-1])
    return tf.nn.conv2d(x, w(rng, k, k, cin, cout, scale=(2.0 / (k * k * cin)) ** 0.5), strides=1, padding="SAME",
                        name=name)


@case("unsupported_chain", (1, 8, 8, 3))
def _(rng, x):
    with tf.name_scope("stem"):
        y = tf.nn.relu(conv(rng, x, 4))
    with tf.name_scope("mid"):
        y = tf.math.bessel_i0e(y * 0.5)
        y = conv(rng, y, 5)
    with tf.name_scope("head"):
        y = tf.math.cumprod(y, axis=2)
        return tf.nn.relu(y - 0.1)


@case("igamma_two_inputs", (1, 6, 6, 4), (1, 6, 6, 4))
def _(rng, x, y):
    # the regularized incomplete gamma function of two tensors (Atan2 was the example until it was native)
    a = tf.abs(conv(rng, x, 4)) + 0.5
    b = tf.abs(y) * 2.0 + 0.5
    return tf.math.igamma(a, b) * 1.5


@case("einsum", (1, 5, 7, 6))
def _(rng, x):
    y = tf.einsum("...c,cd->...d", x, w(rng, 6, 3))  # (with '...': no lowering; two-operand forms are native)
    return tf.nn.relu(y + w(rng, 3))


@case("composite_head", (1, 10, 10, 4))
def _(rng, x):
    with tf.name_scope("stem"):
        y = tf.nn.relu(conv(rng, x, 6))
    with tf.name_scope("head"):
        a = tf.math.softplus(y) * tf.math.bessel_i0e(y)
        b = tf.math.bessel_i1e(tf.abs(y))
        z = a + b
        z = conv(rng, z, 4)
    return tf.nn.max_pool2d(z, 2, 2, "VALID")


@case("conv_weights", (1, 9, 9, 3), batches=(1, 2))
def _(rng, x):
    y = tf.nn.conv2d(x, w(rng, 3, 3, 3, 8), strides=2, padding="SAME")
    return tf.nn.relu(tf.nn.bias_add(y, w(rng, 8)))


@case("erf_conv_erf", (1, 6, 6, 3))
def _(rng, x):
    # Erf -> Conv2D -> Erf: one "Erf" pattern cannot be one call (the convolution is between)
    y = tf.math.erf(x)
    y = conv(rng, y, 3)
    return tf.math.erf(y) + 0.1


@case("where_count", (1, 16))
def _(rng, x):
    # the number of rows depends on the data: shape inference needs a real input
    return tf.cast(tf.where(x > 0.0), tf.float32) * 2.0


@case("flatten_dense", (1, 4, 4, 2))
def _(rng, x):
    # a 4-D tensor into an offloaded op (BesselI0e) that flattens it: TensorFlow's element order must hold
    y = tf.math.bessel_i0e(x)
    y = tf.reshape(y, [-1, 32])
    return tf.matmul(y, w(rng, 32, 5))


@case("gather_channels", (1, 5, 6, 3))
def _(rng, x):
    # BGR <-> RGB on the model's data: a Gather at constant indices, Crops and a Concat of ours (nothing offloaded)
    return tf.nn.relu(conv(rng, tf.gather(x, [2, 1, 0], axis=-1), 4))


@case("embedding_ids", (1, 6))
def _(rng, x):
    # Keras' Embedding: where(ids < 0, ids + n, ids), then a Gather of int32 ids made by Floor and a Cast (all ours)
    ids = tf.cast(tf.floor(tf.clip_by_value(x, -2.4, 2.4) * 20.0), tf.int32)
    return tf.reduce_mean(tf.gather(w(rng, 50, 4), tf.where(ids < 0, ids + 50, ids)), axis=1)


@case("masked_rows", (1, 5, 4))
def _(rng, x):
    # Keras' Masking: rows that are all zero are masked (tf.reduce_any: TensorFlow's Any)
    x = x * tf.cast(x[:, :, :1] > -0.5, tf.float32)
    return x * tf.cast(tf.reduce_any(tf.not_equal(x, 0.0), axis=-1, keepdims=True), tf.float32)


@case("bool_through_native", (1, 6, 6))
def _(rng, x):
    # a bool tensor from an offloaded op (ApproximateEqual, of our Log) through converted ones (ExpandDims: a
    # Reshape; Concat) into another offloaded op (Any): an attention mask's path; it reached TensorFlow declared float
    mask = tf.expand_dims(tf.raw_ops.ApproximateEqual(x=tf.math.log(x + 1.0), y=x, tolerance=0.3), 1)
    both = tf.reduce_any(tf.concat([mask, tf.expand_dims(x > -0.5, 1)], axis=1), axis=1, keepdims=True)
    return tf.where(both, x[:, None], -1e9 * tf.ones_like(x[:, None]))


@case("while_loop", (1, 4))
def _(rng, x):
    # a while loop as TensorFlow lowers it when freezing (Enter, Merge, Switch, NextIteration, Exit: a cycle),
    # constants in its condition and body; the condition reads the data, so no trip count is known before it runs
    # (a counter against a constant is unrolled: tests/tf/graphs.py)
    _, acc = tf.while_loop(lambda i, a: tf.logical_and(i < 3, tf.reduce_max(a) < 1e6),
                           lambda i, a: (i + 1, tf.tanh(a) + x), (tf.constant(0), x))
    return acc * 2.0


@case("long_loop", (1, 4))
def _(rng, x):
    # a counted loop of more iterations than the converter unrolls (core/front/tf/loops/unroll.py: MAX_ITERATIONS)
    _, acc = tf.while_loop(lambda i, a: i < 1500, lambda i, a: (i + 1, a * 0.999 + x * 0.001), (tf.constant(0), x))
    return acc


@case("rnn_scan", (1, 6, 4))
def _(rng, x):
    # a recurrence as Keras' LSTM / GRU freeze it: a loop over a TensorList of the time steps (unrolled, but
    # offloaded whole when an offload pattern names one of its nodes)
    wx, wh, b = w(rng, 4, 5), w(rng, 5, 5), w(rng, 5)
    h0 = tf.matmul(x[:, 0, :], tf.zeros([4, 5]))
    hs = tf.scan(lambda h, xt: tf.tanh(tf.matmul(xt, wx) + tf.matmul(h, wh) + b), tf.transpose(x, [1, 0, 2]),
                 initializer=h0)
    return tf.transpose(hs, [1, 0, 2]) * 0.5


def heavy(x, rounds=40):
    """Seconds of TensorFlow work (1200x1200 matmuls), for the tests that kill the worker mid-request."""
    with tf.name_scope("heavy"):
        y = tf.tile(x, [1200, 150])
        for _ in range(rounds):
            y = tf.tanh(tf.matmul(y, y) * (1.0 / 1200))
        return tf.reduce_mean(y[:, :8], axis=0, keepdims=True)


@case("heavy", (1, 8))
def _(rng, x):
    return heavy(x) + x


@case("heavy_where", (1, 8))
def _(rng, x):
    # the Where's shape depends on the data: TensorFlow runs the heavy part at conversion
    return tf.cast(tf.where(heavy(x) + x > 0.0), tf.float32)


@case("resnet_block", (1, 56, 56, 64))
def _(rng, x):
    # a ResNet bottleneck block with a projection shortcut (benchmarks/offload.py)
    with tf.name_scope("block"):
        shortcut = conv(rng, x, 256, k=1) + w(rng, 256)
        y = tf.nn.relu(conv(rng, x, 64, k=1) + w(rng, 64))
        y = tf.nn.relu(conv(rng, y, 64, k=3) + w(rng, 64))
        y = conv(rng, y, 256, k=1) + w(rng, 256)
        return tf.nn.relu(y + shortcut)


@case("erf_56", (1, 56, 56, 64))
def _(rng, x):
    # one offloaded op on a 1x56x56x64 tensor: the per-call cost of offloading (benchmarks/offload.py)
    return tf.math.erf(x)


if __name__ == "__main__":
    main(lambda writer: build_cases(writer, CASES))

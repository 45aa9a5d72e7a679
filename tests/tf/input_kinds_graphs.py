"""Builder of the graphs of test_tf_input_kinds.py, run with this interpreter in a
subprocess (TensorFlow never loads into the pytest process):
`python input_kinds_graphs.py OUT_DIR` writes

- scalars.pb: x [1, 4], k a scalar Placeholder, t a PlaceholderWithDefault (2.0);
  out = x * k + t
- two_inputs.pb: x, y [1, 8, 8, 3] NHWC -> add -> conv 3x3 -> bias -> relu -> mean
  over H, W (out)
- is_training.pb: TF1 control flow (Switch/Merge) on is_training, a PlaceholderWithDefault
  (True): x [1, 6, 6, 3] -> conv -> batch_normalization(training=is_training) -> relu ->
  tf.cond(is_training, *2, -1) -> out; is_training.npz: x and TensorFlow's out with
  is_training fed False
- is_training_v2.pb: TF2's tf.cond (StatelessIf) on is_training: conv -> relu * 2 or
  sigmoid - 0.5 (is_training_v2.npz as above)
- reference.npz: raw images x, y (0..255) and TensorFlow's `out` of two_inputs.pb on
  them preprocessed as the tests' options say: x' = (reverse(x) - [1, 2, 3]) /
  [2, 3, 4], y' = reverse(y) - [4, 5, 6]
"""
import os
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()
MEAN_X, SCALE_X, MEAN_Y = [1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0]


def freeze(graph, sess, outputs, path):
    frozen = tf1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), outputs)
    with open(path, "wb") as f:
        f.write(frozen.SerializeToString())


def main(out_dir):
    rng = np.random.default_rng(5)
    g = tf1.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [1, 4], name="x")
        k = tf1.placeholder(tf.float32, [], name="k")
        t = tf1.placeholder_with_default(tf.constant(2.0), [], name="t")
        tf.identity(x * k + t, name="out")
        with tf1.Session(graph=g) as sess:
            freeze(g, sess, ["out"], os.path.join(out_dir, "scalars.pb"))
    g = tf1.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [1, 8, 8, 3], name="x")
        y = tf1.placeholder(tf.float32, [1, 8, 8, 3], name="y")
        conv = tf.nn.conv2d(x + y, rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.1, 1, "SAME")
        relu = tf.nn.relu(tf.nn.bias_add(conv, rng.standard_normal(4).astype(np.float32)), name="relu")
        out = tf.reduce_mean(relu, axis=[1, 2], name="out")
        raw_x = rng.uniform(0, 255, (1, 8, 8, 3)).astype(np.float32)
        raw_y = rng.uniform(0, 255, (1, 8, 8, 3)).astype(np.float32)
        with tf1.Session(graph=g) as sess:
            freeze(g, sess, ["out"], os.path.join(out_dir, "two_inputs.pb"))
            ref = sess.run(out, {x: (raw_x[..., ::-1] - MEAN_X) / SCALE_X, y: raw_y[..., ::-1] - MEAN_Y})
    np.savez(os.path.join(out_dir, "reference.npz"), x=raw_x, y=raw_y, out=ref)
    tf1.disable_control_flow_v2()  # the Switch/Merge form TF1 exports have
    g = tf1.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [1, 6, 6, 3], name="x")
        is_training = tf1.placeholder_with_default(True, [], name="is_training")
        conv = tf.nn.conv2d(x, rng.standard_normal((3, 3, 3, 4)).astype(np.float32), 1, "SAME")
        gamma, beta, mean = (rng.uniform(0.5, 2, 4).astype(np.float32), rng.standard_normal(4).astype(np.float32),
                             rng.standard_normal(4).astype(np.float32))
        variance = rng.uniform(0.5, 2, 4).astype(np.float32)
        # batch normalization as TF1 layers wrote it: batch statistics when training, the moving ones else
        bn = tf.cond(is_training, lambda: tf1.nn.fused_batch_norm(conv, gamma, beta, is_training=True)[0],
                     lambda: tf1.nn.fused_batch_norm(conv, gamma, beta, mean, variance, is_training=False)[0])
        relu = tf.nn.relu(bn)
        out = tf.identity(tf.cond(is_training, lambda: relu * 2.0, lambda: relu - 1.0), name="out")
        with tf1.Session(graph=g) as sess:
            freeze(g, sess, ["out"], os.path.join(out_dir, "is_training.pb"))
            data = rng.standard_normal((1, 6, 6, 3)).astype(np.float32)
            np.savez(os.path.join(out_dir, "is_training.npz"), x=data, out=sess.run(out, {x: data, is_training: False}))
    g = tf1.Graph()  # conds inside conds, on the switch passed through and on its negation
    with g.as_default():
        x = tf1.placeholder(tf.float32, [1, 4], name="x")
        t = tf1.placeholder_with_default(True, [], name="is_training")
        inner = lambda a, b: lambda: tf.cond(t, lambda: x * a, lambda: x - b)  # noqa: E731
        y = tf.cond(t, inner(2.0, 1.0), inner(3.0, 4.0))
        z = tf.cond(tf.logical_not(t), lambda: y + 10.0, lambda: y * 0.5)
        out = tf.identity(z, name="out")
        with tf1.Session(graph=g) as sess:
            freeze(g, sess, ["out"], os.path.join(out_dir, "nested_cond.pb"))
            data = rng.standard_normal((1, 4)).astype(np.float32)
            np.savez(os.path.join(out_dir, "nested_cond.npz"), x=data, out=sess.run(out, {x: data, t: False}))
    tf1.enable_control_flow_v2()  # TF2's form of the same: StatelessIf with a function per branch
    g = tf1.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [1, 6, 6, 3], name="x")
        is_training = tf1.placeholder_with_default(True, [], name="is_training")
        conv = tf.nn.conv2d(x, rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3, 1, "SAME")
        out = tf.identity(tf.cond(is_training, lambda: tf.nn.relu(conv) * 2.0, lambda: tf.nn.sigmoid(conv) - 0.5),
                          name="out")
        with tf1.Session(graph=g) as sess:
            freeze(g, sess, ["out"], os.path.join(out_dir, "is_training_v2.pb"))
            data = rng.standard_normal((1, 6, 6, 3)).astype(np.float32)
            np.savez(os.path.join(out_dir, "is_training_v2.npz"), x=data,
                     out=sess.run(out, {x: data, is_training: False}))


if __name__ == "__main__":
    main(sys.argv[1])

"""Builder of the TensorFlow graphs of the sub-graph replacement tests (the
reference guide's examples), run as `python tests/replacement/tf_graphs.py OUT_DIR`
by tests/replacement/conftest.py in a subprocess with real TensorFlow, cached like
tests/tf's graphs:

- squared_difference: conv -> SquaredDifference(conv a, conv b) -> conv (op replacement);
- mvn_moments: tf.nn.moments + FusedBatchNorm on the squeezed statistics, the guide's
  MVN pattern (Mean, StopGradient, SquaredDifference, Mean, Squeeze x2, FusedBatchNorm);
- inception_blocks: three identical Inception-like blocks InceptionV4/Mixed_5b/c/d
  (four branches and a concat each), the guide's scope example;
- ssd_postprocess: an SSD-style head whose Postprocessor decodes boxes against
  anchors and runs per-class NMS (CombinedNonMaxSuppression): the guide's points
  example replaces it by one DetectionOutput.
"""
from __future__ import annotations

import os
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tf"))

from tf_build import main, np, tf  # noqa: E402

# the SSD head (tests/replacement/test_tf_examples.py reads these)
SSD = dict(anchors_per_cell=2, classes=4, grid=6, keep_top_k=20, iou=0.45, score=0.2, variances=(0.1, 0.1, 0.2, 0.2))


def conv(rng, x, out, k=3, stride=1, scale=0.3):
    weights = (rng.standard_normal((k, k, int(x.shape[-1]), out)) * scale).astype(np.float32)
    return tf.nn.conv2d(x, tf.constant(weights), strides=stride, padding="SAME")


def squared_difference(rng, x):
    a = conv(rng, x, 4)
    b = conv(rng, x, 4, k=1)
    return conv(rng, tf.math.squared_difference(a, b), 3, k=1, scale=0.1)


def mvn_moments(rng, x):
    h = conv(rng, x, 6)
    mean, variance = tf.nn.moments(h, [1, 2], keepdims=True)
    gamma = tf.constant(rng.uniform(0.5, 1.5, 6).astype(np.float32))
    beta = tf.constant(rng.standard_normal(6).astype(np.float32))
    y = tf.compat.v1.nn.fused_batch_norm(h, gamma, beta, mean=tf.squeeze(mean), variance=tf.squeeze(variance),
                                         epsilon=1e-5, is_training=False)[0]
    return conv(rng, y, 4, k=1)


def inception_block(rng, x, scope):
    def unit(name, h, out, k):
        with tf.name_scope(name):
            return tf.nn.relu(conv(rng, h, out, k=k))
    with tf.name_scope(scope):
        with tf.name_scope("Branch_0"):
            b0 = unit("Conv2d_0a_1x1", x, 4, 1)
        with tf.name_scope("Branch_1"):
            b1 = unit("Conv2d_0b_3x3", unit("Conv2d_0a_1x1", x, 3, 1), 4, 3)
        with tf.name_scope("Branch_2"):
            b2 = unit("Conv2d_0c_3x3", unit("Conv2d_0b_3x3", unit("Conv2d_0a_1x1", x, 3, 1), 4, 3), 4, 3)
        with tf.name_scope("Branch_3"):
            pooled = tf.nn.avg_pool2d(x, 3, 1, "SAME", name="AvgPool_0a_3x3")
            b3 = unit("Conv2d_0b_1x1", pooled, 4, 1)
        return tf.concat([b0, b1, b2, b3], axis=3, name="concat")


def inception_blocks(rng, x):
    with tf.name_scope("InceptionV4"):
        h = tf.nn.relu(conv(rng, x, 16))
        for name in ("Mixed_5b", "Mixed_5c", "Mixed_5d"):
            h = inception_block(rng, h, name)
    return h


def anchors() -> np.ndarray:
    """[P, 4] prior boxes (xmin, ymin, xmax, ymax), two per cell of the 6x6 grid."""
    g, boxes = SSD["grid"], []
    for i in range(g):
        for j in range(g):
            cx, cy = (j + 0.5) / g, (i + 0.5) / g
            for size in (0.2, 0.35):
                boxes.append([cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2])
    return np.array(boxes, np.float32)


def ssd_postprocess(rng, x):
    h = tf.nn.relu(conv(rng, x, 16, stride=2))
    a, c = SSD["anchors_per_cell"], SSD["classes"]
    with tf.name_scope("BoxPredictor"):
        loc = tf.reshape(conv(rng, h, a * 4, scale=0.2), [1, -1, 4])
        conf = tf.reshape(conv(rng, h, a * c, scale=1.0), [1, -1, c])
    priors = tf.identity(tf.constant(anchors()), name="Anchors")
    with tf.name_scope("Postprocessor"):
        loc = tf.identity(loc, name="loc")
        scores = tf.nn.softmax(conf, name="scores")
        priors = tf.identity(priors, name="anchors")
        px1, py1, px2, py2 = tf.unstack(priors, axis=1)
        pw, ph = px2 - px1, py2 - py1
        pcx, pcy = (px1 + px2) / 2, (py1 + py2) / 2
        dx, dy, dw, dh = tf.unstack(loc, axis=2)
        v = SSD["variances"]
        cx, cy = v[0] * dx * pw + pcx, v[1] * dy * ph + pcy
        w, hh = tf.exp(v[2] * dw) * pw, tf.exp(v[3] * dh) * ph
        boxes = tf.stack([cx - w / 2, cy - hh / 2, cx + w / 2, cy + hh / 2], axis=2)
        nms = tf.image.combined_non_max_suppression(
            boxes[:, :, None, :], scores[:, :, 1:], max_output_size_per_class=loc.shape[1],
            max_total_size=SSD["keep_top_k"], iou_threshold=SSD["iou"], score_threshold=SSD["score"],
            pad_per_class=False, clip_boxes=False)
    return (tf.identity(nms.nmsed_boxes, name="detection_boxes"),
            tf.identity(nms.nmsed_scores, name="detection_scores"),
            tf.identity(nms.nmsed_classes + 1, name="detection_classes"),
            tf.identity(tf.cast(nms.valid_detections, tf.float32), name="num_detections"))


CASES = [("squared_difference", squared_difference, (1, 8, 8, 3)),
         ("mvn_moments", mvn_moments, (1, 8, 8, 3)),
         ("inception_blocks", inception_blocks, (1, 10, 10, 3)),
         ("ssd_postprocess", ssd_postprocess, (1, 12, 12, 3))]


def build(writer):
    for name, fn, shape in CASES:
        seed = zlib.crc32(name.encode())
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

        def model(*args, _fn=fn, _seed=seed + 1):
            return _fn(np.random.default_rng(_seed), *args)  # the same weights at every trace
        writer.add(name, model, {"x": x}, fixed=True)


if __name__ == "__main__":
    main(build)

"""Builder of the TensorFlow models that need TensorFlow to be frozen (the TF
worker's freeze verb): a TF2 SavedModel (a tf.Module with a serving signature), one
with two signatures and no serving_default (the outputs stored: the `embed` one's), three
Keras 3 models exported as SavedModels (one of 3-D layers, one of recurrent layers), a TF1 frozen graph of a
recurrence (TensorArrayV3), a TF1 meta graph with its checkpoint, and the same TF1 graph as a GraphDef with
variables plus that checkpoint (reference and resource variables).

Run as `python tests/tf/saved_models.py OUT_DIR` (benchmarks/built_models.py caches
it); TensorFlow's outputs on seeded inputs are stored next to the models.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tf_build import np, strip_identities, tf  # noqa: E402

import keras  # noqa: E402


def tf2_saved_model(out, rng):
    class Net(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.5)
            self.b = tf.Variable(rng.standard_normal(4).astype(np.float32))
            self.fc = tf.Variable(rng.standard_normal((4, 5)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="image")])
        def __call__(self, image):
            y = tf.nn.relu(tf.nn.conv2d(image, self.w, 1, "SAME") + self.b)
            return {"scores": tf.nn.softmax(tf.matmul(tf.reduce_mean(y, axis=[1, 2]), self.fc))}

    net = Net()
    path = os.path.join(out, "tf2_saved_model")
    tf.saved_model.save(net, path, signatures=net.__call__)
    x = rng.standard_normal((1, 8, 8, 3)).astype(np.float32)
    return path, {"image": x}, [net(x)["scores"].numpy()]


def two_signatures(out, rng):
    """A tf.Module saved with two signatures and no serving_default: the scores of an image, its embedding."""
    class Net(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.5)
            self.fc = tf.Variable(rng.standard_normal((4, 5)).astype(np.float32))

        def features(self, image):
            return tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(image, self.w, 1, "SAME")), axis=[1, 2])

        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="image")])
        def classify(self, image):
            return {"scores": tf.nn.softmax(tf.matmul(self.features(image), self.fc))}

        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="image")])
        def embed(self, image):
            return {"embedding": tf.math.l2_normalize(self.features(image), axis=1)}

    net = Net()
    path = os.path.join(out, "two_signatures")
    tf.saved_model.save(net, path, signatures={"classify": net.classify, "embed": net.embed})
    x = rng.standard_normal((1, 8, 8, 3)).astype(np.float32)
    return path, {"image": x}, [net.embed(x)["embedding"].numpy()]


def random_batch_norms(model, rng):
    """Batch norms that do something: random gamma, beta, moving mean and variance."""
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, n).astype(np.float32), rng.standard_normal(n).astype(np.float32),
                               rng.standard_normal(n).astype(np.float32), rng.uniform(0.5, 2, n).astype(np.float32)])


def keras_export(out, rng):
    inp = keras.Input((16, 16, 3), name="pixels")
    y = keras.layers.Conv2D(6, 3, strides=2, padding="same")(inp)
    y = keras.layers.BatchNormalization()(y)
    y = keras.layers.ReLU(6.0)(y)
    y = keras.layers.DepthwiseConv2D(3, padding="same")(y)
    y = keras.layers.GlobalAveragePooling2D()(y)
    model = keras.Model(inp, keras.layers.Dense(4)(y))
    random_batch_norms(model, rng)
    path = os.path.join(out, "keras_export")
    model.export(path, verbose=False)
    x = rng.standard_normal((1, 16, 16, 3)).astype(np.float32)
    return path, {"pixels": x}, [np.asarray(model(x, training=False))]


def keras_unet3d(out, rng):
    """A 3-D U-Net block as Keras exports it: Conv3D + BatchNormalization, MaxPooling3D, the way up by
    Conv3DTranspose and by UpSampling3D, a Concatenate of the three, a 1x1x1 Conv3D with a sigmoid."""
    inp = keras.Input((4, 8, 8, 2), name="volume")
    a = keras.layers.Conv3D(4, 3, padding="same")(inp)
    a = keras.layers.ReLU()(keras.layers.BatchNormalization()(a))
    b = keras.layers.Conv3D(6, 3, padding="same", activation="relu")(keras.layers.MaxPooling3D(2)(a))
    up = keras.layers.Conv3DTranspose(4, 2, strides=2)(b)
    y = keras.layers.Concatenate()([a, up, keras.layers.UpSampling3D(2)(b)])
    model = keras.Model(inp, keras.layers.Conv3D(3, 1, activation="sigmoid")(y))
    random_batch_norms(model, rng)
    path = os.path.join(out, "keras_unet3d")
    model.export(path, verbose=False)
    x = rng.standard_normal((1, 4, 8, 8, 2)).astype(np.float32)
    return path, {"volume": x}, [np.asarray(model(x, training=False))]


def keras_sequence_export(out, rng):
    """A Keras sequence classifier exported as a SavedModel: a GRU's sequence into an LSTM, then a Dense (their
    loops, lowered by freezing, are unrolled by the converter)."""
    inp = keras.Input((9, 6), name="sequence")
    y = keras.layers.GRU(8, return_sequences=True)(inp)
    y = keras.layers.LSTM(5)(y)
    model = keras.Model(inp, keras.layers.Dense(3, activation="softmax")(y))
    model.set_weights([(rng.standard_normal(v.shape) * 0.5).astype(np.float32) for v in model.get_weights()])
    path = os.path.join(out, "keras_sequence")
    model.export(path, verbose=False)
    x = rng.standard_normal((1, 9, 6)).astype(np.float32)
    return path, {"sequence": x}, [np.asarray(model(x, training=False))]


def tf1_recurrence(out, rng, name="tf1_recurrence", steps_known=True):
    """A TF1 frozen graph with a recurrence as dynamic_rnn built it: TensorArrayV3 unstack / read / write / gather
    (control flow v1), the trip count from the input's Shape, the batch unknown (and the number of steps unless
    `steps_known`: --input_shape gives it); outputs the sequence (`y`) and the
    loop's final state (its Exit node, an output as TF1 users name it). (path, batch 2 inputs, outputs, the
    names of the layers that compute them)"""
    tf1 = tf.compat.v1
    tf1.disable_control_flow_v2()
    graph = tf.Graph()
    x_value = rng.standard_normal((2, 6, 4)).astype(np.float32)
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 6 if steps_known else None, 4], name="x")
        steps = tf.transpose(x, [1, 0, 2])
        n = tf.shape(steps)[0]
        inputs = tf.TensorArray(tf.float32, size=n).unstack(steps)
        wx = tf.constant(rng.standard_normal((4, 5)).astype(np.float32) * 0.5)
        wh = tf.constant(rng.standard_normal((5, 5)).astype(np.float32) * 0.5)

        def body(t, h, outputs):
            h = tf.tanh(tf.matmul(inputs.read(t), wx) + tf.matmul(h, wh))
            return t + 1, h, outputs.write(t, h)
        _, h, outputs = tf1.while_loop(lambda t, h, outputs: t < n, body,
                                       (tf.constant(0), tf.zeros([tf.shape(x)[0], 5]), tf.TensorArray(tf.float32,
                                                                                                     size=n)))
        y = tf.identity(tf.transpose(outputs.stack(), [1, 0, 2]), name="y")
        with tf1.Session(graph=graph) as sess:
            results = sess.run([y, h], {x: x_value})
        graph_def = tf1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["y", h.op.name])
    tf1.enable_control_flow_v2()
    path = os.path.join(out, name + ".pb")
    with open(path, "wb") as f:
        f.write(graph_def.SerializeToString())
    return path, {"x": x_value}, results, [strip_identities(graph_def, "y"), h.op.name]


def tf1_graph(out, rng, use_resource=False):
    """(meta graph path, checkpoint prefix, GraphDef-with-variables path, inputs, outputs);
    resource variables (VarHandleOp, what get_variable makes by default under TF2) or
    reference ones (VariableV2)."""
    tf1 = tf.compat.v1
    graph = tf.Graph()
    x_value = rng.standard_normal((1, 6, 6, 2)).astype(np.float32)
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 6, 6, 2], name="x")
        w = tf1.get_variable("w", initializer=rng.standard_normal((3, 3, 2, 3)).astype(np.float32),
                             use_resource=use_resource)
        b = tf1.get_variable("b", initializer=rng.standard_normal(3).astype(np.float32), use_resource=use_resource)
        y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, [1, 1, 1, 1], "VALID"), b))
        out_node = tf.nn.max_pool2d(y, 2, 2, "VALID", name="out")
        saver = tf1.train.Saver()
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            folder = os.path.join(out, "tf1_resource" if use_resource else "tf1")
            prefix = os.path.join(folder, "model.ckpt")
            os.makedirs(os.path.dirname(prefix))
            saver.save(sess, prefix)
            result = sess.run(out_node, {x: x_value})
        graph_path = os.path.join(folder, "graph_with_variables.pb")
        with open(graph_path, "wb") as f:
            f.write(graph.as_graph_def().SerializeToString())
    return prefix + ".meta", prefix, graph_path, {"x": x_value}, [result]


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(5)
    index = {}

    def add(name, inputs, outputs, **paths):
        np.savez(os.path.join(out, name + ".npz"), **{"in1/" + k: v for k, v in inputs.items()},
                 **{"out1/{}".format(i): v for i, v in enumerate(outputs)})
        # paths relative to the output directory (the cache renames it once built)
        index[name] = {"inputs": {k: list(v.shape) for k, v in inputs.items()},
                       **{k: os.path.relpath(v, out) for k, v in paths.items()}}

    path, inputs, outputs = tf2_saved_model(out, rng)
    add("tf2_saved_model", inputs, outputs, saved_model_dir=path)
    path, inputs, outputs = two_signatures(out, rng)
    add("two_signatures", inputs, outputs, saved_model_dir=path)
    path, inputs, outputs = keras_export(out, rng)
    add("keras_export", inputs, outputs, saved_model_dir=path)
    path, inputs, outputs = keras_unet3d(out, rng)
    add("keras_unet3d", inputs, outputs, saved_model_dir=path)
    path, inputs, outputs = keras_sequence_export(out, rng)
    add("keras_sequence", inputs, outputs, saved_model_dir=path)
    path, inputs, outputs, names = tf1_recurrence(out, rng)
    add("tf1_recurrence", inputs, outputs, input_model=path)
    index["tf1_recurrence"]["outputs"] = names
    path, inputs, outputs, names = tf1_recurrence(out, rng, "tf1_recurrence_any_length", steps_known=False)
    add("tf1_recurrence_any_length", inputs, outputs, input_model=path)
    index["tf1_recurrence_any_length"]["outputs"] = names
    meta, prefix, graph, inputs, outputs = tf1_graph(out, rng)
    add("tf1_meta_graph", inputs, outputs, input_meta_graph=meta)
    add("tf1_graph_and_checkpoint", inputs, outputs, input_model=graph, input_checkpoint=prefix)
    meta, prefix, graph, inputs, outputs = tf1_graph(out, rng, use_resource=True)
    add("tf1_resource_meta_graph", inputs, outputs, input_meta_graph=meta)
    add("tf1_resource_graph_and_checkpoint", inputs, outputs, input_model=graph, input_checkpoint=prefix)
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

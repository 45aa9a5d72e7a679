"""Builder of the Keras application models: MobileNetV2, ResNet50, InceptionV3,
MobileNetV3Small (hard-swish, squeeze-excite: benchmarks/infer.py and tests/cpu).

Run as `python tests/tf/keras_apps.py OUT_DIR` (tests/tf/conftest.py runs it once
and caches the result; benchmarks/convert.py uses its ResNet50). weights=None
with seeded initial weights, and batch norms that do something: random gamma and
beta, and moving mean/variance taken from one training-mode pass over a random
batch (momentum 0), so that folding them into the convolutions is tested on
statistics far from (0, 1). Frozen with a -1 batch; TensorFlow's outputs for
batch 1 and 2 are stored, and (fp16_weights) the outputs of the same model with
every weight rounded to float16: how far float16 weights alone move these deep
random networks, the yardstick of an FP16 IR.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tf_build import main, np  # noqa: E402

import keras  # noqa: E402

APPS = {
    # name: (constructor, input size). The standard sizes: at smaller ones the global average pooling
    # averages fewer positions, and float rounding anywhere upstream shows 2-4 times more in the output
    "mobilenet_v2": (keras.applications.MobileNetV2, 224),
    "resnet50": (keras.applications.ResNet50, 224),
    "inception_v3": (keras.applications.InceptionV3, 299),
    "mobilenet_v3_small": (keras.applications.MobileNetV3Small, 224),
}


def make(name, seed):
    constructor, size = APPS[name]
    keras.utils.set_random_seed(seed)
    model = constructor(weights=None, input_shape=(size, size, 3), classes=1000)
    rng = np.random.default_rng(seed)
    norms = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    for layer in norms:
        values = []
        if layer.scale:
            values.append(rng.uniform(0.5, 1.5, layer.gamma.shape).astype(np.float32))
        if layer.center:
            values.append((rng.standard_normal(layer.beta.shape) * 0.2).astype(np.float32))
        values += [layer.moving_mean.numpy(), layer.moving_variance.numpy()]
        layer.set_weights(values)
        layer.momentum = 0.0  # the training pass below sets the moving statistics to the batch's
    batch = rng.standard_normal((8, size, size, 3)).astype(np.float32)
    model(batch, training=True)
    for layer in norms:
        layer.momentum = 0.99
    return model, size


def with_fp16_weights(model):
    """The same model with every weight rounded to float16: what an FP16 IR at best computes."""
    rounded = keras.models.clone_model(model)
    rounded.set_weights([w.astype(np.float16).astype(np.float32) for w in model.get_weights()])
    return rounded


def build(writer):
    for i, name in enumerate(APPS):
        model, size = make(name, seed=i + 1)
        x = np.random.default_rng(100 + i).standard_normal((1, size, size, 3)).astype(np.float32)
        rounded = with_fp16_weights(model)
        writer.add(name, lambda image, _m=model: _m(image, training=False), {"image": x}, batches=(1, 2),
                   runs={"fp16_weights": lambda: [np.asarray(rounded(x, training=False))]})


if __name__ == "__main__":
    main(build)

"""Builder of the benchmark's nets newer than the reference catalog (benchmarks/infer.py):
Keras' ConvNeXtTiny (depthwise 7x7, LayerNorm over channels, GELU, layer scale) and a
BERT-like encoder (dense layers on 3-D tensors, MultiHeadAttention's EinsumDense and
Einsum, LayerNorm, exact GELU), the nets on which issue 25 found the converted IR
two to three times slower than OpenVINO; and a C3D-style video classifier (Conv3D,
batch normalization, MaxPool3D, GlobalAveragePooling3D on 8 frames of 56x56), the
volume layers that were offload-only before; and a recurrent sequence classifier (two
stacked LSTMs over 32 steps of 64 features, a Dense), whose loops were offload-only
before the converter unrolled them (OpenVINO's TensorFlow front end makes them Loops).

Run as `python benchmarks/modern_nets.py OUT_DIR` (benchmarks/built_models.py runs it
once and caches the result). weights=None with seeded weights; ConvNeXt's layer-scale
factors set to 0.5 (Keras starts them at 1e-6: the blocks would add nothing, and an
error in them would not show). Frozen with a -1 batch; TensorFlow's outputs stored.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "tf"))

from tf_build import main, np  # noqa: E402

import keras  # noqa: E402

# the encoder: BERT's layout at a quarter of BERT-base's width, a sequence of 128
HIDDEN, HEADS, SEQUENCE, LAYERS = 256, 4, 128, 4


def convnext_tiny(seed):
    keras.utils.set_random_seed(seed)
    model = keras.applications.ConvNeXtTiny(weights=None, input_shape=(224, 224, 3), include_preprocessing=False)
    for weight in model.weights:
        if "layer_scale" in weight.path and len(weight.shape) == 1:
            weight.assign(np.full(weight.shape, 0.5, np.float32))
    return model


def encoder(seed):
    """Token features in (no embedding lookup: a Gather of ids is not what is measured), class logits out."""
    keras.utils.set_random_seed(seed)
    layers = keras.layers
    tokens = keras.Input((SEQUENCE, HIDDEN), name="tokens")
    x = layers.Dense(HIDDEN)(tokens)
    for _ in range(LAYERS):
        attended = layers.MultiHeadAttention(HEADS, HIDDEN // HEADS)(x, x)
        x = layers.LayerNormalization(epsilon=1e-12)(x + attended)
        hidden = layers.Dense(4 * HIDDEN, activation="gelu")(x)
        x = layers.LayerNormalization(epsilon=1e-12)(x + layers.Dense(HIDDEN)(hidden))
    pooled = layers.Dense(HIDDEN, activation="tanh")(x[:, 0])
    return keras.Model(tokens, layers.Dense(1000)(pooled))


def c3d_style(seed):
    """Three Conv3D 3x3x3 + BatchNormalization (random statistics) + ReLU + MaxPool3D stages, 32/64/128 channels."""
    keras.utils.set_random_seed(seed)
    layers = keras.layers
    clip = keras.Input((8, 56, 56, 3), name="clip")
    x = clip
    for channels, pool in ((32, (1, 2, 2)), (64, 2), (128, 2)):
        x = layers.Conv3D(channels, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling3D(pool)(layers.ReLU()(x))
    model = keras.Model(clip, layers.Dense(10)(layers.GlobalAveragePooling3D()(x)))
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            layer.moving_mean.assign(rng.uniform(-0.5, 0.5, layer.moving_mean.shape).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 1.5, layer.moving_variance.shape).astype(np.float32))
    return model


def lstm_sequence(seed):
    """Two LSTM(128) layers (the first returning its sequence) over 32 steps of 64 features, Dense(10) on the last
    output; weights drawn at Keras' default scales."""
    keras.utils.set_random_seed(seed)
    steps = keras.Input((32, 64), name="sequence")
    x = keras.layers.LSTM(128, return_sequences=True)(steps)
    x = keras.layers.LSTM(128)(x)
    return keras.Model(steps, keras.layers.Dense(10)(x))


def build(writer):
    rng = np.random.default_rng(7)
    model = convnext_tiny(seed=1)
    writer.add("convnext_tiny", lambda image: model(image, training=False),
               {"image": rng.standard_normal((1, 224, 224, 3)).astype(np.float32)})
    bert = encoder(seed=2)
    writer.add("bert_encoder", lambda tokens: bert(tokens, training=False),
               {"tokens": rng.standard_normal((1, SEQUENCE, HIDDEN)).astype(np.float32)})
    video = c3d_style(seed=3)
    writer.add("c3d_style", lambda clip: video(clip, training=False),
               {"clip": rng.standard_normal((1, 8, 56, 56, 3)).astype(np.float32)})
    recurrent = lstm_sequence(seed=4)
    writer.add("lstm_sequence", lambda sequence: recurrent(sequence, training=False),
               {"sequence": rng.standard_normal((1, 32, 64)).astype(np.float32)})


if __name__ == "__main__":
    main(build)

"""Caffe nets of the replacement tests (prototxt text), made into caffemodels with
real pycaffe once per session (tests/replacement/test_caffe_examples.py)."""

HEAD = """name: "{name}"
input: "data"
input_shape {{ dim: 2 dim: 3 dim: 10 dim: 10 }}
layer {{ name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param {{ num_output: 8 kernel_size: 3 pad: 1 }} }}
"""

TAIL = """layer {{ name: "conv2" type: "Convolution" bottom: "{bottom}" top: "conv2"
  convolution_param {{ num_output: 4 kernel_size: 1 }} }}
"""


def _pool(name, bottom):
    return ('layer {{ name: "{0}" type: "Pooling" bottom: "{1}" top: "{0}" '
            'pooling_param {{ pool: AVE global_pooling: true }} }}\n').format(name, bottom)


def _flat(name, bottom):
    return 'layer {{ name: "{0}" type: "Flatten" bottom: "{1}" top: "{0}" }}\n'.format(name, bottom)


def _power(name, bottom, power=1.0, scale=1.0, shift=0.0):
    return ('layer {{ name: "{0}" type: "Power" bottom: "{1}" top: "{0}" '
            'power_param {{ power: {2} scale: {3} shift: {4} }} }}\n').format(name, bottom, power, scale, shift)


def mvn_block(prefix: str, bottom: str, eps: float = 1e-9) -> str:
    """Caffe's MVN (per sample and channel: (x - mean) / (std + eps)) in elementary
    layers; its output is the top `<prefix>normalized`."""
    p = prefix
    return "".join([
        _pool(p + "mean", bottom), _flat(p + "mean_flat", p + "mean"),
        _power(p + "negate", p + "mean_flat", scale=-1.0),
        'layer {{ name: "{0}centered" type: "Bias" bottom: "{1}" bottom: "{0}negate" top: "{0}centered" '
        'bias_param {{ axis: 0 }} }}\n'.format(p, bottom),
        _power(p + "square", p + "centered", power=2.0),
        _pool(p + "variance", p + "square"), _flat(p + "variance_flat", p + "variance"),
        _power(p + "std", p + "variance_flat", power=0.5),
        _power(p + "std_eps", p + "std", shift=eps),
        _power(p + "inv_std", p + "std_eps", power=-1.0),
        'layer {{ name: "{0}normalized" type: "Scale" bottom: "{0}centered" bottom: "{0}inv_std" '
        'top: "{0}normalized" scale_param {{ axis: 0 }} }}\n'.format(p),
    ])


# conv1 -> MVN spelled out -> conv2
MVN_DECOMPOSED = HEAD.format(name="mvn_decomposed") + mvn_block("", "conv1") + TAIL.format(bottom="normalized")

# the same with pycaffe's own MVN layer (same layer names for the weights)
MVN_LAYER = (HEAD.format(name="mvn_layer")
             + 'layer { name: "mvn" type: "MVN" bottom: "conv1" top: "normalized" '
               'mvn_param { normalize_variance: true across_channels: false eps: 1e-9 } }\n'
             + TAIL.format(bottom="normalized"))

# conv1 -> HardSwish (a brocolli-Caffe layer the converter does not know) -> conv2
HARD_SWISH = (HEAD.format(name="hard_swish")
              + 'layer { name: "hswish" type: "HardSwish" bottom: "conv1" top: "hswish" }\n'
              + TAIL.format(bottom="hswish"))


def hswish_block(prefix: str, bottom: str) -> str:
    """HardSwish in elementary layers, named under the scope `prefix` (output: `<prefix>/mul`)."""
    p = prefix
    return "".join([
        _power(p + "/shift", bottom, shift=3.0),
        'layer {{ name: "{0}/relu6" type: "ReLU6" bottom: "{0}/shift" top: "{0}/relu6" }}\n'.format(p),
        _power(p + "/scale", p + "/relu6", scale=1.0 / 6.0),
        'layer {{ name: "{0}/mul" type: "Eltwise" bottom: "{1}" bottom: "{0}/scale" top: "{0}/mul" '
        'eltwise_param {{ operation: PROD }} }}\n'.format(p, bottom),
    ])


# conv1 -> act1 -> conv2 -> act2 -> act3 -> conv3: three instances of one scope pattern
HSWISH_BLOCKS = (HEAD.format(name="hswish_blocks") + hswish_block("act1", "conv1")
                 + 'layer { name: "conv2" type: "Convolution" bottom: "act1/mul" top: "conv2"\n'
                   '  convolution_param { num_output: 6 kernel_size: 3 pad: 1 } }\n'
                 + hswish_block("act2", "conv2") + hswish_block("act3", "act2/mul")
                 + 'layer { name: "conv3" type: "Convolution" bottom: "act3/mul" top: "conv3"\n'
                   '  convolution_param { num_output: 4 kernel_size: 1 } }\n')

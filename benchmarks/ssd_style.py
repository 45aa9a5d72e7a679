"""An SSD-style detection net for the benchmarks (the Caffe sdist ships none): a
VGG-like backbone at 300x300, an L2-normalized first feature map, four multibox
heads (loc/conf convolutions, Permute, Flatten, PriorBox), Concat, the confidence
Softmax and DetectionOutput, with the layers and shapes of SSD300 at about a third
of its width. `prototxt()` returns the deploy text."""


def _conv(name, bottom, out, k=3, pad=1, stride=1, relu=True):
    text = ('layer {{ name: "{n}" type: "Convolution" bottom: "{b}" top: "{n}" convolution_param {{ '
            'num_output: {o} kernel_size: {k} pad: {p} stride: {s} }} }}\n').format(n=name, b=bottom, o=out, k=k,
                                                                                  p=pad, s=stride)
    if relu:
        text += 'layer {{ name: "{n}_relu" type: "ReLU" bottom: "{n}" top: "{n}" }}\n'.format(n=name)
    return text


def _pool(name, bottom):
    return ('layer {{ name: "{n}" type: "Pooling" bottom: "{b}" top: "{n}" pooling_param {{ pool: MAX '
            'kernel_size: 2 stride: 2 }} }}\n').format(n=name, b=bottom)


CLASSES = 21
PRIORS = 4  # min size, max size, aspect ratio 2 flipped


def prototxt() -> str:
    t = ('name: "ssd_style"\nlayer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 '
         'dim: 300 dim: 300 } } }\n')
    t += _conv("conv1_1", "data", 32) + _conv("conv1_2", "conv1_1", 32) + _pool("pool1", "conv1_2")       # 150
    t += _conv("conv2_1", "pool1", 64) + _conv("conv2_2", "conv2_1", 64) + _pool("pool2", "conv2_2")       # 75
    t += _conv("conv3_1", "pool2", 128) + _conv("conv3_2", "conv3_1", 128) + _pool("pool3", "conv3_2")     # 38
    t += _conv("conv4_1", "pool3", 192) + _conv("conv4_2", "conv4_1", 192)
    t += ('layer { name: "conv4_2_norm" type: "Normalize" bottom: "conv4_2" top: "conv4_2_norm" norm_param { '
          'across_spatial: false channel_shared: false scale_filler { type: "constant" value: 20 } } }\n')
    t += _pool("pool4", "conv4_2") + _conv("conv5_1", "pool4", 256) + _conv("fc6", "conv5_1", 384)          # 19
    t += _conv("fc7", "fc6", 384, k=1, pad=0)
    t += _conv("conv6_1", "fc7", 128, k=1, pad=0) + _conv("conv6_2", "conv6_1", 256, stride=2)             # 10
    t += _conv("conv7_1", "conv6_2", 64, k=1, pad=0) + _conv("conv7_2", "conv7_1", 128, stride=2)          # 5
    heads = [("conv4_2_norm", 30, 60), ("fc7", 60, 111), ("conv6_2", 111, 162), ("conv7_2", 162, 213)]
    for i, (src, min_size, max_size) in enumerate(heads):
        for kind, per in (("loc", 4), ("conf", CLASSES)):
            name = "{}_mbox_{}".format(src, kind)
            t += _conv(name, src, PRIORS * per, relu=False)
            t += ('layer {{ name: "{n}_perm" type: "Permute" bottom: "{n}" top: "{n}_perm" permute_param {{ '
                  'order: 0 order: 2 order: 3 order: 1 }} }}\n').format(n=name)
            t += 'layer {{ name: "{n}_flat" type: "Flatten" bottom: "{n}_perm" top: "{n}_flat" }}\n'.format(n=name)
        t += ('layer {{ name: "{s}_mbox_priorbox" type: "PriorBox" bottom: "{s}" bottom: "data" '
              'top: "{s}_mbox_priorbox" prior_box_param {{ min_size: {a} max_size: {b} aspect_ratio: 2 '
              'flip: true clip: false variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 }} }}\n').format(
            s=src, a=min_size, b=max_size)
    for kind, suffix, axis in (("loc", "_mbox_loc_flat", 1), ("conf", "_mbox_conf_flat", 1),
                               ("priorbox", "_mbox_priorbox", 2)):
        bottoms = " ".join('bottom: "{}{}"'.format(src, suffix) for src, _, _ in heads)
        t += 'layer {{ name: "mbox_{k}" type: "Concat" {b} top: "mbox_{k}" concat_param {{ axis: {a} }} }}\n'.format(
            k=kind, b=bottoms, a=axis)
    t += ('layer { name: "mbox_conf_reshape" type: "Reshape" bottom: "mbox_conf" top: "mbox_conf_reshape" '
          'reshape_param { shape { dim: 0 dim: -1 dim: %d } } }\n' % CLASSES)
    t += ('layer { name: "mbox_conf_softmax" type: "Softmax" bottom: "mbox_conf_reshape" top: "mbox_conf_softmax" '
          'softmax_param { axis: 2 } }\n')
    t += ('layer { name: "mbox_conf_flatten" type: "Flatten" bottom: "mbox_conf_softmax" '
          'top: "mbox_conf_flatten" }\n')
    t += ('layer { name: "detection_out" type: "DetectionOutput" bottom: "mbox_loc" bottom: "mbox_conf_flatten" '
          'bottom: "mbox_priorbox" top: "detection_out" detection_output_param { num_classes: %d '
          'share_location: true background_label_id: 0 nms_param { nms_threshold: 0.45 top_k: 400 } '
          'code_type: CENTER_SIZE keep_top_k: 200 confidence_threshold: 0.01 } }\n' % CLASSES)
    return t

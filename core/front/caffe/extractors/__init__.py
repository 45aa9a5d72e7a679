"""Standard Caffe extractors, one layer family a module. Importing this package
registers them (core/front/extractor.py)."""
from core.front.caffe.extractors import (  # noqa: F401
    activation, argmax, convolution, ctc, detection, fully_connected, input, linear, normalization, pooling,
    resize, roi_pooling, shape_ops,
)

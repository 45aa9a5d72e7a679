"""What the converter knows of TensorFlow's ops, one family a module (see base.py).
Importing this package fills TF_OPS ({TF op type: TFOp class})."""
from core.front.tf.ops import (  # noqa: F401
    activation, argmax, batch_norm, composite, concat_split, conv, elementwise, fake_quant, identity, lrn, matmul,
    pad_resize, pooling, reduce, reshape, shape_arith, space_batch, volume,
)
from core.front.tf.ops.base import TF_OPS, TFOp

__all__ = ["TF_OPS", "TFOp"]

"""OpenVINO extension operations written in Python (openvino.Op), for the tests of
--ov_extension_ops: the reference guide's example layers that have no opset
equivalent, computed in numpy by the runtime when a Core has them
(`core.add_extension(openvino.OpExtension(BNLL))`). Their attributes arrive as the
IR v2 strings the converter wrote."""
from __future__ import annotations

import numpy as np

from tests.ir_v11.v11_helpers import import_openvino

ov = import_openvino()


class _NumpyOp(ov.Op):
    """A one-output op computed by `compute(x, attrs)`; output shape from `shape`."""

    ATTRS: dict = {}

    def __init__(self, inputs=None):
        super().__init__(self, inputs)  # (may validate, and so read the attributes, already)
        if inputs is not None:
            self.constructor_validate_and_infer_types()

    @property
    def attrs(self) -> dict:
        if "_attrs" not in self.__dict__:
            self._attrs = dict(self.ATTRS)
        return self._attrs

    def shape(self, in_shape, attrs):
        return in_shape

    def validate_and_infer_types(self):
        in_shape = [d.get_length() for d in self.get_input_partial_shape(0)]
        self.set_output_type(0, self.get_input_element_type(0), ov.PartialShape(self.shape(in_shape, self.attrs)))

    def clone_with_new_inputs(self, new_inputs):
        clone = type(self)(new_inputs)
        clone.attrs.update(self.attrs)
        return clone

    def visit_attributes(self, visitor):
        visitor.on_attributes(self.attrs)
        return True

    def has_evaluate(self):
        return True

    def evaluate(self, outputs, inputs):
        result = np.asarray(self.compute(np.array(inputs[0].data), self.attrs), np.float32)
        outputs[0].shape = ov.Shape(list(result.shape))
        outputs[0].data[...] = result
        return True


class BNLL(_NumpyOp):
    ATTRS = {"beta": "1"}

    def compute(self, x, attrs):
        return np.logaddexp(0.0, x)  # log(1 + exp(x)) without overflow


class Threshold(_NumpyOp):
    ATTRS = {"threshold": "0"}

    def compute(self, x, attrs):
        return (x > float(attrs["threshold"])).astype(np.float32)


class MeanReduce(_NumpyOp):
    """Caffe Reduction MEAN: over every axis from `axis` on, times coeff."""
    ATTRS = {"operation": "caffe.ReductionParameter.MEAN", "axis": "0", "coeff": "1"}

    def shape(self, in_shape, attrs):
        return in_shape[:int(attrs["axis"]) % len(in_shape)]

    def compute(self, x, attrs):
        assert attrs["operation"].endswith("MEAN"), attrs
        axis = int(attrs["axis"]) % x.ndim
        return x.reshape(x.shape[:axis] + (-1,)).mean(axis=-1) * float(attrs["coeff"])


OPS = (BNLL, Threshold, MeanReduce)

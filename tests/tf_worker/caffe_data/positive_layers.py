"""A pycaffe Python layer whose output shape depends on the data: [n, 1], the flat
indices of the input's n positive values (at least one row)."""
import caffe
import numpy as np


class PositiveIndices(caffe.Layer):
    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):  # Caffe calls it before each forward, with the data in place
        top[0].reshape(max(1, int((bottom[0].data > 0).sum())), 1)

    def forward(self, bottom, top):
        index = np.flatnonzero(bottom[0].data > 0)
        top[0].data[...] = 0
        top[0].data[:index.size, 0] = index

    def backward(self, top, propagate_down, bottom):
        pass

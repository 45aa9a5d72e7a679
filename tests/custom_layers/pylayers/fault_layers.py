"""pycaffe Python layers that misbehave, for the Caffe worker's fault tests."""
import os
import signal
import time

import caffe


class Segfault(caffe.Layer):
    def setup(self, bottom, top):
        os.kill(os.getpid(), signal.SIGSEGV)

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        pass

    def backward(self, top, propagate_down, bottom):
        pass


class Hang(Segfault):
    def setup(self, bottom, top):
        time.sleep(3600)

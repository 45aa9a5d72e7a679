"""The Caffe worker: real pycaffe in its own process.

Verbs:
- infer_shapes {prototxt, weights, layers, python_path, seed} -> {shapes: {layer: [[dims]..]}}:
  builds one caffe.Net from the prototxt text (the sub-net the core cut out, with
  Input layers at the shapes the core inferred), forwards once on seeded noise and
  returns the top shapes of every requested layer.
- forward_layer {prototxt, key, python_path} + arrays (inputs..., blobs...) -> outputs:
  runs one layer (a net of Input layers + that layer) on given inputs and blobs;
  nets are cached by key and input shapes.
A Caffe CHECK failure aborts this process: the supervisor reports glog's message.
"""

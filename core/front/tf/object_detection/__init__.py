"""TensorFlow Object Detection API exports (frozen_inference_graph.pb +
pipeline.config), converted as the reference's support JSONs describe: one family
of replacers (preprocessor.py, ssd.py, faster_rcnn.py, outputs.py), the
pipeline.config reader (pipeline_config.py), the support JSONs (support/) and
their choice from the graph when only the pipeline config is given (choose.py).
Importing the package registers the replacers; they run only for descriptions of
their ids.
"""
from core.front.tf.object_detection import faster_rcnn, preprocessor, ssd  # noqa: F401

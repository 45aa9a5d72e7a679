"""The TensorFlow worker: real TensorFlow in its own process (the core never imports
it). Its verbs, launch and errors: core/services/tf_worker.py; the handlers:
service.py (freezing.py, subgraphs.py)."""

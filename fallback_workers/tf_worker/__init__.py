"""The TensorFlow worker: real TensorFlow in its own process (the core never imports
it). Its launch, verbs and errors: core/services/tf_worker.py; loading TensorFlow
and what the worker serves without it: framework.py; the handlers: service.py
(imported once TensorFlow loaded)."""

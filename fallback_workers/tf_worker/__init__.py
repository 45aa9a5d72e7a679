"""The TensorFlow worker: real TensorFlow in its own process (the core never imports
it). Its verbs, launch and errors: contract.py; the handlers: service.py."""

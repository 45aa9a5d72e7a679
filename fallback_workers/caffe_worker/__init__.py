"""The Caffe worker: real pycaffe in its own process (the core and the daemons
never import caffe). How it is launched, its verbs and error kinds: its contract,
core/services/caffe_worker.py; its handlers: service.py (loaded once pycaffe
imported: framework.py)."""

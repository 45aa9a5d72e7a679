"""Serving: the device daemons behind the open inference protocol (KServe v2, REST
and gRPC, with the Triton extensions its clients use), from a model repository laid
out as Triton's and OpenVINO Model Server's.

A client of the daemons like any other: it reaches them only through
`device_daemons.client.IECore`, and nothing in core/ or the daemons imports it.

Where things are:
* repository.py, config.py - the model repository (<model>/<version>/..., config.json),
  conversion of Caffe/TensorFlow models on load (cached)
* model.py, batcher.py - one model version on a daemon: its inputs and outputs as the
  protocol names them, networks per batch size, dynamic batching
* manager.py - the models of a repository in this process (the embedded backend)
* protocol.py - requests and responses whatever wire carried them; tensors.py - the
  protocol's datatypes and checked decoding; rest_codec.py / grpc_codec.py - each wire
  form (proto/mo_inference.proto: the gRPC messages); errors.py - 4xx/5xx and gRPC codes
* frontend.py - what both front ends share: a backend, statistics and metrics (stats.py), auth
* rest.py (FastAPI on uvicorn), grpc_service.py (grpcio) - the two front ends
* embedded.py - `mo-core serve`: one process, its own daemons
* daemons.py, watchdog.py - the daemons a server owns (a private runtime directory,
  stopped with the server, or by the watchdog when the server is killed)
* ray_mode.py - `mo-core serve --ray`: each model a Ray Serve deployment (the only
  module that imports ray)
"""

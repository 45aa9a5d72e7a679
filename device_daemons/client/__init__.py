"""What runs in the client's process: the Inference Engine shaped API (api.py), the
way to a daemon (transport.py) and how a request travels on it (request_path.py
decides: bound_client.py and shm_client.py on the local carrier, else frames over
ZeroMQ), the daemons' life cycle (daemon.py), HETERO (hetero/) and the client's
errors.

    from device_daemons.client import IECore
"""
from ..registry import build_id  # (the code this process runs: what a daemon's build is compared with)
from .api import (DaemonDied, DaemonError, DaemonNotRunning, DaemonTimeout, ExecutableNetwork, IECore, IENetwork,
                  InferenceError, InferRequest, StatusCode)

__all__ = ["IECore", "IENetwork", "ExecutableNetwork", "InferRequest", "InferenceError", "DaemonError", "DaemonDied",
           "DaemonNotRunning", "DaemonTimeout", "StatusCode", "build_id"]

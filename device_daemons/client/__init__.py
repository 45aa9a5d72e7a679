"""What runs in the client's process: the Inference Engine shaped API (api.py), the
way to a daemon and its request path (transport.py, infer_job.py, shm_client.py,
bound_client.py), the daemons' life cycle (daemon.py) and the client's errors.

    from device_daemons.client import IECore
"""
from .api import (DaemonDied, DaemonError, DaemonNotRunning, DaemonTimeout, ExecutableNetwork, IECore, IENetwork,
                  InferenceError, InferRequest, StatusCode)

__all__ = ["IECore", "IENetwork", "ExecutableNetwork", "InferRequest", "InferenceError", "DaemonError", "DaemonDied",
           "DaemonNotRunning", "DaemonTimeout", "StatusCode"]

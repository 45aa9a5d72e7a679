"""What runs in a device daemon's process and every daemon shares (the CPU and the
GPU daemon build on it): the verbs and their state (device_daemon.py), the bound
requests' table (bound_table.py), the shared-memory slots (shm_slots.py) and the
safe reading of a request's IR (ir_source.py)."""
from .device_daemon import DeviceDaemon, Handle, serve_daemon

__all__ = ["DeviceDaemon", "Handle", "serve_daemon"]

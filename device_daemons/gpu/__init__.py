"""The GPU plugin: IR networks on an OpenCL device (pyopencl; PoCL on a machine
without a GPU). Only this package and the GPU daemon import pyopencl."""
from .device import Device, DeviceError, list_devices, open_device
from .plan import GpuPlan

__all__ = ["Device", "DeviceError", "GpuPlan", "list_devices", "open_device"]

"""Which OpenCL device the GPU plugin runs on, and what it can do.

    device = open_device("GPU")      # first OpenCL GPU, else any OpenCL device
    device = open_device("GPU.1")    # the second device of the list below

The list: every OpenCL device of every platform, GPUs first (platform order, then
device order), then the other devices (PoCL's CPU device on a machine without a
GPU). `MO_CORE_OPENCL_DEVICE` overrides the choice: an index into that list, a
`platform:device` pair of indices (as PYOPENCL_CTX), or a case-insensitive part of
the device or platform name.

PoCL compiles kernels slowly: its own on-disk kernel cache is moved under
$MO_CORE_HOME (POCL_CACHE_DIR) unless the user set it, so that every process of
every session reuses the compiled programs.
"""
from __future__ import annotations

import os
import threading

from ir import IRError

ENV_DEVICE = "MO_CORE_OPENCL_DEVICE"


def _home() -> str:
    return os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))


# PoCL reads POCL_CACHE_DIR when it compiles; it must be set before the first build
os.environ.setdefault("POCL_CACHE_DIR", os.path.join(_home(), "pocl-cache"))

import pyopencl as cl  # noqa: E402


class DeviceError(IRError):
    """No usable OpenCL device, or a device name that matches none."""


class Device:
    """An OpenCL device with its context and the facts the plans need."""

    def __init__(self, cl_device, index: int):
        self.cl_device = cl_device
        self.index = index
        self.context = cl.Context([cl_device])
        self.name = cl_device.name.strip()
        self.platform = cl_device.platform.name.strip()
        self.is_gpu = bool(cl_device.type & cl.device_type.GPU)
        extensions = set(cl_device.extensions.split())
        # native half arithmetic; half *storage* (vload_half/vstore_half) is core OpenCL
        self.has_fp16 = "cl_khr_fp16" in extensions
        self.max_work_group = int(cl_device.max_work_group_size)
        self.max_item_sizes = tuple(int(v) for v in cl_device.max_work_item_sizes)
        self.align = max(int(cl_device.mem_base_addr_align) // 8, 16)  # sub-buffer offsets, bytes
        self.global_memory = int(cl_device.global_mem_size)
        self.max_allocation = int(cl_device.max_mem_alloc_size)
        self.compute_units = int(cl_device.max_compute_units)
        self.local_memory = int(cl_device.local_mem_size)
        self.driver = cl_device.driver_version.strip()
        # tensor cores through inline PTX mma.sync.m16n8k16 (tiled.cl's conv_mma): NVIDIA, compute capability 8+
        self.tensor_cores = _nv_compute_capability(cl_device, extensions) >= 8
        self.version = cl_device.version.strip()
        self._programs: dict = {}
        self._lock = threading.Lock()

    @property
    def full_name(self) -> str:
        return f"{self.name} ({self.platform})"

    def describe(self) -> dict:
        return {"name": self.name, "platform": self.platform, "index": self.index, "gpu": self.is_gpu,
                "fp16": self.has_fp16, "tensor_cores": self.tensor_cores, "compute_units": self.compute_units,
                "global_memory_mb": self.global_memory >> 20, "max_work_group": self.max_work_group,
                "driver": self.driver, "version": self.version}


def _nv_compute_capability(cl_device, extensions) -> int:
    """The major compute capability of an NVIDIA device (cl_nv_device_attribute_query), else 0."""
    if "cl_nv_device_attribute_query" not in extensions:
        return 0
    try:
        return int(cl_device.compute_capability_major_nv)
    except (cl.Error, AttributeError, TypeError, ValueError):
        return 0


def list_devices() -> list:
    """Every OpenCL device, GPUs first (see the module doc)."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        raise DeviceError(f"no OpenCL platform is installed ({exc}); install an OpenCL driver (a GPU vendor's, "
                          "or PoCL: apt-get install pocl-opencl-icd)") from None
    gpus, others = [], []
    for p_index, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for d_index, device in enumerate(devices):
            (gpus if device.type & cl.device_type.GPU else others).append((p_index, d_index, device))
    return gpus + others


def _describe_list(devices) -> str:
    return "; ".join(f"{i}: {d.name.strip()} ({d.platform.name.strip()}, {p}:{q})"
                     for i, (p, q, d) in enumerate(devices)) or "none"


def _pick(devices, spec: str, where: str):
    spec = spec.strip()
    if spec.isdigit():
        i = int(spec)
        if i < len(devices):
            return i
        raise DeviceError(f"{where} asks for OpenCL device {i}, but there are {len(devices)}: "
                          f"{_describe_list(devices)}")
    if ":" in spec and all(part.strip().isdigit() for part in spec.split(":", 1)):
        p, q = (int(part) for part in spec.split(":", 1))
        for i, (pi, qi, _) in enumerate(devices):
            if (pi, qi) == (p, q):
                return i
        raise DeviceError(f"{where} asks for OpenCL platform {p} device {q}, which does not exist; the devices are "
                          f"{_describe_list(devices)}")
    low = spec.lower()
    for i, (_, _, d) in enumerate(devices):
        if low in d.name.lower() or low in d.platform.name.lower():
            return i
    raise DeviceError(f"{where} is {spec!r}, which names no OpenCL device; the devices are {_describe_list(devices)}")


def parse_device_name(name: str) -> int | None:
    """"GPU" -> None (the default device), "GPU.N" -> N; anything else is an error."""
    text = (name or "GPU").strip()
    if text.upper() == "GPU":
        return None
    head, _, tail = text.partition(".")
    if head.upper() == "GPU" and tail.isdigit():
        return int(tail)
    raise DeviceError(f"device name {name!r} is not GPU or GPU.N (N: the index of an OpenCL device)")


_opened: dict[int, Device] = {}
_opened_lock = threading.Lock()


def open_device(name: str = "GPU") -> Device:
    """The Device for "GPU" / "GPU.N" (MO_CORE_OPENCL_DEVICE overrides plain "GPU");
    one per process and device, shared by every plan."""
    index = parse_device_name(name)
    devices = list_devices()
    if not devices:
        raise DeviceError("no OpenCL device found; install an OpenCL driver (a GPU vendor's, or PoCL: apt-get "
                          "install pocl-opencl-icd) and check `clinfo`")
    if index is not None:
        index = _pick(devices, str(index), f"device {name}")
    elif os.environ.get(ENV_DEVICE, "").strip():
        index = _pick(devices, os.environ[ENV_DEVICE], ENV_DEVICE)
    else:
        index = 0  # GPUs come first
    with _opened_lock:
        if index not in _opened:
            _opened[index] = Device(devices[index][2], index)
        return _opened[index]

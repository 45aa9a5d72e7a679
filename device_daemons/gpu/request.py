"""InferRequest: one in-flight inference of a GpuPlan, with its own command
queue, its own device buffers (shared by tensor groups whose lifetimes do not
overlap: memory.py) and its own kernel objects whose arguments are set once, so
that a run only enqueues: the launches between host steps in one C call each
(native/enqueue.py), or one pyopencl call each where that is unavailable and
while per-layer times are counted.

A request is used by one thread at a time; requests of the same plan run
concurrently (the plan's weights and constants are read-only and shared).

Waiting for the device: pyopencl holds the interpreter lock while it waits in a
read of device memory (clWaitForEvents), so a kernel that runs for minutes froze
every thread of the daemon, `hello` included (issue 21, F7). A run waits for its
kernels on a marker event, polled and woken by its completion callback (other threads run meanwhile)
before it reads anything back, and gives up at its deadline (MO_CORE_GPU_TIMEOUT,
seconds, default 60): DeviceTimeout, after which the device holds a kernel that
nobody can stop in this process (gpu/server.py then restarts the daemon). A plan's
first run gets FIRST_RUN_EXTRA_S more: a driver may compile there - PoCL builds each
kernel for its work-group size at its first launch, on the device's thread (GoogLeNet's
simt kernels: 63 s on 2 cores with an empty POCL_CACHE_DIR, 0.45 s once cached).

Transfers are float32 both ways. A half plan converts on the device (a float32
staging buffer per transferred tensor, shape_ops.cl's from_float / to_float):
numpy's float32 <-> float16 conversion costs about a nanosecond a value on the
host (1 ms for a 224x224 image, 7.5 ms at batch 8, measured here), more than the
device takes for the whole conversion and the half the bytes it saves.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pyopencl as cl

from ir import IRError

from ..contract import PerfRow
from ..cpu.kernels import KernelError
from .native import enqueue

_host_lock = threading.Lock()  # the CPU kernels of host layers are not re-entrant
_STATUS = {v: k for k, v in vars(cl.status_code).items() if isinstance(v, int) and not k.startswith("_")}
TIMEOUT_ENV = "MO_CORE_GPU_TIMEOUT"


FIRST_RUN_EXTRA_S = 600.0


def deadline_s() -> float:
    try:
        return max(1.0, float(os.environ.get(TIMEOUT_ENV, "60")))
    except ValueError:
        return 60.0


class DeviceTimeout(IRError):
    """The device did not finish a request's kernels by its deadline."""
    kind = "device_timeout"


def wait_device(queue, deadline: float, what: str, first: bool = False) -> None:
    """Until everything enqueued on `queue` so far ran, without holding the interpreter
    lock; DeviceTimeout at `deadline` (time.monotonic()). The marker's status is polled,
    sleeping 50 us to 5 ms between looks, and its completion callback (OpenCL 1.1)
    wakes the sleeper early where the driver runs it at once - NVIDIA's runs it ~20 ms
    late (measured on an H100: every request took 20 ms when only the callback woke it)."""
    marker = cl.enqueue_marker(queue)
    queue.flush()
    complete = cl.command_execution_status.COMPLETE
    done = threading.Event()
    try:
        marker.set_callback(complete, lambda status: done.set())
    except (cl.Error, AttributeError, TypeError):
        done = None
    pause = 5e-5
    while True:
        status = marker.command_execution_status
        if status == complete:
            return
        if status < 0:
            raise IRError(f"the OpenCL device failed {what} (status {status})")
        now = time.monotonic()
        if now >= deadline:
            allowed = f"{deadline_s():g} s ({TIMEOUT_ENV})" + (
                f" + {FIRST_RUN_EXTRA_S:g} s for the driver's compile at a plan's first run" if first else "")
            raise DeviceTimeout(f"the OpenCL device did not finish {what} within {allowed}; a kernel that "
                                "never ends cannot be stopped in this process")
        if done is not None:
            done.wait(min(deadline - now, pause))  # (the status is read again: an error ends the wait too)
        else:
            time.sleep(min(deadline - now, pause))
        pause = min(pause * 2, 5e-3)


class InferRequest:
    def __init__(self, plan):
        self.plan = plan
        device = plan.device
        self.queue = cl.CommandQueue(device.context)
        self.memory = [cl.Buffer(device.context, cl.mem_flags.READ_WRITE, size) for size in plan.buffer_sizes]
        groups = plan._groups
        by_root = {root: self.memory[b.buffer] for root, b in plan._blocks.items()}
        by_root.update(plan._constants)
        self.buffers = [by_root.get(groups.find(s)) for s in range(len(groups.parent))]
        self._staged: dict = {}  # a half plan's float32 staging buffers (_stage)
        self.actions: list = []
        for step in plan.steps:
            if step.fused or step.merged_into or step.kernel.view or step.kernel.constant:
                continue
            ins = [self.buffers[s] for s in step.reads()]
            outs = [self.buffers[s] for s in step.out_slots + step.extra_writes]
            if step.kernel.host:
                self.actions.append((step, None, None, None))
                continue
            scratch = [self.buffers[s] for s in step.scratch]
            try:
                launches = step.kernel.launches(ins, outs, *([scratch] if scratch else []))
                for launch in launches:
                    kernel = cl.Kernel(launch.program, launch.name)
                    kernel.set_args(*launch.args)
                    self.actions.append((step, kernel, launch.global_size, launch.local_size))
            except IRError:
                raise
            except cl.Error as err:
                raise KernelError(step.layer, f"setting up its OpenCL kernel failed: {err}") from err
        self.segments = None if enqueue.unavailable() else self._segments()

    def _segments(self) -> list:
        """The actions as runs of device launches (one C call each, native/enqueue.py)
        between host steps: [(LaunchList, [step of each launch]) | (None, host step)]."""
        segments, run, steps = [], [], []
        for step, kernel, global_size, local_size in self.actions + [(None, None, None, None)]:
            if kernel is not None:
                run.append((kernel, global_size, local_size))
                steps.append(step)
                continue
            if run:
                segments.append((enqueue.LaunchList(self.queue, run), steps))
                run, steps = [], []
            if step is not None:
                segments.append((None, step))
        return segments

    def _stage(self, slot):
        """(float32 device buffer, to_float kernel, from_float kernel, global size)
        of a half tensor that crosses to the host (made once per request)."""
        if slot not in self._staged:
            count = int(np.prod(self.plan.shapes[slot]))
            buffer = cl.Buffer(self.plan.device.context, cl.mem_flags.READ_WRITE, max(4 * count, 4))
            program = self.plan.ctx.program("shape_ops.cl")
            to_float, from_float = cl.Kernel(program, "to_float"), cl.Kernel(program, "from_float")
            to_float.set_args(self.buffers[slot], buffer, np.int32(count))
            from_float.set_args(buffer, self.buffers[slot], np.int32(count))
            self._staged[slot] = (buffer, to_float, from_float, (-(-count // 64) * 64,))
        return self._staged[slot]

    def _fetch(self, slot) -> np.ndarray:
        """Enqueues the copy of a tensor into a new float32 host array (complete
        after the queue's next finish)."""
        host = np.empty(self.plan.shapes[slot], np.float32)
        source = self.buffers[slot]
        if self.plan.ctx.half:
            source, to_float, _, size = self._stage(slot)
            cl.enqueue_nd_range_kernel(self.queue, to_float, size, None)
        cl.enqueue_copy(self.queue, host, source, is_blocking=False)
        return host

    def _upload(self, slot, value: np.ndarray, blocking: bool):
        """Enqueues the copy of a float32 array into a tensor; returns the host array
        the copy reads (to be kept until the queue finishes)."""
        host = np.ascontiguousarray(value, np.float32)
        if not self.plan.ctx.half:
            cl.enqueue_copy(self.queue, self.buffers[slot], host, is_blocking=blocking)
            return host
        staging, _, from_float, size = self._stage(slot)
        cl.enqueue_copy(self.queue, staging, host, is_blocking=False)
        cl.enqueue_nd_range_kernel(self.queue, from_float, size, None)
        if blocking:
            self.queue.finish()
        return host

    def _run_host(self, step, deadline: float, first: bool):
        wait_device(self.queue, deadline, "the layers before a host layer", first)  # (then the copies wait no more)
        ins = [self._fetch(s) for s in step.in_slots]
        self.queue.finish()
        with _host_lock:
            outs = step.kernel.host_forward(ins)
        for s, value in zip(step.out_slots, outs):
            value = np.asarray(value, np.float32)
            if value.shape != self.plan.shapes[s]:
                raise KernelError(step.layer, f"produced shape {list(value.shape)}, expected "
                                              f"{list(self.plan.shapes[s])}")
            self._upload(s, value, blocking=True)

    def _counted(self, perf: list):
        """The actions, each step's timed to its end on the device (queue.finish):
        appends a PerfRow per step, fused, view and constant ones included."""
        clock = time.perf_counter
        actions = iter(self.actions)
        action = next(actions, None)
        for step in self.plan.steps:
            if step.fused or step.merged_into:
                into = step.fused_into or step.merged_into
                perf.append(PerfRow(step.layer.name, step.layer.type, "fused into " + into, "fused", 0.0))
                continue
            if step.kernel.view or step.kernel.constant:
                what = "view" if step.kernel.view else "constant"
                perf.append(PerfRow(step.layer.name, step.layer.type, what, "not_run", 0.0))
                continue
            start = clock()
            while action is not None and action[0] is step:
                yield action
                action = next(actions, None)
            self.queue.finish()
            backend = getattr(step.kernel, "backend", "host") if step.kernel.host else "opencl"
            perf.append(PerfRow(step.layer.name, step.layer.type, backend, "executed", (clock() - start) * 1e3))

    def run(self, values: dict[str, np.ndarray], perf: list | None = None) -> dict[str, np.ndarray]:
        """values: checked float32 inputs by name -> {output key: float32 array}.
        With `perf` (a list): a PerfRow per step (see _counted)."""
        plan = self.plan
        first = not plan.ran
        deadline = time.monotonic() + deadline_s() + (FIRST_RUN_EXTRA_S if first else 0.0)
        keep = [self._upload(plan._input_slots[name], value, blocking=False) for name, value in values.items()]
        if perf is not None:
            self.queue.finish()  # the uploads are not the first step's time
        step = None
        try:
            if perf is None and self.segments is not None:
                for launches, steps in self.segments:
                    if launches is None:
                        step = steps
                        self._run_host(step, deadline, first)
                        continue
                    code, index = launches.enqueue()
                    if code:
                        step = steps[index]
                        raise cl.Error(f"clEnqueueNDRangeKernel failed: {_STATUS.get(code, code)}")
            else:
                for step, kernel, global_size, local_size in (self.actions if perf is None else self._counted(perf)):
                    if kernel is None:
                        self._run_host(step, deadline, first)
                    else:
                        cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
            step = None
            wait_device(self.queue, deadline, "the network's kernels", first)  # (then the copies wait no more)
            plan.ran = True
            results = {name: self._fetch(slot) for name, slot in plan._outputs}
            self.queue.finish()
        except cl.Error as err:
            where = f"layer {step.layer.name!r} (type {step.layer.type}): " if step is not None else ""
            raise IRError(f"{where}the OpenCL device {plan.device.full_name} failed: {err}") from err
        del keep
        return results

"""Host time of a GPU request's launches: pyopencl's enqueue (a Python call and an
event object a launch) against the GPU plugin's C loop (device_daemons/gpu/native/
enqueue.py: one call for a run of launches, no events), on the OpenCL device
the plugin picks, with the same trivial kernel (so that the host side is what is
timed; the queue is drained after each round, apart).

    python benchmarks/gpu_enqueue.py [--launches 140] [--rounds 200]

140 launches: GoogLeNet at batch 1 (its convolutions with split K and the rest).
Prints microseconds of host time a launch, median over the rounds, the device
and the load average.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def measure(launches: int, rounds: int) -> dict:
    import pyopencl as cl

    from device_daemons.gpu import open_device
    from device_daemons.gpu.native import enqueue
    device = open_device("GPU")
    queue = cl.CommandQueue(device.context)
    program = cl.Program(device.context, "__kernel void k(__global float *a) { a[get_global_id(0)] += 1.0f; }")
    program.build()
    buffer = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, 4 * 1024)
    kernels = []
    for _ in range(launches):  # a kernel object a launch, as a request has
        kernel = cl.Kernel(program, "k")
        kernel.set_args(buffer)
        kernels.append((kernel, (256,), (64,)))

    def pyopencl_round():
        for kernel, g, loc in kernels:
            cl.enqueue_nd_range_kernel(queue, kernel, g, loc)

    rows = {"device": device.full_name, "driver": device.driver, "launches": launches}
    engines = [("pyopencl", pyopencl_round)]
    why = enqueue.unavailable()
    if not why:
        batch = enqueue.LaunchList(queue, kernels)
        engines.append(("c_loop", lambda: batch.enqueue()))
    else:
        rows["c_loop"] = f"unavailable: {why}"
    for name, run in engines:
        times = []
        for r in range(rounds + 5):
            queue.finish()
            t = time.perf_counter()
            run()
            spent = time.perf_counter() - t
            if r >= 5:
                times.append(spent / launches * 1e6)
        queue.finish()
        rows[name] = round(statistics.median(times), 3)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=140)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    rows = measure(args.launches, args.rounds)
    print(f"OpenCL device: {rows['device']}, driver {rows['driver']}; {rows['launches']} launches a round")
    for name in ("pyopencl", "c_loop"):
        value = rows.get(name)
        print(f"  {name:<9} {value if isinstance(value, str) else f'{value:.2f} us of host time a launch'}")
    if isinstance(rows.get("c_loop"), float):
        print(f"  ratio pyopencl / c_loop: {rows['pyopencl'] / rows['c_loop']:.2f}")
    print("load average %.2f %.2f %.2f" % os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())

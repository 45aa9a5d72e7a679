"""`mo-core benchmark`: latency and throughput of an IR on a device daemon.

    mo-core benchmark -m model.xml [-d CPU|GPU|HETERO:GPU,CPU] [-niter 200 | -t SECONDS] [-nireq 4]
                      [-hint latency|throughput|none] [-api sync|async] [-b N] [-l FILE] [-c FILE]
                      [--affinity LAYER=DEVICE] [-pc] [-infer_precision f32|bf16] [-nthreads N]

`-nireq` requests are kept in flight (one client thread each, sharing one loaded
network); each request's latency is the time from sending it to having its outputs.
As benchmark_app: `-hint latency` keeps one request in flight, `-hint throughput` the
number the device reports as optimal (OPTIMAL_NUMBER_OF_INFER_REQUESTS); `-api sync`
is one request at a time; `-t` runs for a time instead of a count (with -niter too:
whichever ends first).
"""
import os
import sys
import threading
import time

import numpy as np

from cli.infer import (add_model_args, add_perf_count_arg, device_list, guard, load_on_device, random_inputs,
                       settings_text)
from cli.errors import raise_on_sigterm
from core.errors import Error


def add_parser(sub):
    p = sub.add_parser("benchmark", help="measure latency and throughput of an IR on a device daemon",
                       description="Run an IR many times on a device daemon with several requests in flight "
                                   "and report latency (median, p90, p99, min, max) and throughput.")
    add_model_args(p)
    p.add_argument("-niter", "--niter", type=int, help="number of requests (default 200, or none with -t)")
    p.add_argument("-t", "--time", type=float, metavar="SECONDS",
                   help="run for this many seconds (with -niter: whichever ends first)")
    p.add_argument("-nireq", "--nireq", type=int,
                   help="requests in flight (default 4; -hint latency: 1, -hint throughput: the device's optimum)")
    p.add_argument("-hint", "--hint", choices=("latency", "throughput", "none"), type=str.lower,
                   help="as benchmark_app: latency (one request in flight), throughput (the device's "
                        "OPTIMAL_NUMBER_OF_INFER_REQUESTS), none (-nireq, default 4)")
    p.add_argument("-api", "--api", choices=("sync", "async"), default="async", type=str.lower,
                   help="sync: one request at a time; async (default): -nireq requests in flight")
    p.add_argument("-b", "--batch", type=int, help="batch size (default: the IR's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per daemon request (default 120)")
    p.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a tty")
    p.add_argument("--no-auto-start", action="store_true",
                   help="never start a daemon: fail if none runs ('mo-core daemon start')")
    add_perf_count_arg(p)
    p.set_defaults(func=run)


@guard
def run(args) -> int:
    from tqdm import tqdm  # imported here: other subcommands start without it

    from device_daemons.client import IECore

    if args.niter is not None and args.niter < 1:
        raise Error("-niter must be at least 1, got {}", args.niter)
    if args.time is not None and not args.time > 0:
        raise Error("-t must be a positive number of seconds, got {}", args.time)
    niter = args.niter if args.niter is not None or args.time is not None else 200
    if args.nireq is not None and args.nireq < 1:
        raise Error("-nireq must be at least 1, got {}", args.nireq)
    if args.api == "sync" and (args.nireq or 1) > 1:
        raise Error("-api sync runs one request at a time; -nireq {} needs -api async", args.nireq)
    if args.hint == "latency" and (args.nireq or 1) > 1:
        raise Error("-hint latency keeps one request in flight; -nireq {} contradicts it (drop one of them)",
                    args.nireq)
    if args.batch is not None and args.batch < 1:
        raise Error("-b must be at least 1, got {}", args.batch)
    if args.timeout <= 0:
        raise Error("--timeout must be > 0 s")
    raise_on_sigterm()  # SIGTERM unwinds like Ctrl-C: the network is unloaded from the daemon
    device_list(args.device)  # an unknown device fails before anything is read
    ie = IECore(policy="existing" if args.no_auto_start else "auto", timeout=args.timeout)
    try:
        print("[ INFO ] Loading network files: {}, {}".format(
            args.model, args.weights or os.path.splitext(args.model)[0] + ".bin"))
        net = ie.read_network(args.model, args.weights)
        if args.batch is not None:
            net.batch_size = args.batch
        t0 = time.perf_counter()
        nireq = 1 if args.api == "sync" or args.hint == "latency" else args.nireq
        # (a device's optimum is at most one request per CPU: that many slots cover it)
        slots = nireq or (max(4, os.cpu_count() or 1) if args.hint == "throughput" else 4)
        exec_net = load_on_device(ie, net, args, num_requests=slots, perf_counts=args.perf_counts)
        settings = settings_text(exec_net)
        if nireq is None:
            nireq = 4
            if args.hint == "throughput":
                nireq = min(slots, int(exec_net.get_metric("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        if args.hint is not None or args.api == "sync":
            print("[ INFO ] {}: {} request(s) in flight".format(
                "-api sync" if args.api == "sync" else "-hint " + args.hint, nireq))
        print("[ INFO ] Loading took {:.2f} ms".format((time.perf_counter() - t0) * 1e3))
        inputs = random_inputs(net, args.seed)
        batch = next(iter(net.inputs.values()))[0] if net.inputs else 1
        print("[ INFO ] Random input (seed {}), batch {}: {}".format(
            args.seed, batch, ", ".join("{} {}".format(n, list(a.shape)) for n, a in inputs.items())))
        t0 = time.perf_counter()
        exec_net.infer(inputs)
        print("[ INFO ] First inference took {:.2f} ms".format((time.perf_counter() - t0) * 1e3))

        latencies = []
        perf_runs = []
        lock = threading.Lock()
        state = {"next": 0, "done": 0, "error": None, "end": 0.0}

        def worker(request):
            while True:
                with lock:
                    if state["error"] is not None or (niter is not None and state["next"] >= niter) or \
                            (stop_at is not None and time.perf_counter() >= stop_at):
                        return
                    state["next"] += 1
                start = time.perf_counter()
                try:
                    request.infer(inputs)
                except BaseException as exc:  # reported by the main thread
                    with lock:
                        if state["error"] is None:
                            state["error"] = exc
                    return
                end = time.perf_counter()
                with lock:
                    latencies.append((end - start) * 1e3)
                    if args.perf_counts:
                        perf_runs.append(request.perf)
                    state["done"] += 1
                    state["end"] = max(state["end"], end)

        progress = tqdm(total=niter, desc="Progress", unit="req", file=sys.stderr, leave=True,
                        disable=not (args.progress or sys.stderr.isatty()))
        threads = [threading.Thread(target=worker, args=(exec_net.requests[i],), daemon=True,
                                    name="benchmark-{}".format(i)) for i in range(nireq)]
        start = time.perf_counter()
        stop_at = None if args.time is None else start + args.time
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    progress.update(state["done"] - progress.n)
                    t.join(0.1)
        except BaseException as exc:  # Ctrl-C, SIGTERM: the requests in flight end before the network is closed
            with lock:
                state["error"] = state["error"] or exc
            for t in threads:
                t.join(args.timeout)
            raise
        duration = state["end"] - start
        progress.update(state["done"] - progress.n)
        progress.close()
        if state["error"] is not None:
            raise state["error"]
        exec_net.close()
    finally:
        ie.close()

    lat = sorted(latencies)
    fps = len(lat) * batch / duration if duration > 0 else float("inf")
    print()
    print("Count:      {} iterations ({} in flight, batch {})".format(len(lat), nireq, batch))
    if settings:
        print("Settings:   {}".format(settings))
    print("Duration:   {:.2f} ms".format(duration * 1e3))
    print("Latency (ms):")
    header = ("median", "p90", "p99", "min", "max")
    values = tuple(np.percentile(lat, (50, 90, 99))) + (lat[0], lat[-1])
    print("    " + "  ".join("{:>9}".format(h) for h in header))
    print("    " + "  ".join("{:>9.3f}".format(v) for v in values))
    print("Throughput: {:.2f} FPS".format(fps))
    if args.perf_counts:
        from cli.perf_counts import median_rows, print_perf_counts
        print_perf_counts(median_rows(perf_runs), "Performance counts, median of {} requests".format(len(perf_runs)))
    return 0

"""`mo-core tune`: search the GPU kernels' tile sizes for a network on this
machine's OpenCL device, ahead of its first load.

    mo-core tune -m model.xml [-d GPU|GPU.N] [-b N] [--mode 1|full] [-c FILE]

The search and its cache are the GPU plugin's (device_daemons/gpu/tuning.py):
the choices land in $MO_CORE_HOME/gpu-tune/<device>.json, keyed by the device,
its driver version and the kernel sources, where every GPU plan (in-process or
in the GPU daemon) reads them when it compiles a network. It runs in this
process: a network a running daemon has already compiled keeps its kernels
until it is loaded again after `mo-core daemon stop`.
"""
import time

from core.errors import Error


def add_parser(sub):
    p = sub.add_parser("tune", help="search the GPU kernels' tile sizes for a network on this machine's GPU",
                       description="Time the GPU kernels' tile configurations for every layer shape of an IR on "
                                   "the OpenCL device and cache the fastest (the GPU plugin reads the cache when it "
                                   "compiles a network).")
    p.add_argument("-m", "--model", required=True, help="the IR .xml (the .bin next to it, or --weights)")
    p.add_argument("-w", "--weights", help="the IR .bin (default: the .xml name with .bin)")
    p.add_argument("-d", "--device", default="GPU", help="GPU (the first OpenCL GPU, else any OpenCL device) or "
                                                         "GPU.N; default: GPU")
    p.add_argument("-b", "--batch", type=int, help="batch size to tune for (default: the IR's)")
    p.add_argument("--mode", choices=("1", "full"), default="1",
                   help="1: a handful of candidates per layer shape (seconds); full: every valid tile of a wider "
                        "grid (minutes); default 1")
    p.add_argument("-c", "--config", action="append", default=[],
                   help="GPU custom layers the network needs: an .xml (+ its .cl sources) (may be repeated)")
    p.set_defaults(func=run)


def run(args):
    from device_daemons.gpu import GpuPlan, open_device
    from device_daemons.gpu.custom import CustomLayers, load_custom_layers
    from device_daemons.gpu.device import DeviceError, parse_device_name
    from device_daemons.gpu.tuning import Tuner
    from ir import read_ir

    if not args.device.strip().upper().startswith("GPU"):
        raise Error("mo-core tune searches GPU kernels: -d must be GPU or GPU.N, not {!r}", args.device)
    if args.batch is not None and args.batch < 1:
        raise Error("-b must be at least 1, not {}", args.batch)
    try:
        parse_device_name(args.device)
        device = open_device(args.device)
    except DeviceError as exc:
        raise Error("{}", exc) from None
    network = read_ir(args.model, args.weights)
    custom = None
    if args.config:
        custom = CustomLayers()
        for path in args.config:
            custom.defs.update(load_custom_layers(path))
    tuner = Tuner(device, args.mode)
    start = time.perf_counter()
    plan = GpuPlan(network, device, custom_layers=custom, tuner=tuner)
    first = 0
    if args.batch is not None:  # (as the daemon does: the IR's shapes, then the batch asked for)
        first = len(tuner.report)
        plan.reshape({name: (args.batch,) + tuple(shape[1:]) for name, shape in plan.input_shapes().items()})
    elapsed = time.perf_counter() - start
    for message in plan.warnings:
        print("[ WARNING ]  " + message)
    print("Device: {} (driver {}), kernel style {}, {}".format(device.full_name, device.driver, plan.ctx.style,
                                                              plan.precision))
    rows = tuner.report[first:]
    width = max([len(r["layer"]) for r in rows] + [5])
    print("{:<{w}}  {:<15} {:>10}  {:<32}  {}".format("layer", "type", "us", "how", "configuration", w=width))
    for r in rows:
        config = " ".join(f"{k}={v}" for k, v in r["config"].items())
        us = "" if r["us"] is None else "{:.1f}".format(r["us"])
        print("{:<{w}}  {:<15} {:>10}  {:<32}  {}".format(r["layer"], r["type"], us, r["how"], config, w=width))
    print("{} layer shapes searched in {:.1f} s ({:.1f} s in all); cache: {}".format(
        tuner.searched, tuner.spent_s, elapsed, tuner.cache.path))
    return 0

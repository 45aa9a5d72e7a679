"""`mo-core infer`: run an IR once on a device daemon and show (or save) its outputs.

    mo-core infer -m model.xml [-i input.npy|input.npz] [-d CPU|GPU|GPU.N|HETERO:GPU,CPU]
                  [--top_k N] [-o outputs.npz] [-l custom_kernels.py] [-c gpu_layers.xml]
                  [--affinity LAYER=DEVICE] [--no-auto-start] [-pc]
                  [-infer_precision f32|bf16] [-nthreads N]

With HETERO, each layer runs on the first device of the list that supports it
(--affinity overrides per layer) and the split is printed.
"""
import os
import tempfile
import zipfile

from cli.errors import raise_on_sigterm
from core.errors import Error

RANDOM_SEED = 0


def add_model_args(p):
    """-m/-w/-d and the extensions (-l, -c, --affinity), shared by the commands
    that run an IR on a daemon."""
    p.add_argument("-m", "--model", required=True, help="the IR .xml (the .bin next to it, or --weights)")
    p.add_argument("-w", "--weights", help="the IR .bin (default: the .xml name with .bin)")
    p.add_argument("-d", "--device", default="CPU",
                   help="CPU, GPU (OpenCL), GPU.N, or HETERO:DEV1,DEV2 (each layer on the first device that "
                        "supports it); default: CPU")
    p.add_argument("-l", "--extension", action="append", default=[],
                   help="Python file with custom CPU kernels (may be repeated)")
    p.add_argument("-c", "--config", action="append", default=[],
                   help="GPU custom layers: an .xml (+ its .cl sources) in the Inference Engine GPU format "
                        "(may be repeated)")
    p.add_argument("--affinity", action="append", default=[], metavar="LAYER=DEVICE",
                   help="with HETERO: run this layer on this device (may be repeated)")
    p.add_argument("-infer_precision", "--infer_precision", choices=("f32", "bf16"),
                   help="CPU inference precision (INFERENCE_PRECISION_HINT); default: bf16 where the CPU has "
                        "AVX512_BF16 or AMX, else f32, as OpenVINO")
    p.add_argument("-nthreads", "--nthreads", type=int,
                   help="CPU threads of a request (INFERENCE_NUM_THREADS); default: the CPUs this process may "
                        "run on")


def device_list(device: str) -> list[str]:
    """The daemons a -d value uses: [CPU], [GPU.1], or HETERO's list."""
    from device_daemons.client.daemon import normalize_device
    from device_daemons.client.hetero import HeteroError, parse_hetero
    if device.strip().upper().startswith("HETERO"):
        try:
            return [normalize_device(d) for d in parse_hetero(device)]
        except HeteroError as exc:
            raise Error("{}", exc.message) from None
    return [normalize_device(device)]


def load_on_device(ie, net, args, num_requests=1, perf_counts=False):
    """Registers -l / -c, applies --affinity, loads `net` on args.device (with
    PERF_COUNT when perf_counts) and prints where it runs (the split, with HETERO).
    Returns the executable network."""
    devices = device_list(args.device)
    hetero = args.device.strip().upper().startswith("HETERO")
    device = "HETERO:" + ",".join(devices) if hetero else devices[0]
    for option, files, family, what in (("-l", args.extension, ("CPU",), "Custom kernels"),
                                        ("-c", args.config, ("GPU",), "GPU custom layers")):
        targets = [d for d in devices if d.split(".")[0] in family]
        if files and not targets:
            raise Error("{} gives {} for {} only; the device is {}", option, what.lower(), family[0], device)
        for path in files:
            for target in targets:
                types = ie.add_extension(path, target)
            print("[ INFO ] {} from {}: {}".format(what, path, ", ".join(types)))
    if args.affinity and not hetero:
        raise Error("--affinity is for HETERO devices (-d HETERO:GPU,CPU); the device is {}", device)
    for item in args.affinity:
        layer, sep, target = item.partition("=")
        if not sep or not layer or not target:
            raise Error("--affinity takes LAYER=DEVICE, got {!r}", item)
        net.affinity[layer] = target.strip().upper()
    config = {"PERF_COUNT": "YES"} if perf_counts else {}
    if args.infer_precision or args.nthreads is not None:
        if "CPU" not in [d.split(".")[0] for d in devices]:
            raise Error("-infer_precision and -nthreads are CPU settings; the device is {}", device)
        if args.nthreads is not None and args.nthreads < 0:
            raise Error("-nthreads must be >= 0 (0: every CPU), got {}", args.nthreads)
        config.update({k: v for k, v in (("INFERENCE_PRECISION_HINT", args.infer_precision),
                                         ("INFERENCE_NUM_THREADS", args.nthreads)) if v is not None})
    exec_net = ie.load_network(net, device, num_requests=num_requests, config=config or None)
    if hetero:
        print("[ INFO ] Network '{}' split over {} ({} parts):".format(net.name, device, len(exec_net.parts)))
        for line, part in zip(exec_net.split_lines(), exec_net.parts):
            print("[ INFO ]   {} (daemon pid {})".format(line, ie.daemon_pid(part.device)))
    else:
        print("[ INFO ] Network '{}' loaded on {} (daemon pid {}){}".format(
            net.name, exec_net.device, ie.daemon_pid(device), describe_settings(exec_net.config)))
    return exec_net


def describe_settings(config: dict) -> str:
    """What a CPU network got, for the load line: precision, threads, optimal requests."""
    parts = [text.format(config[key]) for key, text in (("INFERENCE_PRECISION_HINT", "inference precision {}"),
                                                          ("INFERENCE_NUM_THREADS", "threads {}"),
                                                          ("OPTIMAL_NUMBER_OF_INFER_REQUESTS", "optimal requests {}"))
             if key in config]
    return ": " + ", ".join(parts) if parts else ""


def settings_text(exec_net) -> str:
    """What the network got, in words ('' when its daemon reports nothing); a HETERO
    network's by part ('part 1 (GPU): ...; part 2 (CPU): ...')."""
    parts = getattr(exec_net, "parts", None)
    if parts is None:
        return describe_settings(exec_net.config)[2:]
    return "; ".join("part {} ({}): {}".format(i + 1, part.device, describe_settings(part.config)[2:])
                     for i, part in enumerate(parts) if part.config)


def add_parser(sub):
    p = sub.add_parser("infer", help="run an IR on a device daemon and print its outputs",
                       description="Run an IR network once on a device daemon (started if none runs) and "
                                   "print each output's shape and statistics.")
    add_model_args(p)
    p.add_argument("-i", "--input", help=".npy (a network with one input) or .npz keyed by input name; "
                                         "default: random input (fixed seed, printed)")
    p.add_argument("--top_k", "-nt", type=int, help="print the top-k class indices and values of each image")
    p.add_argument("-o", "--output", help="save the outputs to this .npz, keyed by output layer name")
    p.add_argument("--seed", type=int, default=RANDOM_SEED, help="seed of the random input (default 0)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per daemon request (default 120)")
    p.add_argument("--no-auto-start", action="store_true",
                   help="never start a daemon: fail if none runs ('mo-core daemon start')")
    add_perf_count_arg(p)
    p.set_defaults(func=run)


def add_perf_count_arg(p):
    p.add_argument("-pc", "--perf_counts", action="store_true",
                   help="print per-layer times: layer, type, the backend that ran it (CPU: onednn or numpy; "
                        "GPU: opencl or host; HETERO: prefixed by the device), ms")


def guard(fn):
    """Errors of the transport layer and of files are user errors: `[ ERROR ]`, exit 1."""
    def run_guarded(args):
        from core.microkernel import MicrokernelError
        try:
            return fn(args)
        except MicrokernelError as exc:
            raise Error(str(exc)) from None
    return run_guarded


def load_inputs(path, net):
    """{input name: array} from a .npy / .npz for `net` (IENetwork)."""
    names = list(net.inputs)
    if not os.path.isfile(path):
        raise Error("cannot find the input file {}", path)
    try:
        inputs = _read_arrays(path, names)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise Error("cannot read the input file {}: {} (give a .npy or .npz of numeric arrays)", path, exc) from None
    for name, arr in inputs.items():
        if arr.dtype.kind not in "fiub":
            raise Error("input '{}' in {} has dtype {}; give numbers", name, path, arr.dtype)
    return inputs


def _read_arrays(path, names) -> dict:
    """{input name: array} of a .npy (one input) or an .npz (every member read here, where
    a damaged one fails)."""
    import numpy as np
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic != b"\x93NUMPY" and not magic.startswith(b"PK"):
        raise ValueError("it is neither a .npy nor an .npz (images and other files are not read: save the array "
                         "with numpy.save or numpy.savez)")
    data = np.load(path, allow_pickle=False)  # never unpickle a user file
    if isinstance(data, np.ndarray):
        if len(names) != 1:
            raise Error("the network has {} inputs ({}); give an .npz keyed by input name instead of the .npy {}",
                        len(names), ", ".join(names), path)
        inputs = {names[0]: data}
    else:
        with data:
            keys = list(data.files)
            unknown = [k for k in keys if k not in names]
            missing = [n for n in names if n not in keys]
            if unknown or missing:
                parts = []
                if unknown:
                    parts.append("it has arrays the network has no input for: " + ", ".join(unknown))
                if missing:
                    parts.append("it lacks the inputs " + ", ".join(missing))
                raise Error("the input file {} does not match the network's inputs ({}): {}", path,
                            ", ".join(names), "; ".join(parts))
            inputs = {k: data[k] for k in keys}
    return inputs


def fit_batch(inputs, net):
    """Set the network's batch from the inputs when only dim 0 differs; else error."""
    expected = net.inputs
    batches = set()
    for name, arr in inputs.items():
        want = list(expected[name])
        have = list(arr.shape)
        if have == want:
            continue
        if len(have) == len(want) and have[1:] == want[1:]:
            batches.add(have[0])
            continue
        raise Error("input '{}' has shape {} but the network expects {}", name, have, want)
    if batches:
        if len(batches) > 1 or any(list(a.shape)[0] != next(iter(batches)) for a in inputs.values()):
            raise Error("the inputs have different batch sizes: {}",
                        ", ".join("{} {}".format(n, list(a.shape)) for n, a in inputs.items()))
        net.batch_size = batches.pop()
        return net.batch_size
    return None


def random_inputs(net, seed, index_sizes: dict | None = None):
    """Standard normal inputs; integers in [0, n) for those of index_sizes (index_ranges: a Gather's ids)."""
    import math

    import numpy as np
    from device_daemons.contract import MAX_TENSOR_ELEMENTS
    for name, shape in net.inputs.items():
        if math.prod(shape) > MAX_TENSOR_ELEMENTS:
            raise Error("input '{}' of {} has the shape {}: {} elements, more than the limit of {}; the IR is "
                        "damaged, or give a smaller batch / shape", name, net.model, list(shape),
                        math.prod(shape), MAX_TENSOR_ELEMENTS)
    rng = np.random.default_rng(seed)
    sizes = index_ranges(net._ir) if index_sizes is None else index_sizes
    return {name: rng.integers(0, sizes[name], shape).astype(np.float32) if name in sizes else
            rng.standard_normal(shape, dtype=np.float32) for name, shape in net.inputs.items()}


def index_ranges(network) -> dict[str, int]:
    """{input name: n} for the inputs Gather layers read (an embedding's ids): random input for them is integers
    in [0, n), the smallest axis they index (normal values would be no indices)."""
    from ir.schema import SchemaError, read_attrs
    inputs = {layer.id: layer.name for layer in network.inputs()}
    sizes: dict[str, int] = {}
    for edge in network.edges:
        layer = network.layer_by_id(edge.to_layer)
        if edge.from_layer not in inputs or layer.type != "Gather":
            continue
        try:
            attrs = read_attrs(layer)
            size = attrs["dims"][attrs["axis"]]
        except (SchemaError, IndexError):
            continue  # (a damaged Gather: the daemon names what is wrong with it)
        name = inputs[edge.from_layer]
        sizes[name] = min(size, sizes.get(name, size))
    return sizes


def _output_file(path) -> tuple[int, str]:
    """A temporary file beside `path` (fd, name) to write it through: where it cannot
    be made, an Error (checked before the inference, and again when writing)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise Error("cannot write {}: the directory {} does not exist", path, directory)
    if os.path.isdir(path):
        raise Error("cannot write {}: it is a directory", path)
    try:
        return tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise Error("cannot write {}: {}", path, exc.strerror or exc) from None


def check_output(path) -> None:
    fd, tmp = _output_file(path)
    os.close(fd)
    os.unlink(tmp)


def save_npz(path, arrays):
    """Write {name: array} as an .npz atomically (temporary file + rename)."""
    import numpy as np
    fd, tmp = _output_file(path)
    try:
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for name, arr in arrays.items():  # any key works, "file" included
                    with zf.open(name + ".npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.asarray(arr), allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def print_top_k(name, arr, k):
    import numpy as np
    if arr.ndim == 0:
        return
    flat = arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr.reshape(1, -1)
    k = min(k, flat.shape[1])
    print("Top {} results of '{}':".format(k, name))
    for i, row in enumerate(flat):
        order = np.argsort(-row, kind="stable")[:k]
        print("Image {}".format(i))
        print("classid probability")
        print("------- -----------")
        for idx in order:
            print("{:<7d} {:.7f}".format(int(idx), float(row[idx])))
        print()


def detection_layers(net) -> set:
    """Names of the network's outputs computed by DetectionOutput layers."""
    return {layer.name for layer in net._ir.layers if layer.type == "DetectionOutput"}


def print_detections(name, arr, k):
    """The k best rows of a DetectionOutput [1, 1, N, 7] (rows with image id -1 are unused)."""
    import numpy as np
    rows = np.asarray(arr, np.float64).reshape(-1, 7)
    rows = rows[rows[:, 0] >= 0]
    order = np.argsort(-rows[:, 2], kind="stable")[:k]
    print("Top {} detections of '{}' ({} in all; boxes normalized to the image):".format(len(order), name,
                                                                                      len(rows)))
    print("image label score     xmin    ymin    xmax    ymax")
    for r in rows[order]:
        print("{:<5d} {:<5d} {:.5f}  {:.4f}  {:.4f}  {:.4f}  {:.4f}".format(int(r[0]), int(r[1]), *r[2:]))
    print()


@guard
def run(args) -> int:
    import numpy as np
    from device_daemons.client import IECore

    if args.top_k is not None and args.top_k < 1:
        raise Error("--top_k must be at least 1, got {}", args.top_k)
    if args.timeout <= 0:
        raise Error("--timeout must be > 0 s")
    raise_on_sigterm()  # SIGTERM unwinds like Ctrl-C: the network is unloaded from the daemon
    if args.output:
        check_output(args.output)  # before the inference, not after it
    ie = IECore(policy="existing" if args.no_auto_start else "auto", timeout=args.timeout)
    try:
        device_list(args.device)  # an unknown device fails before anything is read
        print("[ INFO ] Loading network files: {}, {}".format(
            args.model, args.weights or os.path.splitext(args.model)[0] + ".bin"))
        net = ie.read_network(args.model, args.weights)
        if args.input:
            inputs = load_inputs(args.input, net)
            batch = fit_batch(inputs, net)
            if batch is not None:
                print("[ INFO ] Batch size set to {} from the input".format(batch))
        else:
            indexed = index_ranges(net._ir)
            inputs = random_inputs(net, args.seed, indexed)
            print("[ INFO ] No input given: random standard normal input, seed {}{}".format(
                args.seed, " (indices of a Gather: random integers in its range)" if indexed else ""))
        exec_net = load_on_device(ie, net, args, perf_counts=args.perf_counts)
        for w in exec_net.warnings:
            print("[ WARNING ]  " + w)
        for name, arr in inputs.items():
            print("Input '{}': shape {}".format(name, list(arr.shape)))
        request = exec_net.requests[0]
        outputs = request.infer(inputs)
        for name, arr in outputs.items():
            a = np.asarray(arr, dtype=np.float64)
            print("Output '{}': shape {}, min {:.6g}, max {:.6g}, mean {:.6g}, std {:.6g}".format(
                name, list(arr.shape), a.min(), a.max(), a.mean(), a.std()) if a.size else
                "Output '{}': shape {} (empty)".format(name, list(arr.shape)))
        detections = detection_layers(net)
        for name, arr in outputs.items():
            if name in detections:  # the top rows of a DetectionOutput, always
                print()
                print_detections(name, arr, args.top_k or 10)
        if args.top_k:
            print()
            for name, arr in outputs.items():
                if name not in detections:
                    print_top_k(name, arr, args.top_k)
        if args.perf_counts:
            from cli.perf_counts import print_perf_counts
            print_perf_counts(request.perf)
        if args.output:
            save_npz(args.output, outputs)
            print("[ INFO ] Outputs saved to {}".format(os.path.abspath(args.output)))
        exec_net.close()
    finally:
        ie.close()
    return 0

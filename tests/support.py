"""Helpers shared by the test suites: the Caffe sdist's models, caffemodels made
by real pycaffe, and running the converter (API or CLI)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MO_HOME = os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))
SDIST = os.path.join(MO_HOME, "caffe-src", "brocolli-caffe-9.0.2")
BVLC = ("bvlc_alexnet", "bvlc_googlenet", "bvlc_reference_caffenet")


def import_caffe():
    """pycaffe is a hard requirement of these tests: fail, never skip."""
    os.environ.setdefault("GLOG_minloglevel", "2")
    try:
        import caffe
    except ImportError as exc:  # pragma: no cover - the set-up script builds it
        raise AssertionError("pycaffe is not importable ({}); run ./run test, which builds it".format(exc))
    caffe.set_mode_cpu()
    return caffe


def sdist_prototxt(model: str) -> str:
    path = os.path.join(SDIST, "models", model, "deploy.prototxt")
    assert os.path.isfile(path), "the Caffe sdist is missing at {}; run ./run test".format(SDIST)
    return path


def fill_he(net, rng):
    """Weights N(0, 2/fan_in) (He), biases N(0, 0.01^2): activations keep their scale
    through a whole deep net, so every output depends on the input (plain N(0, 0.01^2)
    weights make GoogLeNet's classifier input-independent to 1e-7: the biases win)."""
    for blobs in net.params.values():
        weights = blobs[0].data
        fan_in = int(np.prod(weights.shape[1:])) or 1
        weights[...] = rng.standard_normal(weights.shape) * np.sqrt(2.0 / fan_in)
        for blob in blobs[1:]:
            blob.data[...] = rng.standard_normal(blob.data.shape) * 0.01


def make_caffemodel(prototxt: str, path: str, seed: int = 0, scale: float | None = 0.01, positive=()):
    """Builds the net with real pycaffe, fills every blob with random values and
    saves it: N(0, scale^2), or He scaling when scale is None. Blobs of layers named
    in `positive` get values in [0.5, 1.5) (variances, scales). Returns the caffe.Net."""
    caffe = import_caffe()
    net = caffe.Net(prototxt, caffe.TEST)
    rng = np.random.default_rng(seed)
    if scale is None:
        fill_he(net, rng)
    for name, blobs in net.params.items():
        for blob in blobs:
            if name in positive:
                blob.data[...] = rng.uniform(0.5, 1.5, blob.data.shape)
            elif scale is not None:
                blob.data[...] = rng.normal(0, scale, blob.data.shape)
    net.save(path)
    return net


def write_text(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return path


def convert_api(**options):
    """Runs the pipeline in-process and returns the ir.Network (every layer of a
    type the IR schema knows checked against it: an attribute it does not know,
    or a value it would not read, fails the test)."""
    from core.pipeline import ConvertOptions, convert
    ctx = convert(ConvertOptions(**options))
    # layers mapped in CustomLayersMapping.xml keep their Caffe type and parameters as they are
    mapped = set(ctx.custom_mapping.entries) if ctx.custom_mapping is not None else set()
    assert_fits_schema(ctx.network, skip_types=mapped)
    return ctx.network


def assert_fits_schema(network, skip_types=()):
    from ir.schema import layer_schema
    problems = []
    for layer in network.layers:
        schema = layer_schema(layer.type)
        if schema is not None and layer.type not in skip_types:
            problems += ["{} ({}): {}".format(layer.name, layer.type, p) for p in schema.check(layer.data)]
    assert not problems, "IR attributes that do not fit ir/schema:\n" + "\n".join(problems)


def run_cli(*args, cwd=None, timeout=300):
    """`python -m cli ...` in a fresh interpreter: (returncode, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, cwd=cwd or REPO,
                          env=env, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def assert_clean_failure(code, out, err, outdir, *needles):
    """A user error: exit 1, an [ ERROR ] screen with the needles, no traceback, and
    nothing left in outdir (files named earlier* are a test's own)."""
    text = out + err
    assert code == 1, text
    assert "[ ERROR ]" in err
    assert "Traceback" not in text
    assert len(err.strip().splitlines()) <= 12, err
    for needle in needles:
        assert needle in err, (needle, err)
    if os.path.isdir(outdir):
        leftovers = [f for f in os.listdir(outdir) if not f.startswith("earlier")]
        assert leftovers == [], leftovers


def descriptor_set(proto_dir: str, name: str, out: str):
    """FileDescriptorProto of a .proto, compiled with the protoc grpcio-tools ships."""
    from google.protobuf import descriptor_pb2

    from core.front.caffe.user_proto import run_protoc
    run_protoc(["--proto_path=" + proto_dir, "--descriptor_set_out=" + out, name])
    files = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        files.ParseFromString(f.read())
    return files.file[0]


def ir_shapes(network) -> dict[str, list[tuple]]:
    """{layer name: [output dims...]} of an ir.Network."""
    return {layer.name: [tuple(p.dims) for p in layer.outputs] for layer in network.layers}


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Polls `predicate` until it holds or `timeout` seconds pass; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def call_in_thread(call):
    """Starts call() on a thread (a request that will be cut short); returns (thread,
    outcome): outcome gets "error" (what the call raised, if anything) and "seconds"
    once it ends."""
    import threading
    outcome: dict = {}

    def run():
        t0 = time.monotonic()
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            outcome["error"] = exc
        outcome["seconds"] = time.monotonic() - t0
    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def run_in_threads(fn, n: int):
    """Runs fn(0) .. fn(n-1) on n threads at once and waits for all of them."""
    import threading
    threads = [threading.Thread(target=fn, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def caffe_outputs(proto: str, weights: str, inputs: dict):
    """A pycaffe net of the model, forwarded on `inputs` ({blob name: array})."""
    caffe = import_caffe()
    net = caffe.Net(proto, weights, caffe.TEST)
    for name, value in inputs.items():
        net.blobs[name].reshape(*value.shape)
        net.blobs[name].data[...] = value
    net.forward()
    return net


def assert_detection_padding(det, kept: int):
    """A [1, 1, R, 7] DetectionOutput after its `kept` detections: one end row of
    image_id -1, then zeros (as OpenVINO writes it)."""
    rows = det.reshape(-1, 7)
    if kept < len(rows):
        assert rows[kept, 0] == -1 and np.all(rows[kept, 1:] == 0), rows[kept]
        assert np.all(rows[kept + 1:] == 0)


def compare_with_caffe(ours: dict, net, tol: float) -> float:
    """The largest max |diff| / max |ref| of our outputs (keyed by the producing
    layer) against the pycaffe net's top blobs; asserts it is <= tol."""
    worst = 0.0
    for name, value in ours.items():
        ref = net.blobs[net.top_names[name][0]].data
        if name == "detection_out":  # Caffe keeps the detections only; the IR pads to N*keep_top_k
            kept = ref.shape[2]
            assert_detection_padding(value, kept)
            value = value[:, :, :kept]
        err = float(np.abs(np.asarray(value, np.float64) - ref).max() / max(np.abs(ref).max(), 1e-12))
        worst = max(worst, err)
    assert worst <= tol, worst
    return worst


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (children first), from /proc/<pid>/task/*/children."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop(0)
        try:
            tasks = os.listdir("/proc/{}/task".format(parent))
        except OSError:
            continue
        for task in tasks:
            try:
                with open("/proc/{}/task/{}/children".format(parent, task)) as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def worker_python_pid(pid: int) -> int:
    """The Python process of a worker launched as `pid`: itself, or inside its sandbox
    (pid is then bwrap's, and the Python runs two levels below)."""
    for candidate in [pid] + descendants(pid):
        try:
            with open("/proc/{}/cmdline".format(candidate), "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 2 and argv[1] == b"-m" and argv[2].startswith(b"fallback_workers."):
            return candidate
    raise AssertionError("no worker Python under pid {}".format(pid))

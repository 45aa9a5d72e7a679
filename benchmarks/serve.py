"""`mo-core serve` next to the daemon called directly and to the OpenVINO runtime
wrapped in the same server framework, GoogLeNet batch 1 (He-scaled random
caffemodel made by pycaffe, converted once: IR v2 for the daemon, IR v11 for
OpenVINO; the same random input for every engine, float32).

    python benchmarks/serve.py [--requests 120] [--rounds 3] [--seconds 4] [--concurrency 1,4,16]
                               [--delay-us 2000] [--max-batch 8] [--instances 1] [--rows gRPC,...]
                               [--precision f32|default]

--precision: f32 (the default) has every engine compute in f32 (OpenVINO too); default
leaves each engine its own default, bf16 on a CPU with AVX512_BF16 or AMX for both (the
header names what each chose): the same work again, and what a user gets without a
setting. Served answers are checked against the same engine called directly (within
1e-4); in f32 OpenVINO's against the daemon's too.

Rows:
- daemon direct: IECore's ExecutableNetwork.infer in this process (threads for concurrency)
- mo-core serve over REST JSON, REST binary (tritonclient.http) and gRPC (tritonclient.grpc),
  without and with dynamic batching (max_batch_size --max-batch, --delay-us queue delay;
  networks at batch 1, 2, 4, .. max); one server process, its own CPU daemon, both models;
  and REST binary once more without tritonclient's HTTP client: the bytes it sends, over
  http.client (the difference is tritonclient's own)
- OpenVINO direct: the current runtime on the IR v11, THROUGHPUT hint with its optimal
  number of infer requests (a pool: one request per concurrent caller), in this process
- OpenVINO served: that same compiled model behind this project's front end (FastAPI/uvicorn
  REST + grpcio gRPC, device_daemons/serving) - what a user would otherwise write -, in a
  process of its own (`--openvino-server`)
- floor: the libraries' own round trip with the same bytes and no model - a bare grpcio
  server (a generic handler, no protobuf) called by a bare grpcio channel, and a bare ASGI
  app on uvicorn called over one keep-alive http.client connection; each answers 4000
  bytes (GoogLeNet's output), in a process of its own (`--floor-server`). What any server
  built on these libraries adds on this machine at the least. The rows "around a pause" have
  the server wait the direct daemon's median time before it answers and leave that wait
  out: what the libraries cost when client and server sleep through a compute, as they do
  in a served request (waking a process that slept for milliseconds costs more than one
  that ran a moment ago: bare uvicorn on 2 vCPUs here, 1.0-1.6 ms against 0.4-0.9 over
  several runs).
Latency at concurrency 1: --rounds rounds interleave every row (their order reversed every
other round; ceil(--requests / --rounds) requests a round, the total printed), p50 over all,
p99 only where a row has at least 100 requests (else its 99th percentile is its maximum).
Each row's compute threads are printed (our daemons: the direct one's load reply, the
server's daemon configured the same; OpenVINO: its compiled model's). Every server runs in
a session of its own, as the daemons do, and so does this benchmark (it starts itself again
in one): autogroup scheduling gives each session one share of a busy machine. Where a
served row's time goes: the server's own statistics (Triton's statistics
extension, read before and after each block of a row's requests) give the mean of its
request duration, of the queue and of the daemon call in it, beside the client's mean;
the rest is the wire, the client library and the front end's parsing outside its timing.
Throughput: --seconds per concurrency level, requests per second. The load average is
printed per row: the machine may be shared, compare rows taken under the same load.
Goals (issue 22): REST binary / gRPC overhead over the direct daemon <= 1 ms at
concurrency 1; concurrency-16 throughput with dynamic batching >= 1.3x without. The
overhead is read per request: the client's mean less the server's own daemon call over
the same requests. The p50 against the direct row is printed beside it, but it compares
two daemons (the server's is a process of its own) whose compute drifts by more than the
goal on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.references import bvlc_model  # noqa: E402
from device_daemons.serving.frontend import FixedModels  # noqa: E402

F32 = {"INFERENCE_PRECISION_HINT": "f32"}  # every engine computes in f32 (OpenVINO too): the same work
PRECISIONS = {"f32": F32, "default": {}}  # --precision: the engines' config

READY = re.compile(r"REST on https?://[^:]+:(\d+), gRPC on [^:]+:(\d+)")


# --------------------------------------------------------------------------- models

def convert(out_dir: str, ir_version: str) -> str:
    proto, weights = bvlc_model("bvlc_googlenet")
    os.makedirs(out_dir, exist_ok=True)
    cmd = [sys.executable, "-m", "cli", "convert", "--input_model", weights, "--input_proto", proto, "-b", "1",
           "--output_dir", out_dir, "--model_name", "model", "--ir_version", ir_version, "--silent"]
    subprocess.run(cmd, check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    return os.path.join(out_dir, "model.xml")


def repository(tmp: str) -> tuple[str, str]:
    repo = os.path.join(tmp, "repo")
    xml = convert(os.path.join(repo, "googlenet", "1"), "2")
    shutil.copytree(os.path.dirname(xml), os.path.join(repo, "googlenet_batched", "1"))
    return repo, xml


def write_configs(repo: str, max_batch: int, delay_us: int, instances: int, config: dict) -> None:
    """The served models' config.json: `config` their daemon's load config."""
    with open(os.path.join(repo, "googlenet", "config.json"), "w") as f:
        json.dump({"plugin_config": config}, f)
    with open(os.path.join(repo, "googlenet_batched", "config.json"), "w") as f:
        json.dump({"max_batch_size": max_batch, "dynamic_batching": {"max_queue_delay_microseconds": delay_us},
                   "instance_count": instances, "plugin_config": config}, f)


# --------------------------------------------------------------------------- the OpenVINO server

class OpenVINOBackend(FixedModels):
    """The front end's backend interface over OpenVINO compiled models: a pool of
    infer requests per model, one per concurrent caller (what a user would write).
    "googlenet": the THROUGHPUT hint with its optimal number of requests;
    "googlenet_latency": the LATENCY hint (OpenVINO's best setting for one caller)."""

    HINTS = {"googlenet": "THROUGHPUT", "googlenet_latency": "LATENCY"}

    def __init__(self, xml: str, config: dict):
        import openvino as ov
        core = ov.Core()
        self.compiled = {}
        for name, hint in self.HINTS.items():
            compiled = core.compile_model(xml, "CPU", {"PERFORMANCE_HINT": hint, **config})
            nreq = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
            pool: queue.Queue = queue.Queue()
            for _ in range(nreq):
                pool.put(compiled.create_infer_request())
            self.compiled[name] = (compiled, pool, nreq)
        tensor = lambda name, port: {"name": name, "datatype": "FP32", "shape": list(port.shape)}  # noqa: E731
        self.models = {name: {"name": name, "versions": ["1"], "platform": "openvino",
                              "inputs": [tensor("data", compiled.inputs[0])],
                              "outputs": [tensor("prob", compiled.outputs[0])]} for name in self.HINTS}

    def describe(self) -> str:
        return ", ".join(f"{n}: {self.HINTS[n]} hint, {m[2]} infer requests, {self.threads(n)}"
                         for n, m in self.compiled.items())

    def settings(self, name: str) -> tuple[int, int]:
        """(threads, streams) of a compiled model, as OpenVINO reports them."""
        compiled = self.compiled[name][0]
        return int(compiled.get_property("INFERENCE_NUM_THREADS")), int(compiled.get_property("NUM_STREAMS"))

    def threads(self, name: str) -> str:
        threads, streams = self.settings(name)
        return f"{threads} threads" + (f" in {streams} streams" if streams > 1 else "")

    def precision(self) -> str:
        hint = next(iter(self.compiled.values()))[0].get_property("INFERENCE_PRECISION_HINT")
        return hint.to_string() if hasattr(hint, "to_string") else str(hint)  # (an openvino Type: "bf16")

    def infer(self, name, version, inputs, outputs):
        self.metadata(name, version)  # 404 for another name
        t0 = time.perf_counter_ns()
        _, pool, _ = self.compiled[name]
        request = pool.get()
        try:
            request.infer({0: inputs["data"]})
            out = request.get_output_tensor(0).data.copy()
        finally:
            pool.put(request)
        return "1", {"prob": out}, {"compute_infer_ns": time.perf_counter_ns() - t0}


FLOOR_REPLY = b"\0" * 4000  # GoogLeNet's 1000 float32 scores
FLOOR_METHOD = "/floor.Echo/Call"


def floor_server() -> int:
    """`--floor-server`: a bare grpcio server and a bare ASGI app on uvicorn that read
    the request and answer FLOOR_REPLY, on free ports (the floor rows). Asked to pause
    (the x-pause-us header, the pause-us metadata) they wait that long before answering
    and say how long they waited (x-paused-ns, the paused-ns trailing metadata)."""
    import asyncio
    from concurrent import futures

    import grpc
    import uvicorn

    from device_daemons.serving.embedded import listen
    from core.microkernel.heap import keep_freed_buffers
    keep_freed_buffers()  # (as our front end: the floor is the least such a server costs)

    def call(request, context):
        pause = dict(context.invocation_metadata()).get("pause-us")
        if pause:
            t0 = time.perf_counter_ns()
            time.sleep(int(pause) / 1e6)
            context.set_trailing_metadata((("paused-ns", str(time.perf_counter_ns() - t0)),))
        return FLOOR_REPLY
    handler = grpc.method_handlers_generic_handler("floor.Echo", {"Call": grpc.unary_unary_rpc_method_handler(call)})
    g = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=[
        ("grpc.max_receive_message_length", 64 << 20), ("grpc.so_reuseport", 0)])
    g.add_generic_rpc_handlers((handler,))
    grpc_port = g.add_insecure_port("127.0.0.1:0")
    g.start()

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        headers = [(b"content-length", str(len(FLOOR_REPLY)).encode())]
        pause = dict(scope["headers"]).get(b"x-pause-us")
        if pause:
            t0 = time.perf_counter_ns()
            await asyncio.sleep(int(pause) / 1e6)
            headers.append((b"x-paused-ns", str(time.perf_counter_ns() - t0).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": FLOOR_REPLY})
    sock = listen("127.0.0.1", 0)
    print(f"floor: REST on http://127.0.0.1:{sock.getsockname()[1]}, gRPC on 127.0.0.1:{grpc_port}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")).run(sockets=[sock])
    g.stop(0)
    return 0


def openvino_server(xml: str, config: dict) -> int:
    """`--openvino-server XML`: the project's front end over OpenVINO, on free ports."""
    from device_daemons.serving.embedded import ServeOptions, listen, run_frontend, setup_logging
    setup_logging()
    backend = OpenVINOBackend(xml, config)
    opts = ServeOptions(os.path.dirname(xml), http_port=0, grpc_port=0, access_log=False)
    sock = listen(opts.host, 0)
    run_frontend(opts, backend, [], None, None, sock, f"OpenVINO ({backend.describe()})")
    return 0


# --------------------------------------------------------------------------- processes

class Process:
    def __init__(self, cmd: list, env: dict | None = None):
        # a session of its own, as the daemons have (core/microkernel/launcher.py): see in_own_session
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                     env=dict(os.environ, PYTHONPATH=ROOT, GLOG_minloglevel="2", **(env or {})),
                                     start_new_session=True)
        self.lines: list[str] = []
        self.ports = None
        self.event = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            m = READY.search(line)
            if m:
                self.ports = (int(m.group(1)), int(m.group(2)))
            if "ready:" in line or (self.ports and ("OpenVINO" in line or "floor" in line)):
                self.event.set()
        self.event.set()

    def wait(self, timeout=600):
        if not self.event.wait(timeout) or self.proc.poll() is not None:
            raise SystemExit("the server did not start:\n" + "\n".join(self.lines[-30:]))
        return self.ports

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def in_own_session(argv: list) -> int | None:
    """This benchmark run again in a session of its own (its exit status), unless it
    leads one already (None: go on). Its in-process engines (the daemon's client,
    OpenVINO direct) then get the scheduling the daemons and servers get: with autogroup
    scheduling a process of a busy session (the shell's) shares that session's CPU share."""
    if os.getsid(0) == os.getpid():
        return None
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv], start_new_session=True)
    try:
        return proc.wait()
    except KeyboardInterrupt:  # (a new session has no terminal: pass Ctrl-C on, let it clean up)
        proc.send_signal(signal.SIGINT)
        return proc.wait()


# --------------------------------------------------------------------------- engines

def direct_engine(exec_net, x):
    return lambda: (lambda: exec_net.infer({"data": x})["prob"])


def ov_direct(backend, name, x):
    return lambda: (lambda: backend.infer(name, "", {"data": x}, None)[1]["prob"])


def http_engine(port: int, model: str, x, binary: bool):
    import tritonclient.http as httpclient

    def make():
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}", network_timeout=300)
        t = httpclient.InferInput("data", list(x.shape), "FP32")
        t.set_data_from_numpy(x, binary_data=binary)
        outs = [httpclient.InferRequestedOutput("prob", binary_data=binary)]
        return lambda: client.infer(model, [t], outputs=outs).as_numpy("prob")
    make.target = (port, model)  # (where its server's statistics are: the time split)
    return make


def post(conn, path: str, body: bytes, headers: dict):
    """(response, its body) of a POST on a keep-alive http.client connection; uvicorn
    closes a connection idle for 5 s: connected again once, as tritonclient does."""
    import http.client
    for attempt in (0, 1):
        try:
            conn.request("POST", path, body=body, headers=headers)
            reply = conn.getresponse()
            return reply, reply.read()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            conn.close()
            if attempt:
                raise


def plain_http_engine(port: int, model: str, x):
    """The binary request tritonclient.http sends (its own bytes), over one keep-alive
    http.client connection, the reply read by tritonclient: what tritonclient's HTTP
    client itself adds is the difference to the REST binary row."""
    import http.client

    import tritonclient.http as httpclient

    def make():
        t = httpclient.InferInput("data", list(x.shape), "FP32")
        t.set_data_from_numpy(x, binary_data=True)
        outs = [httpclient.InferRequestedOutput("prob", binary_data=True)]
        body, header_length = httpclient.InferenceServerClient.generate_request_body([t], outputs=outs)
        headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(header_length)}
        conn = http.client.HTTPConnection("127.0.0.1", port)

        def call():
            reply, data = post(conn, f"/v2/models/{model}/infer", body, headers)
            length = reply.getheader("Inference-Header-Content-Length")
            result = httpclient.InferResult.from_response_body(data, header_length=int(length) if length else None)
            return result.as_numpy("prob")
        return call
    make.target = (port, model)
    return make


def grpc_engine(port: int, model: str, x):
    import tritonclient.grpc as grpcclient

    def make():
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        t = grpcclient.InferInput("data", list(x.shape), "FP32")
        t.set_data_from_numpy(x)
        return lambda: client.infer(model, [t]).as_numpy("prob")
    make.target = (port, model)
    return make


def floor_grpc_engine(port: int, size: int, pause_us: int = 0):
    """The bare grpcio floor; with `pause_us` its call returns the seconds the server
    paused (the latency rounds leave them out: PAUSED rows)."""
    import grpc

    def make():
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 << 20)])
        call = channel.unary_unary(FLOOR_METHOD)
        payload = b"\1" * size
        if not pause_us:
            return lambda: call(payload)
        metadata = (("pause-us", str(pause_us)),)

        def paused():
            _, outcome = call.with_call(payload, metadata=metadata)
            return int(dict(outcome.trailing_metadata())["paused-ns"]) / 1e9
        return paused
    return make


def floor_http_engine(port: int, size: int, pause_us: int = 0):
    """The bare uvicorn floor over http.client (`pause_us`: as floor_grpc_engine)."""
    import http.client

    def make():
        conn = http.client.HTTPConnection("127.0.0.1", port)
        payload = b"\1" * size
        headers = {"Content-Type": "application/octet-stream"}
        if pause_us:
            headers["x-pause-us"] = str(pause_us)

        def call():
            reply, _ = post(conn, "/v2/models/floor/infer", payload, headers)
            return int(reply.getheader("x-paused-ns")) / 1e9 if pause_us else None
        return call
    return make


PAUSED = ", around a pause"  # a floor row whose server pauses as the daemon computes (its latency: all but that)


STAT_KEYS = ("success", "queue", "compute_infer")  # the server's request duration, its queue, the daemon call


def server_stats(port: int, model: str) -> dict:
    """{key: (count, ns)} of a model's statistics on a server of this front end."""
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{model}/stats", timeout=60) as reply:
        stats = json.load(reply)["model_stats"][0]["inference_stats"]
    return {k: (stats[k]["count"], stats[k]["ns"]) for k in STAT_KEYS}


def split_row(name: str, latencies: list, split: dict | None) -> str:
    """One row of the time split: the client's mean and, for a served row, the server's
    means (request, queue, daemon call) and what lies outside the server's timing."""
    client = float(np.mean(latencies))
    if split is None or not split["success"][0]:
        return f"{name:<34} {client:8.2f} {'-':>9} {'-':>7} {'-':>12} {'-':>9}"
    mean = {k: split[k][1] / max(split[k][0], 1) / 1e6 for k in STAT_KEYS}
    return (f"{name:<34} {client:8.2f} {mean['success']:9.2f} {mean['queue']:7.2f} {mean['compute_infer']:12.2f} "
            f"{client - mean['success']:9.2f}")


def per_request_overhead(latencies: list, split: dict | None) -> float | None:
    """ms a served request takes beyond its daemon call: the client's mean less the
    server's mean daemon call over the same requests (None: no statistics)."""
    if not latencies or split is None or not split["compute_infer"][0]:
        return None
    return float(np.mean(latencies)) - split["compute_infer"][1] / split["compute_infer"][0] / 1e6


P99_MIN = 100  # requests a row needs before its 99th percentile is more than its slowest one


def p99_cell(latencies: list) -> str:
    return f"{np.percentile(latencies, 99):.2f}" if len(latencies) >= P99_MIN else "-"


def compute_pause(exec_net, x) -> int:
    """The paused floor rows' pause, us: the direct daemon's median over a few requests."""
    times = []
    for _ in range(12):
        t0 = time.perf_counter_ns()
        exec_net.infer({"data": x})
        times.append(time.perf_counter_ns() - t0)
    return int(np.median(times[2:]) / 1e3)


def threads_cell(name: str, ours, ov_backend) -> str:
    """The row's compute threads: our daemons' (the direct one's load reply, the server's
    config the same), OpenVINO's compiled model's (streams), none for the floor."""
    if name.startswith("floor"):
        return "-"
    if name.startswith("OpenVINO"):
        threads, streams = ov_backend.settings("googlenet_latency" if name.endswith(("LATENCY", "LAT.")) else
                                               "googlenet")
        return str(threads) if streams == 1 else f"{threads} ({streams} streams)"
    return str(ours)


def throughput(make, concurrency: int, seconds: float) -> float:
    """Requests per second of `concurrency` callers for `seconds`; each caller makes
    its client on its own thread (tritonclient.http's gevent client is bound to it)."""
    counts = [0] * concurrency
    ready = threading.Barrier(concurrency + 1)
    go = threading.Event()
    window = {}

    def run(i):
        call = make()
        call()  # warm (connection, first request)
        ready.wait()
        go.wait()
        while time.perf_counter() < window["stop"]:
            call()
            counts[i] += 1
    threads = [threading.Thread(target=run, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    ready.wait()
    t0 = time.perf_counter()
    window["stop"] = t0 + seconds
    go.set()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=120, help="latency requests per row in all (default %(default)s; "
                                                                "p99 from 100 up)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--delay-us", type=int, default=2000)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--instances", type=int, default=1, help="batches in flight at once (instance_count)")
    ap.add_argument("--rows", help="only the rows whose name contains one of these comma-separated words "
                                   "(the daemon direct row is always measured)")
    ap.add_argument("--precision", choices=sorted(PRECISIONS), default="f32",
                    help="f32 for every engine, or each engine's default (module doc)")
    ap.add_argument("--openvino-server", metavar="XML", help=argparse.SUPPRESS)
    ap.add_argument("--floor-server", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    config = PRECISIONS[args.precision]
    if args.openvino_server:
        return openvino_server(args.openvino_server, config)
    if args.floor_server:
        return floor_server()
    again = in_own_session(sys.argv[1:] if argv is None else argv)
    if again is not None:
        return again
    levels = [int(c) for c in args.concurrency.split(",")]
    start_load = os.getloadavg()[0]  # (before this run's own processes: what other work there is)
    tmp = tempfile.mkdtemp(prefix="bench-serve-")
    runtime = tempfile.mkdtemp(prefix="bs-", dir="/tmp")
    os.environ["MO_CORE_RUNTIME_DIR"] = runtime
    servers = []
    try:
        repo, xml = repository(tmp)
        xml11 = convert(os.path.join(tmp, "v11"), "11")
        x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        from device_daemons.client import IECore
        ie = IECore(policy="auto")
        exec_net = ie.load_network(ie.read_network(xml), "CPU", config=config)
        ours_precision = exec_net.get_config("INFERENCE_PRECISION_HINT")
        ours_threads = exec_net.get_config("INFERENCE_NUM_THREADS")
        # the server's own daemon gets the direct one's thread count in its config: the same, and said
        write_configs(repo, args.max_batch, args.delay_us, args.instances,
                      dict(config, INFERENCE_NUM_THREADS=ours_threads))
        reference = exec_net.infer({"data": x})["prob"].copy()

        ours = Process([sys.executable, "-m", "cli", "serve", "--model_repository", repo, "--http-port", "0",
                        "--grpc-port", "0", "--no-access-log", "--cache-dir", os.path.join(tmp, "cache")])
        servers.append(ours)
        ov = Process([sys.executable, os.path.abspath(__file__), "--openvino-server", xml11, "--precision",
                      args.precision])
        servers.append(ov)
        floor = Process([sys.executable, os.path.abspath(__file__), "--floor-server"])
        servers.append(floor)
        http_port, grpc_port = ours.wait()
        ov_http, ov_grpc = ov.wait()
        floor_http, floor_grpc = floor.wait()
        size = x.nbytes + 200  # (about what tritonclient's binary request adds: its JSON header, the proto)
        ov_backend = OpenVINOBackend(xml11, config)
        ov_reference = ov_backend.infer("googlenet_latency", "", {"data": x}, None)[1]["prob"]
        pause_us = compute_pause(exec_net, x)
        engines = [
            ("daemon direct", direct_engine(exec_net, x)),
            ("serve REST JSON", http_engine(http_port, "googlenet", x, False)),
            ("serve REST binary", http_engine(http_port, "googlenet", x, True)),
            ("serve REST binary, http.client", plain_http_engine(http_port, "googlenet", x)),
            ("serve gRPC", grpc_engine(grpc_port, "googlenet", x)),
            ("serve+batching REST JSON", http_engine(http_port, "googlenet_batched", x, False)),
            ("serve+batching REST binary", http_engine(http_port, "googlenet_batched", x, True)),
            ("serve+batching gRPC", grpc_engine(grpc_port, "googlenet_batched", x)),
            ("OpenVINO direct, LATENCY", ov_direct(ov_backend, "googlenet_latency", x)),
            ("OpenVINO direct, THROUGHPUT", ov_direct(ov_backend, "googlenet", x)),
            ("OpenVINO served REST bin, LAT.", http_engine(ov_http, "googlenet_latency", x, True)),
            ("OpenVINO served REST bin, THR.", http_engine(ov_http, "googlenet", x, True)),
            ("OpenVINO served gRPC, LATENCY", grpc_engine(ov_grpc, "googlenet_latency", x)),
            ("OpenVINO served gRPC, THROUGHPUT", grpc_engine(ov_grpc, "googlenet", x)),
            ("floor: bare uvicorn, same bytes", floor_http_engine(floor_http, size)),
            ("floor: bare grpcio, same bytes", floor_grpc_engine(floor_grpc, size)),
            ("floor: bare uvicorn" + PAUSED, floor_http_engine(floor_http, size, pause_us)),
            ("floor: bare grpcio" + PAUSED, floor_grpc_engine(floor_grpc, size, pause_us)),
        ]
        if args.rows:
            words = [w.strip() for w in args.rows.split(",") if w.strip()]
            engines = [e for e in engines if e[0] == "daemon direct" or any(w in e[0] for w in words)]
        calls = {}
        for name, make in engines:  # every engine gives its direct answer (in f32 the daemon's: OpenVINO's too)
            calls[name] = make()
            if name.startswith("floor"):
                calls[name]()
                continue
            out = np.asarray(calls[name]())
            openvino = name.startswith("OpenVINO") and args.precision != "f32"
            ref = ov_reference if openvino else reference
            err = float(np.abs(out - ref).max() / np.abs(ref).max())
            if err > 1e-4:
                raise SystemExit(f"{name} answers differently from {'OpenVINO' if openvino else 'the daemon'} "
                                 f"called directly: relative error {err:.2e}")
        lat = {name: [] for name, _ in engines}
        rest_port = {grpc_port: http_port, ov_grpc: ov_http}  # (a server's statistics are read over its REST)
        sources = {name: (rest_port.get(make.target[0], make.target[0]), make.target[1])
                   for name, make in engines if hasattr(make, "target")}
        split = {name: {k: (0, 0) for k in STAT_KEYS} for name in sources}
        ceiling = {"load": os.getloadavg()[0]}
        for batch in (1, args.max_batch):
            net = ie.read_network(xml)
            net.batch_size = batch
            batched = ie.load_network(net, "CPU", config=config)
            xb = np.repeat(x, batch, axis=0)
            ceiling[batch] = batch * throughput(lambda: (lambda: batched.infer({"data": xb})), 1, args.seconds)
            batched.close()
        load_lat = [os.getloadavg()[0]]
        per_round = -(-args.requests // args.rounds)  # (at least --requests in all; the header says how many)
        for r in range(args.rounds):
            for name, _ in engines[::-1] if r % 2 else engines:  # (no row always first)
                call = calls[name]
                before = server_stats(*sources[name]) if name in sources else None
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    paused = call()
                    lat[name].append((time.perf_counter() - t0 - (paused if PAUSED in name else 0)) * 1e3)
                if before is not None:
                    after = server_stats(*sources[name])
                    split[name] = {k: (split[name][k][0] + after[k][0] - before[k][0],
                                       split[name][k][1] + after[k][1] - before[k][1]) for k in STAT_KEYS}
        load_lat.append(os.getloadavg()[0])
        rows = []
        for name, make in engines:
            load0 = os.getloadavg()[0]
            rps = [float("nan") if PAUSED in name else throughput(make, c, args.seconds) for c in levels]
            rows.append((name, np.percentile(lat[name], 50), p99_cell(lat[name]), rps, load0, os.getloadavg()[0]))
        print()
        precision = ("f32" if args.precision == "f32" else
                     f"each engine's default precision (ours {ours_precision}, OpenVINO {ov_backend.precision()})")
        print(f"GoogLeNet b1, {precision}, {os.cpu_count()} CPUs; latency: {args.rounds} interleaved rounds (the "
              f"order reversed every other round), {per_round * args.rounds} requests per row ({args.rounds} x "
              f"{per_round}; load {load_lat[0]:.2f} -> {load_lat[1]:.2f}); p99 only from {P99_MIN} requests up "
              f"(fewer: '-', its 99th percentile would be the maximum); throughput: {args.seconds:g} s per "
              f"concurrency level; dynamic batching: max_batch_size {args.max_batch}, max_queue_delay "
              f"{args.delay_us} us, {args.instances} batch(es) in flight; our daemons {ours_threads} threads (the "
              f"direct one's load reply, the server's given the same); OpenVINO {ov_backend.describe()}; every "
              f"server and daemon in a session of its own, and this process too")
        head = f"{'engine':<34} {'threads':>14} {'p50 ms':>8} {'p99 ms':>8} " + " ".join(
            f"{'c=' + str(c) + ' req/s':>12}" for c in levels) + "   load (1 min)"
        print(head)
        print("-" * len(head))
        for name, p50, p99, rps, l0, l1 in rows:
            print(f"{name:<34} {threads_cell(name, ours_threads, ov_backend):>14} {p50:8.2f} {p99:>8} "
                  + " ".join(f"{'-' if r != r else f'{r:.1f}':>12}" for r in rps) + f"   {l0:.2f} -> {l1:.2f}")
        by = {r[0]: r for r in rows}
        # the throughput rows load the machine themselves (16 callers, the servers): only the load before the
        # run shows other work; the latency rounds run one request at a time, so their load shows it too
        cpus = os.cpu_count()
        void = "other processes took most of the machine, these figures do not decide the goal"
        caveat_lat = (f" - but the load average reached {max(load_lat):.1f} on {cpus} CPUs during the latency "
                      f"rounds: {void}" if max(load_lat) > cpus else "")
        caveat_tp = (f" - but the load average was {start_load:.1f} on {cpus} CPUs before the run: {void}"
                     if start_load > cpus else "")
        print(f"the daemon alone (direct, one caller): batch 1 {ceiling[1]:.1f} images/s, batch {args.max_batch} "
              f"{ceiling[args.max_batch]:.1f} images/s (load {ceiling['load']:.2f}): what merging into batches "
              f"can gain at most here over one caller")
        if 16 in levels:
            # the daemon runs concurrent batch-1 requests side by side: what batching can add at concurrency 16
            # is its batch against that, not against one caller
            unbatched = by["daemon direct"][3][levels.index(16)]
            print(f"the daemon direct at concurrency 16 without batching: {unbatched:.1f} images/s; its batch "
                  f"{args.max_batch} from one caller / that = {ceiling[args.max_batch] / unbatched:.2f}x: what "
                  f"batching can gain at concurrency 16 on this machine, before the front end's own work")
        direct = by["daemon direct"][1]
        print()
        print("where the time goes at concurrency 1 (means over the latency rounds, ms): the client's; the server's "
              "request duration, its queue and the daemon call (OpenVINO's infer) in it; outside the server's timing")
        print(f"{'engine':<34} {'client':>8} {'server':>9} {'queue':>7} {'daemon call':>12} {'outside':>9}")
        for name, _ in engines:
            if not name.startswith("floor"):
                print(split_row(name, lat[name], split.get(name)))
        print()
        floors = {"serve REST binary": "floor: bare uvicorn", "serve gRPC": "floor: bare grpcio"}
        for name in [n for n in ("serve REST binary", "serve gRPC") if n in by]:
            # the p50s of two rows differ by the two daemons' compute too (the server's daemon is another
            # process, and this machine's speed drifts by more than the goal); the client's time less the
            # server's daemon call on the same requests leaves that out: the goal reads against it
            over = per_request_overhead(lat[name], split.get(name))
            text = f"p50 against the direct row {by[name][1] - direct:+.2f} ms"
            if over is None:
                print(f"goal: {name} overhead over the direct daemon at concurrency 1 (<= 1 ms): {text} (no "
                      f"server statistics: not decided){caveat_lat}")
                continue
            parts = []
            hot, paused = (by.get(floors[name] + tail) for tail in (", same bytes", PAUSED))
            if hot is not None and paused is not None:
                parts.append(f"the bare library takes {paused[1]:.2f} ms of it around a {pause_us / 1e3:.1f} ms "
                             f"pause ({hot[1]:.2f} ms back to back: client and server sleep through the compute "
                             f"and wake up slower)")
            plain = per_request_overhead(lat.get(name + ", http.client", []), split.get(name + ", http.client"))
            if plain is not None:
                parts.append(f"tritonclient's HTTP client {over - plain:.2f} ms (the same request over http.client: "
                             f"{plain:+.2f} ms)")
            print(f"goal: {name} overhead over the direct daemon at concurrency 1 (<= 1 ms): {over:+.2f} ms a "
                  f"request (the client's mean less the server's daemon call on the same requests; {text}): "
                  f"{'met' if over <= 1.0 else 'NOT met'}" + "".join("; " + p for p in parts) + caveat_lat)
        if 16 in levels:
            i = levels.index(16)
            for wire in [w for w in ("REST JSON", "REST binary", "gRPC")
                         if f"serve {w}" in by and f"serve+batching {w}" in by]:
                ratio = by[f"serve+batching {wire}"][3][i] / by[f"serve {wire}"][3][i]
                print(f"goal: {wire} concurrency-16 throughput with dynamic batching / without: {ratio:.2f}x "
                      f"(>= 1.3x): {'met' if ratio >= 1.3 else 'NOT met'}{caveat_tp}")
        exec_net.close()
        ie.close()
    finally:
        for s in servers:
            s.stop()
        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], cwd=ROOT, capture_output=True,
                       env=dict(os.environ, PYTHONPATH=ROOT))
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The library choice of `mo-core serve`, measured: the same trivial model (a
1x3x224x224 FP32 input, GoogLeNet's; its first 1000 values as a [1, 1000] output, so
that only the framework's cost remains) behind

- ours: FastAPI on uvicorn (uvloop, httptools) + grpcio with our v2 proto, the
  front end of device_daemons/serving (embedded.run_frontend) over an echo backend
- kserve's ModelServer (the `kserve` package: FastAPI + grpc.aio, its v2 protocol)
  with a kserve.Model doing the same
- Ray Serve's HTTP ingress (its proxy, then a replica running our FastAPI app:
  `serve.ingress` with a builder), on a local one-node Ray

each in a process of its own, driven by tritonclient (REST with the binary tensor
extension, gRPC where the framework has it).

    python benchmarks/serve_frameworks.py [--requests 300] [--rounds 3] [--seconds 4]

Latency at concurrency 1: --rounds rounds interleave the frameworks; p50/p99 over
all requests. Throughput: REST binary, 16 concurrent clients, --seconds. The load
average is printed: the machine may be shared.
"""
from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.serve import grpc_engine, http_engine, throughput  # noqa: E402
from device_daemons.serving.frontend import FixedModels  # noqa: E402

PORTS = re.compile(r"PORTS (\d+) (\d+)")
META = {"name": "echo", "versions": ["1"], "platform": "echo",
        "inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 3, 224, 224]}],
        "outputs": [{"name": "prob", "datatype": "FP32", "shape": [1, 1000]}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EchoBackend(FixedModels):
    """'prob' = the input's first 1000 values."""

    models = {"echo": META}

    def infer(self, name, version, inputs, outputs):
        return "1", {"prob": np.ascontiguousarray(inputs["data"].reshape(1, -1)[:, :1000])}, {}


def run_ours() -> None:
    from device_daemons.serving.embedded import ServeOptions, listen, run_frontend, setup_logging
    setup_logging()
    http, grpc = free_port(), free_port()
    opts = ServeOptions(ROOT, http_port=http, grpc_port=grpc, access_log=False)
    sock = listen(opts.host, http)
    print(f"PORTS {http} {grpc}", flush=True)
    run_frontend(opts, EchoBackend(), [], None, None, sock, "echo")


def run_kserve() -> None:
    import kserve
    from kserve import InferOutput, InferResponse

    class Echo(kserve.Model):
        def __init__(self):
            super().__init__("echo")
            self.ready = True

        def predict(self, payload, headers=None):
            x = payload.inputs[0].as_numpy()
            out = InferOutput("prob", [1, 1000], "FP32")
            out.set_data_from_numpy(np.ascontiguousarray(x.reshape(1, -1)[:, :1000]), binary_data=True)
            return InferResponse(payload.id or "0", self.name, [out])

    http, grpc = free_port(), free_port()
    print(f"PORTS {http} {grpc}", flush=True)
    kserve.ModelServer(http_port=http, grpc_port=grpc, workers=1, enable_docs_url=False,
                       access_log_format=None, enable_latency_logging=False).start([Echo()])


def run_ray() -> None:
    import logging
    # token authentication with a token of this run (else Ray writes one to ~/.ray/auth_token);
    # set before ray is imported, which reads it
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    import ray
    from ray import serve

    def build():
        from device_daemons.serving.frontend import Server
        from device_daemons.serving.rest import make_app, wrap
        server = Server(EchoBackend(), access_logging=False)
        return wrap(make_app(server, 64 << 20), server, 64 << 20)  # (our REST front end as the server runs it)

    http = free_port()
    tmp = tempfile.mkdtemp(prefix="rf-", dir="/tmp")
    try:
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, _temp_dir=tmp,
                 _node_ip_address="127.0.0.1",
                 runtime_env={"env_vars": {"PYTHONPATH": ROOT}})
        serve.start(http_options={"host": "127.0.0.1", "port": http}, logging_config={"log_level": "WARNING"})
        serve.run(serve.deployment(serve.ingress(build)(), name="echo").bind(), name="echo", route_prefix="/")
        print(f"PORTS {http} 0", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        stop.wait()
        serve.shutdown()
        ray.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Server:
    def __init__(self, mode: str):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", mode],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                     env=dict(os.environ, PYTHONPATH=ROOT), start_new_session=True)
        self.lines = []
        self.ports = None
        got = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line.rstrip())
                m = PORTS.search(line)
                if m:
                    self.ports = (int(m.group(1)), int(m.group(2)))
                    got.set()
            got.set()
        threading.Thread(target=read, daemon=True).start()
        if not got.wait(180) or self.ports is None:
            raise SystemExit(f"{mode} did not start:\n" + "\n".join(self.lines[-30:]))

    def wait_ready(self, make):
        deadline = time.monotonic() + 120
        while True:
            try:
                make()()
                return
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("the server does not answer:\n" + "\n".join(self.lines[-30:]))
                time.sleep(0.5)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--serve", choices=("ours", "kserve", "ray"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        {"ours": run_ours, "kserve": run_kserve, "ray": run_ray}[args.serve]()
        return 0
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    want = x.reshape(1, -1)[:, :1000]
    servers = {}
    try:
        engines = []
        for mode, label in (("ours", "FastAPI/uvicorn + grpcio (ours)"), ("kserve", "kserve ModelServer"),
                            ("ray", "Ray Serve HTTP ingress")):
            srv = servers[mode] = Server(mode)
            http, grpc = srv.ports
            engines.append((f"{label}, REST binary", http_engine(http, "echo", x, True)))
            if grpc:
                engines.append((f"{label}, gRPC", grpc_engine(grpc, "echo", x)))
            srv.wait_ready(engines[-1][1])
        calls = {}
        for name, make in engines:
            calls[name] = make()
            if not np.array_equal(np.asarray(calls[name]()), want):
                raise SystemExit(f"{name} answers wrongly")
        lat = {name: [] for name, _ in engines}
        load0 = os.getloadavg()[0]
        for _ in range(args.rounds):
            for name, _ in engines:
                for _ in range(args.requests // args.rounds):
                    t0 = time.perf_counter()
                    calls[name]()
                    lat[name].append((time.perf_counter() - t0) * 1e3)
        load1 = os.getloadavg()[0]
        rows = []
        for name, make in engines:
            l0 = os.getloadavg()[0]
            rps = throughput(make, 16, args.seconds) if "REST" in name else float("nan")
            rows.append((name, np.percentile(lat[name], 50), np.percentile(lat[name], 99), rps, l0,
                         os.getloadavg()[0]))
        print()
        print(f"echo model, FP32 1x3x224x224 in, [1, 1000] out, tritonclient; {os.cpu_count()} CPUs; latency: "
              f"{args.rounds} interleaved rounds, {args.requests} requests per row (load {load0:.2f} -> {load1:.2f})")
        head = f"{'framework, wire':<44} {'p50 ms':>8} {'p99 ms':>8} {'c=16 req/s':>11}   load (1 min)"
        print(head)
        print("-" * len(head))
        for name, p50, p99, rps, l0, l1 in rows:
            print(f"{name:<44} {p50:8.3f} {p99:8.3f} {rps:11.1f}   {l0:.2f} -> {l1:.2f}")
    finally:
        for srv in servers.values():
            srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

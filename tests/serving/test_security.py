"""Security and life cycle of `mo-core serve` as real processes: a bearer token and
TLS from files (REST and gRPC, with tritonclient and httpx), a non-loopback bind
without a token refused, a world-readable token file refused, and no daemon left
behind after SIGTERM or kill -9 of the server."""
from __future__ import annotations

import datetime
import ipaddress
import os
import signal
import ssl
import subprocess
import sys

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support import REPO

from .servers import ServerProcess, wait_gone

TOKEN = "s3cret-token-for-the-test"


def self_signed(directory) -> tuple[str, str]:
    """A certificate for localhost / 127.0.0.1 and its key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    os.chmod(key_path, 0o600)
    return cert_path, key_path


def token_file(directory, mode=0o600) -> str:
    path = os.path.join(directory, "token")
    with open(path, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(path, mode)
    return path


def serve_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", "serve", *args], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), timeout=120)


def test_token_and_tls_on_rest_and_grpc(serving_models, tmp_path):
    _, repo = serving_models
    cert, key = self_signed(str(tmp_path))
    srv = ServerProcess(repo, "--load-model", "tiny", "--auth-token-file", token_file(str(tmp_path)),
                        "--tls-cert", cert, "--tls-key", key, cache_dir=str(tmp_path / "cache"), wait_ready=False)
    try:
        assert srv.scheme == "https"
        trust = ssl.create_default_context(cafile=cert)
        srv.wait_ready(120, verify=trust)  # the health routes need no token (probes)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(verify=trust) as client:
            denied = client.get(srv.url + "/v2/models/tiny")
            assert denied.status_code == 401 and "bearer token" in denied.json()["error"]
            assert client.get(srv.url + "/v2/models/tiny", headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert client.get(srv.url + "/metrics").status_code == 401
            assert client.get(srv.url + "/v2/models/tiny", headers=auth).json()["name"] == "tiny"
            # (the scheme is case-insensitive, RFC 9110 11.1)
            lower = {"Authorization": f"bearer  {TOKEN}"}
            assert client.get(srv.url + "/v2/models/tiny", headers=lower).json()["name"] == "tiny"
        with pytest.raises((httpx.ConnectError, httpx.RemoteProtocolError)):  # TLS only: plain HTTP is not answered
            httpx.get(f"http://127.0.0.1:{srv.http_port}/v2/health/live", timeout=5)

        x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
        http = httpclient.InferenceServerClient(srv.http, ssl=True,
                                                ssl_context_factory=lambda: ssl.create_default_context(cafile=cert))
        t = httpclient.InferInput("data", [1, 3, 16, 16], "FP32")
        t.set_data_from_numpy(x)
        with pytest.raises(InferenceServerException, match="bearer token"):
            http.infer("tiny", [t])
        rest = http.infer("tiny", [t], headers=auth).as_numpy("prob")

        grpc = grpcclient.InferenceServerClient(srv.grpc, ssl=True, root_certificates=cert)
        assert grpc.is_server_live()
        g = grpcclient.InferInput("data", [1, 3, 16, 16], "FP32")
        g.set_data_from_numpy(x)
        with pytest.raises(InferenceServerException) as exc:
            grpc.infer("tiny", [g])
        assert exc.value.status() == "StatusCode.UNAUTHENTICATED"
        np.testing.assert_array_equal(grpc.infer("tiny", [g], headers={"authorization": f"Bearer {TOKEN}"})
                                      .as_numpy("prob"), rest)
    finally:
        assert srv.stop() == 0, srv.log_text()
    assert wait_gone(srv.runtime_dir) == []


def test_a_public_bind_needs_a_token_or_insecure(serving_models, tmp_path):
    _, repo = serving_models
    proc = serve_cli("--model_repository", repo, "--host", "0.0.0.0", "--http-port", "0", "--grpc-port", "0")
    assert proc.returncode == 1, proc.stderr
    assert "[ ERROR ]" in proc.stderr and "--insecure" in proc.stderr and "Traceback" not in proc.stderr
    # a key that is not the certificate's: said at start, before any port is bound
    cert, _ = self_signed(str(tmp_path))
    (tmp_path / "other").mkdir()
    _, other_key = self_signed(str(tmp_path / "other"))
    proc = serve_cli("--model_repository", repo, "--tls-cert", cert, "--tls-key", other_key, "--http-port", "0",
                     "--grpc-port", "0")
    assert proc.returncode == 1 and "cannot be used together" in proc.stderr and "Traceback" not in proc.stderr
    open_token = token_file(str(tmp_path), 0o644)
    proc = serve_cli("--model_repository", repo, "--auth-token-file", open_token, "--http-port", "0",
                     "--grpc-port", "0")
    assert proc.returncode == 1 and "chmod 600" in proc.stderr and "Traceback" not in proc.stderr


def test_metrics_without_the_token_for_a_scrape(tmp_path):
    """--metrics-without-token: a Prometheus scrape (the Kubernetes example's annotations) sends no
    token; /metrics answers it, every other route still asks for one. --grace below 0 is refused."""
    (tmp_path / "repo").mkdir()
    srv = ServerProcess(str(tmp_path / "repo"), "--auth-token-file", token_file(str(tmp_path)),
                        "--metrics-without-token", cache_dir=str(tmp_path / "cache"))
    try:
        assert httpx.get(srv.url + "/metrics").status_code == 200
        assert httpx.get(srv.url + "/v2").status_code == 401
    finally:
        assert srv.stop() == 0, srv.log_text()
    proc = serve_cli("--model_repository", str(tmp_path / "repo"), "--grace", "-1")
    assert proc.returncode == 1 and "--grace must be a number of seconds >= 0" in proc.stderr


def test_kill_9_of_the_server_leaves_no_daemon(serving_models, tmp_path):
    _, repo = serving_models
    srv = ServerProcess(repo, "--load-model", "tiny", cache_dir=str(tmp_path / "cache"))
    daemons = [pid for pid in _children_of_runtime(srv.runtime_dir)]
    assert daemons, "no daemon runs for the server"
    srv.stop(signal.SIGKILL)
    assert wait_gone(srv.runtime_dir) == [], "a daemon outlived its server"


def _children_of_runtime(runtime_dir):
    from .servers import processes_of
    return [pid for pid in processes_of(runtime_dir)
            if b"device_daemons.cpu" in open(f"/proc/{pid}/cmdline", "rb").read()]

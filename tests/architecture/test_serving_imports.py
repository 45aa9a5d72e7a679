"""The serving stack stays optional and outside: core/, ir/, the daemons and their
client, the workers and the CLI's other commands never import it (nor ray); inside
device_daemons/serving only ray_mode.py imports ray; the serving package reaches
the daemons only through their public client (device_daemons.client)."""
import ast
import json
import os
import subprocess
import sys

from tests.support import REPO

SERVING_STACK = ("fastapi", "starlette", "uvicorn", "grpc", "prometheus_client", "orjson", "ray", "kserve",
                 "tritonclient", "httpx")
SERVING = os.path.join(REPO, "device_daemons", "serving")


def _imports(path: str):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, 0
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module or "", node.level


def _python_files(top: str):
    for root, _, files in os.walk(top):
        for f in files:
            if f.endswith(".py") and not f.endswith("_pb2.py"):
                yield os.path.join(root, f)


def test_core_daemons_workers_and_cli_never_import_the_serving_stack():
    offenders = []
    for top in ("core", "ir", "device_daemons", "fallback_workers", "cli"):
        for path in _python_files(os.path.join(REPO, top)):
            if path.startswith(SERVING + os.sep) or path == os.path.join(REPO, "cli", "serve.py"):
                continue
            for line, name, level in _imports(path):
                if level == 0 and (name.split(".")[0] in SERVING_STACK or name.startswith("device_daemons.serving")):
                    offenders.append(f"{path}:{line} {name}")
    assert offenders == []


def test_only_ray_mode_imports_ray_and_serving_uses_only_the_public_client():
    offenders = []
    for path in _python_files(SERVING):
        for line, name, level in _imports(path):
            if level == 0 and name.split(".")[0] == "ray" and os.path.basename(path) != "ray_mode.py":
                offenders.append(f"{path}:{line} imports ray")
            if level == 0 and name.startswith("device_daemons.") and not name.startswith("device_daemons.serving") \
                    and name != "device_daemons.client":
                offenders.append(f"{path}:{line} imports {name} (only device_daemons.client is public)")
            if level == 2:
                offenders.append(f"{path}:{line} imports a daemon module relatively")
    assert offenders == []


def test_the_cli_and_a_daemon_client_load_no_serving_module():
    script = ("import sys, json\n"
              "import cli.main, device_daemons.client, device_daemons.cpu.__main__\n"
              "cli.main.build_parser()\n"
              "print(json.dumps(sorted(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO), timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = [m for m in json.loads(proc.stdout.strip().splitlines()[-1])
              if m.split(".")[0] in SERVING_STACK or m.startswith("device_daemons.serving")]
    assert loaded == []

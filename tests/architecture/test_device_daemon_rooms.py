"""device_daemons/ has a room for each side of the socket: client/ (the client's
process) and service/ (what every daemon runs), the wire both read between them
(contract, shm_protocol, bound_protocol, registry, plan_io), and the devices. The
import statements (at any depth, relative ones resolved) keep them apart."""
import ast
import os

from tests.support import REPO

PACKAGE = "device_daemons"
SHARED = ("contract", "shm_protocol", "bound_protocol", "registry", "plan_io")


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, REPO)[:-3].split(os.sep)
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def _imports(path: str, name: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file (the module `name`,
    default: its place in the tree); `from X import a` counts as X.a (a submodule or
    a name: either tells where it comes from)."""
    name = name or _module_name(path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = []
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found += [(node.lineno, f"{module}.{a.name}") for a in node.names]
    return found


def _modules_under(folder: str):
    for root, _, files in os.walk(os.path.join(REPO, PACKAGE, folder)):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(root, f)


def _offenders(paths, forbidden, allowed=(), name=None) -> list[str]:
    out = []
    for path in paths:
        for line, module in _imports(path, name):
            if any(module == f or module.startswith(f + ".") for f in forbidden) and not any(
                    module == a or module.startswith(a + ".") for a in allowed):
                out.append(f"{os.path.relpath(path, REPO)}:{line} imports {module}")
    return out


def test_the_service_room_imports_no_device_and_no_client():
    forbidden = [f"{PACKAGE}.cpu", f"{PACKAGE}.gpu", f"{PACKAGE}.client"]
    assert _offenders(_modules_under("service"), forbidden) == []


def test_the_client_room_imports_no_daemon_code():
    forbidden = [f"{PACKAGE}.service", f"{PACKAGE}.cpu", f"{PACKAGE}.gpu"]
    assert _offenders(_modules_under("client"), forbidden) == []


def test_the_gpu_daemon_uses_the_cpu_kernels_only_as_reference_semantics():
    # the CPU kernels define what a layer computes (the GPU kernels are checked against
    # them); nothing of the CPU daemon's serving parts (server, plan pool, plan, backends)
    assert _offenders(_modules_under("gpu"), [f"{PACKAGE}.cpu"], [f"{PACKAGE}.cpu.kernels"]) == []


def test_the_wire_modules_import_neither_side():
    paths = [os.path.join(REPO, PACKAGE, name + ".py") for name in SHARED]
    forbidden = [f"{PACKAGE}.{room}" for room in ("client", "service", "cpu", "gpu")]
    assert _offenders(paths, forbidden) == []


def test_the_rule_sees_relative_imports(tmp_path):
    # the checker itself: a relative import from service/ into cpu/, nested in a function
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..cpu.kernels import KernelError\n")
    assert _offenders([str(probe)], [f"{PACKAGE}.cpu"], name=f"{PACKAGE}.service.probe") == [
        f"{os.path.relpath(str(probe), REPO)}:2 imports {PACKAGE}.cpu.kernels.KernelError"]


def test_one_module_decides_how_a_request_travels():
    """client/request_path.py alone chooses between the local carrier and the fallback:
    no other module of the client reads a connection's carrier; the transport's request
    methods are called only there and by the carrier's bound requests (bound_client.py);
    and every inference request of the API goes through request_path.run."""
    allowed = {"carrier": {"transport.py", "request_path.py"},
               "call_here": {"transport.py", "request_path.py", "bound_client.py"},
               "call_raw": {"transport.py", "request_path.py", "bound_client.py"}}
    offenders, runs = [], []
    for path in _modules_under("client"):
        name = os.path.basename(path)
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            if node.attr in ("carrier", "call_here", "call_raw") and name not in allowed[node.attr]:
                offenders.append(f"{os.path.relpath(path, REPO)}:{node.lineno} .{node.attr}")
            if node.attr == "run" and isinstance(node.value, ast.Name) and node.value.id == "request_path":
                runs.append(name)
    assert offenders == []
    assert set(runs) == {"api.py"} and len(runs) == 2  # ExecutableNetwork's synchronous and asynchronous requests

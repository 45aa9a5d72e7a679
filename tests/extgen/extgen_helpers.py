"""Helpers of the extgen tests: fill the FILL IN blocks the way a user would, lint
and import generated files, walk a generated tree."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support import REPO


def write_config(path, config: dict) -> str:
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    return str(path)


def fill(path: str, *code: str, block: int = 0):
    """Replaces the block-th FILL IN block of the file with `code` lines (kept at the block's indentation)."""
    with open(path) as f:
        lines = f.read().split("\n")
    starts = [i for i, line in enumerate(lines) if "FILL IN (extgen):" in line]
    start = starts[block]
    end = next(i for i in range(start, len(lines)) if "END FILL IN" in lines[i])
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    lines[start:end + 1] = [indent + c for c in code]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def tree(root: str) -> dict[str, bytes]:
    """{relative path: bytes} of every file under root."""
    result = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                result[os.path.relpath(path, root)] = f.read()
    return result


def lint(paths) -> list[str]:
    """pyflakes' messages for the files (none means clean)."""
    from pyflakes.api import checkPath
    from pyflakes.reporter import Reporter

    class Collect:
        def __init__(self):
            self.lines = []

        def write(self, text):
            self.lines.append(text)

    out, err = Collect(), Collect()
    for path in paths:
        checkPath(path, Reporter(out, err))
    return [line for line in out.lines + err.lines if line.strip()]


def import_in_subprocess(paths) -> subprocess.CompletedProcess:
    """Imports every file in a fresh interpreter (generated classes register themselves:
    never in the test process)."""
    code = ("import importlib.util, sys\n"
            "for i, path in enumerate(sys.argv[1:]):\n"
            "    spec = importlib.util.spec_from_file_location('generated_%d' % i, path)\n"
            "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n")
    return subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO), timeout=120)


def python_files(root: str) -> list[str]:
    return sorted(os.path.join(root, p) for p in tree(root) if p.endswith(".py"))

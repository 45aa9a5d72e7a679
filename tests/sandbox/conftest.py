"""Fixtures of the sandbox tests: the hostile models (tests/sandbox/hostile_graphs.py,
built once by REAL TensorFlow in a subprocess and cached like tests/tf's builders),
their canary files, a CPU daemon of this session."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.tf import conftest as tf_fixtures
from benchmarks.built_models import built

ie = tf_fixtures.ie  # a CPU daemon of this session (private runtime directory)
HERE = os.path.dirname(os.path.abspath(__file__))
CANARY_TEXT = "canary-{}-never-read".format(os.getpid())


class Hostile:
    """The built directory: models by case name, the canary directory they name."""

    def __init__(self, directory: str):
        self.dir = directory
        with open(os.path.join(directory, "index.json")) as f:
            index = json.load(f)
        self.canary_dir = index["canary_dir"]
        self.models = index["models"]

    def path(self, case: str, key: str = "model") -> str:
        return os.path.join(self.dir, self.models[case][key])

    def meta(self, case: str) -> dict:
        return self.models[case]

    def canary(self, name: str) -> str:
        return os.path.join(self.canary_dir, name)


@pytest.fixture(scope="session")
def hostile() -> Hostile:
    return Hostile(built("hostile_graphs", directory=HERE))


@pytest.fixture
def canaries(hostile):
    """The canary directory with files to be read (holding CANARY_TEXT) and none
    written; afterwards: no file was read (its access time, which this file system
    updates on the first read after a write, is unchanged) and none appeared."""
    os.makedirs(hostile.canary_dir, exist_ok=True)
    readable = {}
    for name in ("read.bin", "vocab.txt", "descriptor.bin"):
        path = hostile.canary(name)
        with open(path, "w") as f:
            f.write(CANARY_TEXT if name != "vocab.txt" else "a,1\nb,1000\nc,1\nd,1\n")
        readable[name] = os.stat(path).st_atime_ns
    yield hostile
    read = [name for name, atime in readable.items() if os.stat(hostile.canary(name)).st_atime_ns != atime]
    assert read == [], "canary files were read: {}".format(read)
    left = sorted(set(os.listdir(hostile.canary_dir)) - set(readable) - {"fifo"})
    assert left == [], "files were written in the canary directory: {}".format(left)
    shutil.rmtree(hostile.canary_dir, ignore_errors=True)


def embedding_ir(directory, graph_path: str, name: str = "hostile") -> str:
    """An IR v2 whose one layer is a TFCustomSubgraphCall holding the graph at graph_path
    (x: [1, 4] -> y:0 [1, 4]), as a hostile client would write it: the converter
    itself refuses such graphs. Returns the .xml path."""
    import base64
    with open(graph_path, "rb") as f:
        graph = base64.b64encode(f.read()).decode()
    dims = "<dim>1</dim><dim>4</dim>"
    xml = os.path.join(str(directory), name + ".xml")
    with open(xml, "w") as f:
        f.write(
            '<?xml version="1.0"?>\n<net name="{name}" version="2" batch="1"><layers>'
            '<layer id="0" name="x" precision="FP32" type="Input"><output><port id="0">{dims}</port></output></layer>'
            '<layer id="1" name="call" precision="FP32" type="TFCustomSubgraphCall"><data protobuf="{graph}" '
            'input_nodes_names="x" output_tensors_names="y:0" real_input_dims="1,4"/>'
            '<input><port id="0">{dims}</port></input><output><port id="1">{dims}</port></output></layer>'
            '</layers><edges><edge from-layer="0" from-port="0" to-layer="1" to-port="0"/></edges></net>\n'.format(
                name=name, dims=dims, graph=graph))
    open(xml[:-4] + ".bin", "wb").close()
    return xml


def plain_reference(x):
    """What the benign 'plain' graph computes: erf(x) * 2 (Python's own erf)."""
    import math

    import numpy as np
    return np.vectorize(math.erf)(x.astype(np.float64)) * 2.0


from tests.daemon.conftest import tiny  # noqa: E402,F401  (the daemon tests' small model)
from tests.gpu.conftest import gpu_device  # noqa: E402,F401  (the OpenCL device: PoCL here)

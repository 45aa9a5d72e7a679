"""Fixtures of the serving tests: a model repository (GoogLeNet as an IR converted
from the pycaffe-made caffemodel; a two-input Caffe net converted on load; a tiny
net loaded later through the repository API; a batching copy of the tiny net) and
one real `mo-core serve` process shared by the session's tests. References: the CPU
daemon called directly (IECore, a private runtime directory) and pycaffe."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from tests.daemon.conftest import F32, TINY_PROTO, private_iecore
from tests.support import convert_api, make_caffemodel, write_text

from .servers import ServerProcess, wait_gone

TWO_INPUT_PROTO = """name: "two_input"
input: "left"
input_shape { dim: 1 dim: 3 dim: 12 dim: 12 }
input: "right"
input_shape { dim: 1 dim: 3 dim: 12 dim: 12 }
layer { name: "conv_l" type: "Convolution" bottom: "left" top: "conv_l"
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 } }
layer { name: "conv_r" type: "Convolution" bottom: "right" top: "conv_r"
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 } }
layer { name: "sum" type: "Eltwise" bottom: "conv_l" bottom: "conv_r" top: "sum" }
layer { name: "relu" type: "ReLU" bottom: "sum" top: "sum" }
layer { name: "fc" type: "InnerProduct" bottom: "sum" top: "fc" inner_product_param { num_output: 7 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""

SAME_PROTO = """name: "same"
input: "data"
input_shape { dim: 1 dim: 1 dim: 2 dim: 3 }
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool"
        pooling_param { pool: MAX kernel_size: 1 stride: 1 } }
"""


def write_ir_of(proto: str, weights: str, directory: str, **options) -> str:
    from ir import write_ir
    os.makedirs(directory, exist_ok=True)
    xml = os.path.join(directory, "model.xml")
    write_ir(convert_api(input_model=weights, input_proto=proto, **options), xml)
    return xml


@pytest.fixture(scope="session")
def serving_models(tmp_path_factory, bvlc_models):
    """{name: (prototxt, caffemodel)} and the repository directory."""
    d = tmp_path_factory.mktemp("serving")
    repo = d / "repo"
    g_proto, g_weights = bvlc_models["bvlc_googlenet"]
    write_ir_of(g_proto, g_weights, str(repo / "googlenet" / "1"), batch=1)
    (repo / "googlenet" / "config.json").write_text(json.dumps({"plugin_config": F32}))
    two = repo / "two_input" / "1"
    two.mkdir(parents=True)
    t_proto = write_text(str(two / "deploy.prototxt"), TWO_INPUT_PROTO)
    make_caffemodel(t_proto, str(two / "two_input.caffemodel"), seed=3, scale=None)
    (repo / "two_input" / "config.json").write_text(json.dumps({"plugin_config": F32}))
    tiny_proto = write_text(str(d / "tiny.prototxt"), TINY_PROTO)
    tiny_weights = str(d / "tiny.caffemodel")
    make_caffemodel(tiny_proto, tiny_weights, seed=5, scale=None)
    write_ir_of(tiny_proto, tiny_weights, str(repo / "tiny" / "1"))
    (repo / "tiny" / "config.json").write_text(json.dumps({"plugin_config": F32}))
    for version in (1, 2):  # the batching net: v2 is the newest (served), v1 stays on disk
        shutil.copytree(repo / "tiny" / "1", repo / "tiny_batched" / str(version))
    (repo / "tiny_batched" / "config.json").write_text(json.dumps({
        "max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 20000},
        "inputs": [{"name": "image", "ir_name": "data", "datatype": "FP32"}], "plugin_config": F32}))
    typed = repo / "tiny_u8"  # an image input as UINT8, the output as FP16: converted around the daemon's FP32
    shutil.copytree(repo / "tiny" / "1", typed / "1")
    (typed / "config.json").write_text(json.dumps({
        "inputs": [{"name": "image", "ir_name": "data", "datatype": "UINT8"}],
        "outputs": [{"name": "scores", "ir_name": "prob", "datatype": "FP16"}], "plugin_config": F32}))
    broken = repo / "broken"  # a config.json with a key no config has: fails to load, alone
    shutil.copytree(repo / "tiny" / "1", broken / "1")
    (broken / "config.json").write_text(json.dumps({"max_batch_size": 4, "dynamic_batchin": {}}))
    damaged = repo / "damaged" / "1"  # an IR that is not XML at all: fails to load, alone
    damaged.mkdir(parents=True)
    (damaged / "model.xml").write_text("garbage")
    (damaged / "model.bin").write_bytes(b"\0" * 16)
    shutil.copytree(repo / "tiny" / "1", repo / "tiny_all" / "1")  # two versions served at once
    shutil.copytree(repo / "tiny" / "1", repo / "tiny_all" / "2")
    (repo / "tiny_all" / "config.json").write_text(json.dumps({"versions": "all", "plugin_config": F32}))
    # a pass-through net (a 1x1 max pool): an INT32 input and a UINT8 output, converted around the FP32 daemon
    same_proto = write_text(str(d / "same.prototxt"), SAME_PROTO)
    same_weights = str(d / "same.caffemodel")
    make_caffemodel(same_proto, same_weights)
    write_ir_of(same_proto, same_weights, str(repo / "same_int" / "1"))
    (repo / "same_int" / "config.json").write_text(json.dumps({
        "inputs": [{"name": "x", "ir_name": "data", "datatype": "INT32"}],
        "outputs": [{"name": "y", "ir_name": "pool", "datatype": "UINT8"}], "plugin_config": F32}))
    models = {"googlenet": (g_proto, g_weights), "two_input": (t_proto, str(two / "two_input.caffemodel")),
              "tiny": (tiny_proto, tiny_weights)}
    return models, str(repo)


@pytest.fixture(scope="session")
def direct_ie():
    """IECore on CPU daemons of a private runtime directory: the reference."""
    with private_iecore("srv-") as ie:
        yield ie


@pytest.fixture(scope="session")
def server(serving_models, tmp_path_factory):
    """`mo-core serve` with googlenet, two_input and tiny_batched loaded at start
    (tiny is in the repository but loaded by the tests), a 4 MiB body limit."""
    _, repo = serving_models
    cache = str(tmp_path_factory.mktemp("cache"))
    srv = ServerProcess(repo, "--load-model", "googlenet", "--load-model", "two_input",
                        "--load-model", "tiny_batched", "--load-model", "tiny_u8", "--max-body-mb", "4",
                        cache_dir=cache)
    yield srv
    code = srv.stop()
    assert code == 0, srv.log_text()
    assert wait_gone(srv.runtime_dir) == [], "the server left processes behind"


def reference(ie, xml: str, inputs: dict) -> dict:
    exec_net = ie.load_network(ie.read_network(model=xml), "CPU")
    try:
        return {k: np.array(v) for k, v in exec_net.infer(inputs).items()}
    finally:
        exec_net.close()

"""HETERO's affinity and sub-networks (device_daemons/client/hetero), run in-process on
the GPU plan (real OpenCL) and the CPU plan: the parts together equal the CPU plan
on the whole network."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.cpu_helpers import rel_err
from tests.gpu.gpu_helpers import chain_ir, rand

CONV = {"kernel": "3,3", "strides": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "output": 4, "group": 1}


def supported(network):
    from device_daemons.cpu.kernels import KERNELS
    from device_daemons.gpu.query import query_network
    return {"GPU": set(query_network(network)),
            "CPU": {layer.name for layer in network.layers if layer.type == "Input" or layer.type in KERNELS}}


def run_hetero(network, gpu_device, x, overrides=None, devices=("GPU", "CPU")):
    from device_daemons.cpu import ExecutionPlan
    from device_daemons.gpu import GpuPlan
    from device_daemons.client.hetero import assign_affinity, run_split, split_network
    affinity = assign_affinity(network, list(devices), supported(network), overrides)
    split = split_network(network, affinity)

    def run_part(i, part, feed):
        plan = GpuPlan(part.network, gpu_device, extra_outputs=part.outputs) if part.device == "GPU" else \
            ExecutionPlan(part.network, extra_outputs=part.outputs)
        return plan.infer(feed)
    ours = run_split(split, {"data": x}, run_part)
    ref = ExecutionPlan(network).infer({"data": x})
    assert sorted(ours) == sorted(ref)
    for key in ref:
        assert rel_err(ours[key], ref[key]) <= 1e-5, key
    return split, affinity


def chain(tmp_path, rng, shape=(2, 4, 6, 5)):
    layers = [("c1", "Convolution", CONV, {"weights": rand(rng, 4, 4, 3, 3)}, shape),
              ("r1", "ReLU", {}, None, shape),
              ("mvn", "MVN", {"eps": 1e-9}, None, shape),
              ("c2", "Convolution", CONV, {"weights": rand(rng, 4, 4, 3, 3), "biases": rand(rng, 4)}, shape),
              ("sm", "SoftMax", {"axis": 1}, None, shape)]
    return chain_ir(tmp_path, shape, layers)


def test_a_layer_the_gpu_lacks_runs_on_the_cpu(tmp_path, gpu_device):
    rng = np.random.default_rng(0)
    network = chain(tmp_path, rng)
    split, affinity = run_hetero(network, gpu_device, rand(rng, 2, 4, 6, 5))
    assert affinity == {"data": "GPU", "c1": "GPU", "r1": "GPU", "mvn": "CPU", "c2": "GPU", "sm": "GPU"}
    assert [(p.device, p.layers) for p in split.parts] == [("GPU", ["c1", "r1"]), ("CPU", ["mvn"]),
                                                           ("GPU", ["c2", "sm"])]
    assert split.parts[1].inputs == {"r1": ("part", 0, "r1")} and split.parts[0].outputs == ["r1"]
    assert split.describe()[1] == "part 2: CPU, 1 layer(s): mvn"


def test_declared_results_inside_a_part_and_across(tmp_path, gpu_device):
    """<results> on r1 (read by the CPU part) and c2 (read by sm in the same GPU part): both
    returned, equal to the CPU plan, which returns them too."""
    rng = np.random.default_rng(5)
    network = chain(tmp_path, rng)
    network.results = [(2, 1), (4, 1)]
    split, _ = run_hetero(network, gpu_device, rand(rng, 2, 4, 6, 5))
    assert sorted(split.results) == ["c2", "r1", "sm"]


def test_priority_order_and_overrides(tmp_path, gpu_device):
    rng = np.random.default_rng(1)
    network = chain(tmp_path, rng)
    x = rand(rng, 2, 4, 6, 5)
    split, _ = run_hetero(network, gpu_device, x, devices=("CPU", "GPU"))
    assert [p.device for p in split.parts] == ["CPU"]
    split, _ = run_hetero(network, gpu_device, x, overrides={"c2": "cpu"})
    assert [(p.device, p.layers) for p in split.parts] == [("GPU", ["c1", "r1"]), ("CPU", ["mvn", "c2"]),
                                                           ("GPU", ["sm"])]


def test_affinity_errors(tmp_path):
    from device_daemons.client.hetero import HeteroError, assign_affinity, parse_hetero
    network = chain(tmp_path, np.random.default_rng(2))
    sup = supported(network)
    with pytest.raises(HeteroError, match="'mvn' .*affinity GPU, but the GPU plugin does not support it"):
        assign_affinity(network, ["GPU", "CPU"], sup, {"mvn": "GPU"})
    with pytest.raises(HeteroError, match="'nope', which the network does not have"):
        assign_affinity(network, ["GPU", "CPU"], sup, {"nope": "GPU"})
    with pytest.raises(HeteroError, match="not one of the HETERO devices"):
        assign_affinity(network, ["GPU", "CPU"], sup, {"c1": "MYRIAD"})
    with pytest.raises(HeteroError, match=r"no device of HETERO:GPU supports the layer\(s\) 'mvn' \(MVN\)"):
        assign_affinity(network, ["GPU"], sup)
    assert parse_hetero("HETERO:GPU,CPU") == ["GPU", "CPU"]
    for bad in ("HETERO", "HETERO:", "GPU,CPU", "HETERO:GPU,GPU"):
        with pytest.raises(HeteroError):
            parse_hetero(bad)


def test_branches_share_the_network_input_and_cross_twice(tmp_path, gpu_device):
    """data feeds a GPU branch and a CPU branch (MVN); both meet in a GPU Concat;
    a second network output is computed on the CPU."""
    from tests.gpu.gpu_helpers import branch_ir
    rng = np.random.default_rng(3)
    s = (1, 3, 5, 4)
    network = branch_ir(tmp_path, s, ("MVN", {"eps": "1e-9"}), ("mvn2", "MVN", {"eps": "1e-9"}, 1, [s]))
    split, _ = run_hetero(network, gpu_device, rand(rng, *s))
    devices = [p.device for p in split.parts]
    assert devices == ["GPU", "CPU", "GPU"] and sorted(split.results) == ["cat", "mvn2"]
    assert split.parts[1].inputs["data"] == ("input", "data")

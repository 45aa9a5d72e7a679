"""Inference precision of the CPU plugin (device_daemons/cpu/precision.py): the
default is OpenVINO's (bf16 exactly where the CPU has AVX512_BF16 or AMX), bf16
runs the layers oneDNN has in bf16 and the rest in f32 (each step says which),
weights are converted once, inputs and outputs stay float32, and bf16's error on
the reference-catalog nets is within the issue's bound and next to OpenVINO's own
bf16 error on the same IR (the OpenVINO runtime, f32 against its bf16)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from device_daemons.cpu import ExecutionPlan
from device_daemons.cpu.onednn import op as onednn_op
from device_daemons.cpu.precision import CPUS, default_precision, native_bf16, resolve_precision, resolve_threads
from ir import IRError, read_ir, write_ir
from tests.cpu.cpu_helpers import assert_close, caffe_case, rel_err
from tests.cpu.test_cpu_onednn import MIXED
from tests.support import REPO, convert_api


def cpu_flags() -> set:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def test_the_default_is_openvinos():
    """bf16 where the CPU has AVX512_BF16 or AMX, f32 elsewhere: what OpenVINO's CPU plugin reports."""
    import openvino as ov
    flags = cpu_flags()
    expected = "bf16" if {"avx512_bf16", "amx_bf16"} & flags else "f32"
    assert default_precision() == expected and native_bf16() == (expected == "bf16")
    ov_default = ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
    assert getattr(ov_default, "get_type_name", lambda: str(ov_default))() == expected


def test_the_default_follows_the_isa_onednn_may_use():
    """ONEDNN_MAX_CPU_ISA below AVX512_BF16 (as on a CPU without it): f32."""
    code = "from device_daemons.cpu.precision import default_precision; print(default_precision())"
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX512_CORE", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "f32"


def test_hints_and_threads_are_checked():
    assert resolve_precision("BF16") == "bf16" and resolve_precision("fp32") == "f32"
    assert resolve_precision(None) == default_precision()
    with pytest.raises(IRError, match="INFERENCE_PRECISION_HINT must be one of f32, bf16"):
        resolve_precision("f16")
    assert resolve_threads(None) == resolve_threads(0) == CPUS == len(os.sched_getaffinity(0))
    assert resolve_threads(1) == 1 and resolve_threads(CPUS + 7) == CPUS
    with pytest.raises(IRError, match="INFERENCE_NUM_THREADS"):
        resolve_threads(-1)


def test_bf16_runs_what_onednn_has_in_bf16_and_the_rest_in_f32(tmp_path):
    c = caffe_case(tmp_path, MIXED, {"data": (2, 3, 17, 15)}, scale=0.3)
    f32 = ExecutionPlan(c.network, backend="onednn")
    bf16 = ExecutionPlan(c.network, backend="onednn", precision="bf16")
    assert f32.precision_used == "f32" and bf16.precision_used == "bf16"
    ours, ref = f32.infer(c.inputs), bf16.infer(c.inputs)
    assert ref["prob"].dtype == np.float32 and ref["prob"].shape == ours["prob"].shape
    assert rel_err(ref["prob"], ours["prob"]) <= 2e-2
    assert np.array_equal(np.argmax(ref["prob"], 1), np.argmax(ours["prob"], 1))
    steps = {layer.name: step for step in bf16.program.steps for layer in step.layers}
    assert {steps[n].precision for n in ("c1", "c2", "pool", "fc")} == {"bf16"}
    # PReLU and Normalize across_spatial have no oneDNN op: f32 on numpy, with the conversions around them
    assert steps["p1"].backend == steps["l2"].backend == "numpy"
    assert steps["p1"].precision == steps["l2"].precision == "f32"
    conversions = [s for s in bf16.program.steps if s.type == "Reorder" and ">" in s.precision]
    assert conversions and all(s.note for s in conversions)
    perf = []
    bf16.infer(c.inputs, perf)
    assert {r.precision for r in perf if r.name in ("c1", "r1", "fc")} == {"bf16"}  # r1: fused into c1


def test_weights_are_converted_once_per_network(tmp_path):
    c = caffe_case(tmp_path, MIXED, {"data": (1, 3, 17, 15)}, scale=0.3)
    first = ExecutionPlan(c.network, backend="onednn", precision="bf16")
    constants = onednn_op._CONSTANTS[id(c.network)]
    count = sum(len(entries) for entries in constants.values())
    types = {desc.dt for entries in constants.values() for desc, _ in entries}
    assert "bf16" in types  # the convolutions' and the inner product's weights
    second = ExecutionPlan(c.network, backend="onednn", precision="bf16")
    assert sum(len(entries) for entries in constants.values()) == count
    assert_close(second.infer(c.inputs)["prob"], first.infer(c.inputs)["prob"], 0)


@pytest.fixture(scope="module")
def openvino_core():
    import openvino as ov
    return ov.Core()


@pytest.mark.parametrize("model", ["bvlc_googlenet", "bvlc_reference_caffenet", "conv_bn_scale"])
def test_bf16_accuracy_on_reference_nets(bvlc_models, small_nets, tmp_path, openvino_core, model):
    """The issue's bound: top-1 unchanged and max |diff| / max |f32| <= 2e-2 against our
    f32, the largest over 4 inputs, unless OpenVINO's bf16 misses it too; and no worse than
    OpenVINO's bf16 against its own f32 on the same IR (v11) and inputs, beyond rounding
    (1.5x). CaffeNet's error over 9 inputs reached 0.029 (OpenVINO's 0.023) with oneDNN's AMX
    kernels and 0.030 (0.029) with AVX512_BF16's (ONEDNN_MAX_CPU_ISA lowers both engines): which
    input gives the largest is the luck of where the roundings fall."""
    from ir.v11 import build_model, write_model
    proto, weights = (bvlc_models if model.startswith("bvlc") else small_nets)[model]
    xml, v11 = str(tmp_path / "net.xml"), str(tmp_path / "net_v11.xml")
    converted = convert_api(input_model=weights, input_proto=proto)
    write_ir(converted, xml)
    write_model(build_model(converted)[0], v11)
    network = read_ir(xml)
    f32, bf16 = ExecutionPlan(network, precision="f32"), ExecutionPlan(network, precision="bf16")
    ov_model = openvino_core.read_model(v11)
    ov = {p: openvino_core.compile_model(ov_model, "CPU", {"INFERENCE_PRECISION_HINT": p}).create_infer_request()
          for p in ("f32", "bf16")}
    errors, ov_errors = [], []
    for seed in (11, 0, 1, 2):
        rng = np.random.default_rng(seed)
        inputs = {layer.name: rng.standard_normal(layer.outputs[0].dims).astype(np.float32)
                  for layer in network.inputs()}
        ours = f32.infer(inputs), bf16.infer(inputs)
        feed = [inputs[port.any_name] for port in ov_model.inputs]
        theirs = [[np.asarray(v) for v in ov[p].infer(feed).values()] for p in ("f32", "bf16")]
        ov_errors.append(max(rel_err(b, a) for a, b in zip(*theirs)))
        for name, value in ours[0].items():
            errors.append(rel_err(ours[1][name], value))
            flat = value.reshape(value.shape[0], -1), ours[1][name].reshape(value.shape[0], -1)
            assert np.array_equal(np.argmax(flat[0], 1), np.argmax(flat[1], 1)), f"{model} {name}: top-1 changed"
    err, ov_err = max(errors), max(ov_errors)
    assert err <= 2e-2 or ov_err > 2e-2, f"{model}: bf16 error {err:.3g} (OpenVINO's {ov_err:.3g})"
    assert err <= 1.5 * ov_err + 1e-3, f"{model}: bf16 error {err:.3g}, OpenVINO's {ov_err:.3g}"


def test_threads_follow_the_affinity_mask():
    """A process allowed on one CPU (taskset, a container) runs one thread, whatever os.cpu_count() says."""
    code = ("import os; from device_daemons.cpu.precision import CPUS, resolve_threads; "
            "from device_daemons.cpu.onednn.library import load; "
            "print(CPUS, resolve_threads(None), load().default_threads, os.cpu_count())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO), preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    assert proc.returncode == 0, proc.stderr
    cpus, threads, omp, count = map(int, proc.stdout.split())
    assert cpus == threads == omp == 1 and count == os.cpu_count()


def test_the_daemon_takes_and_reports_precision_and_threads(tmp_path):
    from device_daemons.client import IECore, InferenceError
    from core.errors import Error
    from tests.daemon.conftest import private_runtime
    c = caffe_case(tmp_path, MIXED, {"data": (1, 3, 17, 15)}, scale=0.3)
    xml = str(tmp_path / "mixed.xml")
    write_ir(c.network, xml)
    with private_runtime("pc-"):
        with IECore(policy="auto") as ie:
            net = ie.read_network(xml)
            default = ie.load_network(net, "CPU")
            assert default.get_config("INFERENCE_PRECISION_HINT") == default_precision()
            assert default.get_config("INFERENCE_NUM_THREADS") == CPUS
            assert 1 <= default.get_metric("OPTIMAL_NUMBER_OF_INFER_REQUESTS") <= CPUS
            one = ie.load_network(net, "CPU", config={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1})
            assert one.config == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1,
                                  "OPTIMAL_NUMBER_OF_INFER_REQUESTS": 1}
            ref = ExecutionPlan(c.network, backend="numpy").infer(c.inputs)
            assert_close(one.infer(c.inputs)["prob"], ref["prob"], 1e-4, "f32 through the daemon")
            with pytest.raises(InferenceError, match="INFERENCE_PRECISION_HINT must be one of f32, bf16") as err:
                ie.load_network(net, "CPU", config={"INFERENCE_PRECISION_HINT": "fp8"})
            assert err.value.kind == "network"
            with pytest.raises(Error, match="unknown config key 'CPU_THREADS_NUM'"):
                ie.load_network(net, "CPU", config={"CPU_THREADS_NUM": 1})
        cli = subprocess.run([sys.executable, "-m", "cli", "benchmark", "-m", xml, "-niter", "3", "-nireq", "1",
                              "-infer_precision", "f32", "-nthreads", "1", "-pc"], capture_output=True, text=True,
                             cwd=REPO, timeout=300)
        assert cli.returncode == 0, cli.stderr
        assert cli.stdout.count("inference precision f32, threads 1, optimal requests 1") == 2  # at load, in the report
        assert "Why (reorders, layers not on the fast backend):" in cli.stdout

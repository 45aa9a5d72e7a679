"""onednn/sequence.py: consecutive oneDNN steps run by one C call (native/sequence.c)
give exactly what running them one by one gives, and pycaffe's result; a layer on
numpy or our C kernels splits the runs; without a C compiler the steps run one by one."""
from __future__ import annotations

import numpy as np

from device_daemons.cpu.onednn import sequence
from device_daemons.cpu.onednn.library import NativeUnavailable
from tests.cpu.cpu_helpers import caffe_case

LAYERS = """
layer { name: "c1" type: "Convolution" bottom: "data" top: "c1"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
layer { name: "r1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "p1" type: "Pooling" bottom: "c1" top: "p1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "c2" type: "Convolution" bottom: "p1" top: "c2" convolution_param { num_output: 8 kernel_size: 1 } }
layer { name: "n" type: "Normalize" bottom: "c2" top: "n" norm_param { across_spatial: false channel_shared: false } }
layer { name: "c3" type: "Convolution" bottom: "n" top: "c3" convolution_param { num_output: 8 kernel_size: 3 } }
layer { name: "r3" type: "ReLU" bottom: "c3" top: "c3" }
layer { name: "fc" type: "InnerProduct" bottom: "c3" top: "fc" inner_product_param { num_output: 10 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""


def test_runs_of_onednn_steps_are_one_call_with_the_same_result(tmp_path):
    c = caffe_case(tmp_path, LAYERS, {"data": (1, 3, 12, 12)}, positive=("n",))
    program = c.plan.program
    runs = [item for item in program.schedule if isinstance(item, sequence.PrimitiveSequence)]
    # (a step whose run is Python splits them - the Normalize's C kernel, called with the tensors'
    # buffers: c1 p1 c2 | n | c3 fc)
    assert len(runs) == 2 and len(program.schedule) < len(program.steps), [type(s).__name__ for s in program.schedule]
    grouped = [s for run in runs for s in run.steps]
    assert all(s.backend == "onednn" for s in grouped)
    # every step runs once, in order: the schedule is the steps with runs folded in
    flat = [s for item in program.schedule for s in getattr(item, "steps", [item])]
    assert flat == program.steps
    ours, ref = c.run()
    program.schedule = program.steps
    one_by_one, _ = c.run()
    assert np.array_equal(ours["prob"], one_by_one["prob"])
    np.testing.assert_allclose(ours["prob"], ref["prob"], rtol=1e-4, atol=1e-6)
    perf = []  # counters time every step on its own
    c.plan.infer(c.inputs, perf=perf)
    assert {r.name for r in perf} >= {s.name for s in grouped}


def test_without_the_c_loop_the_steps_run_one_by_one(monkeypatch):
    def unavailable():
        raise NativeUnavailable("no C compiler")
    monkeypatch.setattr(sequence.native, "load", unavailable)
    steps = [object(), object()]
    assert sequence.schedule(None, None, steps, (object,)) == steps

"""Inputs read and outputs written where they are: a oneDNN layer that takes the
network input's plain layout reads the caller's array (no reorder, not kept after
the run); `infer(out=...)` puts outputs into the given arrays (the daemon passes
views of the client's shared-memory slot), written there by oneDNN's last reorder
or copied there after a numpy layer; the daemon's output_views and place_outputs
agree on where each output goes, and place_outputs copies nothing when the plan wrote
every output into its view."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

from device_daemons.cpu.plan import ExecutionPlan
from device_daemons.service.shm_slots import _Slot, output_views, place_outputs
from ir import Edge, Layer, Network, Port


def relu_net(dims=(1, 3, 8, 8)):
    return Network(name="relu", layers=[Layer(0, "data", "Input", outputs=[Port(0, dims)]),
                                        Layer(1, "relu", "ReLU", inputs=[Port(0, dims)], outputs=[Port(1, dims)]),
                                        Layer(2, "sig", "Activation", data={"type": "sigmoid"}, inputs=[Port(0, dims)],
                                              outputs=[Port(1, dims)])],
                   edges=[Edge(0, 0, 1, 0), Edge(0, 0, 2, 0)])


@pytest.mark.parametrize("backend", ["onednn", "numpy"])
def test_outputs_go_into_the_given_arrays(backend):
    plan = ExecutionPlan(relu_net(), backend=backend)
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    kept = x.copy()
    dest = {"relu": np.full((1, 3, 8, 8), 7, np.float32), "sig": np.full((1, 3, 8, 8), 7, np.float32)}
    got = plan.infer({"data": x}, out=dest)
    assert got["relu"] is dest["relu"] and got["sig"] is dest["sig"]
    np.testing.assert_array_equal(dest["relu"], np.maximum(x, 0))
    np.testing.assert_allclose(dest["sig"], 1 / (1 + np.exp(-x)), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(x, kept)  # the input is read, never written
    # without out=, new arrays (the given ones are not written again)
    again = plan.infer({"data": -x})
    assert again["relu"] is not dest["relu"]
    np.testing.assert_array_equal(dest["relu"], np.maximum(x, 0))
    # a destination of the wrong shape is not used: the output comes back as usual
    odd = {"relu": np.zeros((2, 3, 8, 8), np.float32)}
    got = plan.infer({"data": x}, out=odd)
    assert got["relu"].shape == (1, 3, 8, 8) and not odd["relu"].any()


def test_onednn_reads_the_callers_input_without_keeping_it():
    plan = ExecutionPlan(relu_net(), backend="onednn")
    assert [slot for slot, _ in plan.program.bound] == [plan._input_slots["data"]]
    assert not any(step.name.startswith("data") for step in plan.program.steps)  # no reorder of the input
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(plan.infer({"data": x})["relu"], np.maximum(x, 0))
    assert all(memory.buffer is None for _, memory in plan.program.bound)
    # a non-contiguous input is read through a contiguous copy
    wide = np.random.default_rng(2).standard_normal((1, 3, 8, 16)).astype(np.float32)
    np.testing.assert_array_equal(plan.infer({"data": wide[..., ::2]})["relu"], np.maximum(wide[..., ::2], 0))


def test_place_outputs_copies_only_what_is_not_in_the_slot_yet():
    size = 1 << 16
    slot = _Slot(-1, mmap.mmap(-1, size), size)
    shapes = {"a": (1, 5), "b": (2, 3, 3)}
    views = output_views(slot, (100, size - 100), shapes)
    a = np.arange(5, dtype=np.float32).reshape(1, 5)
    views["b"][...] = 3.0  # written in place by the plan
    placed = place_outputs(slot, (100, size - 100), {"a": a, "b": views["b"]})
    assert placed == {"a": [views["a"].__array_interface__["data"][0] - _base(slot), [1, 5]],
                      "b": [views["b"].__array_interface__["data"][0] - _base(slot), [2, 3, 3]]}
    for name, (off, shape) in placed.items():
        assert off % 64 == 0 and off >= 100
    np.testing.assert_array_equal(views["a"], a)
    np.testing.assert_array_equal(views["b"], 3.0)
    assert output_views(slot, (100, 64), shapes) is None  # they do not fit
    assert place_outputs(slot, (100, 64), {"a": a, "b": views["b"]}) is None


def _base(slot):
    return np.ndarray((slot.size,), np.uint8, buffer=slot.mm).__array_interface__["data"][0]

"""Inputs read and outputs written where they are: a oneDNN layer that takes the
network input's plain layout reads the caller's array (no reorder, not kept after
the run); `infer(out=...)` puts outputs into the given arrays (the daemon passes
views of the client's shared-memory slot), written there by oneDNN's last reorder
or copied there after a numpy layer; the daemon's output_layout places the outputs
of a binding in its slot, each aligned, and says when they do not fit."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

from device_daemons.cpu.plan import ExecutionPlan
from device_daemons.service.shm_slots import _Slot, output_layout
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


def test_output_layout_places_each_output_aligned_in_the_slot():
    size = 1 << 16
    slot = _Slot(-1, mmap.mmap(-1, size), size)
    shapes = {"a": (1, 5), "b": (2, 3, 3)}
    views, placed = output_layout(slot, (100, size - 100), shapes)
    assert list(placed) == ["a", "b"] and placed["a"] == [128, [1, 5]] and placed["b"] == [192, [2, 3, 3]]
    for name, (off, shape) in placed.items():  # the views are where the placed spec says
        assert views[name].__array_interface__["data"][0] - _base(slot) == off and views[name].shape == tuple(shape)
    plan = ExecutionPlan(relu_net((1, 5)))
    x = np.arange(5, dtype=np.float32).reshape(1, 5) - 2
    out_views, _ = output_layout(slot, (100, size - 100), {"relu": (1, 5), "sig": (1, 5)})
    got = plan.infer({"data": x}, out=out_views)
    assert got["relu"] is out_views["relu"]  # written into the slot
    np.testing.assert_array_equal(np.ndarray((1, 5), np.float32, buffer=slot.mm, offset=128), np.maximum(x, 0))
    assert output_layout(slot, (100, 64), shapes) is None  # they do not fit


def _base(slot):
    return np.ndarray((slot.size,), np.uint8, buffer=slot.mm).__array_interface__["data"][0]

"""While loops of a fixed trip count unrolled before the graph is built (core/front/tf/loops/): Keras'
LSTM / GRU / SimpleRNN and Bidirectional, tf.scan, counted, capped and nested tf.while_loop (tests/tf/graphs.py;
equal to TensorFlow in test_tf_ops.py, as IR v11 on OpenVINO there too, and on the GPU plan in
tests/gpu/test_gpu_tf_graphs.py). Here: what the IR holds, and a loop past the limits left whole with the reason
(the TF1 TensorArray form and a Keras SavedModel: tests/tf/test_tf_worker.py; loops whose condition reads the data:
tests/tf_worker/test_offload.py)."""
import logging
import re

import pytest

from core.errors import Error
from core.front.tf.loops import unroll as unroll_loops
from tests.support import convert_api


def _steps(network, loop: str) -> set:
    return {int(m.group(1)) for layer in network.layers if loop in layer.name
            and (m := re.search(r"/unrolled_(\d+)", layer.name))}


def test_recurrent_layers_become_their_steps(tf_graphs):
    network = convert_api(input_model=tf_graphs.path("keras_recurrent"), batch=1)
    types = [layer.type for layer in network.layers]
    assert "TFCustomSubgraphCall" not in types and "Loop" not in types
    loops = ("lstm_1/", "gru_1/", "simple_rnn_1/", "forward_lstm", "backward_lstm", "gru_1_2/")
    for loop in loops:
        assert _steps(network, loop) == set(range(7)), loop  # 7 time steps, one copy of the cell each
    # the recurrent products are FullyConnected layers per step; the input products one of all steps
    # (core/middle/recurrent.py), each step's rows a Crop of it
    products = [layer for layer in network.layers if layer.type == "FullyConnected"]
    hoisted = [layer for layer in products if layer.name.endswith("/all_steps")]
    assert sorted(loop for loop in loops for layer in hoisted if loop in layer.name) == sorted(loops), hoisted
    assert all(tuple(layer.outputs[0].dims)[0] == 7 for layer in hoisted)
    assert not [layer.name for layer in products if re.search(r"cell_1/MatMul/unrolled_", layer.name)]
    assert len(products) - len(hoisted) >= 6 * 6  # (step 0's recurrent product reads the zero state: folded)
    # the LSTMs' per-step bias went into the input product (gru's reset_after bias stays per product)
    assert not [layer for layer in network.layers if layer.type == "ScaleShift" and "lstm_cell_1/BiasAdd" in layer.name
                and "unrolled_3" in layer.name]
    plain = convert_api(input_model=tf_graphs.path("keras_recurrent"), batch=1, disable_fusing=True)
    assert not [layer for layer in plain.layers if layer.name.endswith("/all_steps")]


def test_a_product_of_the_step_and_the_state_side_by_side_is_split(tf_graphs):
    """TF1's cells multiply Concat([x_t, h]) by one kernel: the product becomes one of x_t (hoisted with the others,
    the biases in it) plus one of h per step (the columns of the kernel split; equal to TensorFlow in test_tf_ops)."""
    network = convert_api(input_model=tf_graphs.path("concat_cells"), batch=2)
    products = [layer for layer in network.layers if layer.type == "FullyConnected"]
    hoisted = [layer for layer in products if layer.name.endswith("/all_steps")]
    assert len(hoisted) == 2 and all(tuple(layer.outputs[0].dims) == (6 * 2, 5 * k) for layer, k in
                                     zip(sorted(hoisted, key=lambda layer: layer.outputs[0].dims[1]), (1, 4)))
    assert all("biases" in layer.blobs for layer in hoisted), [layer.blobs for layer in hoisted]
    assert "Concat" not in [network.layer_by_id(e.from_layer).type for layer in products for e in network.edges
                            if e.to_layer == layer.id]


def test_nested_loops_unroll_inside_out(tf_graphs):
    network = convert_api(input_model=tf_graphs.path("counted_loops"), batch=1)
    inner = [layer.name for layer in network.layers if re.search(r"while/Sin/unrolled_\d+/unrolled_\d+$", layer.name)]
    assert len(inner) == 2 * 3, inner  # the inner loop's 2 steps in each of the outer loop's 3
    assert _steps(network, "scan/") == set(range(6))


@pytest.mark.parametrize("limit, value, why", [("MAX_ITERATIONS", 5, "it runs more than 5 iterations"),
                                               ("MAX_NODES", 40, "its copies would pass 40 nodes")])
def test_a_loop_past_the_limits_is_left_whole(tf_graphs, monkeypatch, caplog, limit, value, why):
    monkeypatch.setattr(unroll_loops, limit, value)
    with caplog.at_level(logging.WARNING, logger="mo_core"):
        with pytest.raises(Error, match="LoopCond"):  # (no offload option: the report lists the loop's nodes)
            convert_api(input_model=tf_graphs.path("keras_recurrent"), batch=1)
    assert why in caplog.text, caplog.text


def test_an_offload_pattern_keeps_its_loop_whole(tf_graphs, caplog):
    with caplog.at_level(logging.INFO, logger="mo_core"):
        network = convert_api(input_model=tf_graphs.path("counted_loops"), batch=1,
                              tensorflow_subgraph_patterns="scan/.*")
    calls = [layer for layer in network.layers if layer.type == "TFCustomSubgraphCall"]
    assert len(calls) == 1 and not _steps(network, "scan/"), [layer.name for layer in calls]
    assert "kept whole: the offload patterns name its node" in caplog.text
    assert _steps(network, "while_1/") == set(range(4))  # (the others unrolled: maximum_iterations=4)


def test_conversion_time_values_stay_small():
    """A model's constants decide what the unroller computes: a range it sizes is not made (an untrusted graph
    asking for 10^9 counters), nor one of step 0."""
    import numpy as np
    from core.front.tf.loops.values import fold
    assert fold("Range", None, [np.array(0), np.array(5), np.array(1)]).tolist() == [0, 1, 2, 3, 4]
    assert fold("Range", None, [np.array(0), np.array(10 ** 9), np.array(1)]) is None
    assert fold("Range", None, [np.array(0), np.array(5), np.array(0)]) is None

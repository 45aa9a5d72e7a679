"""The allow-list's check (core/services/tf_ops.py) is bounded on hostile function
libraries: each function body is walked once, so a library whose functions call the
next one many times, with a refused op at the bottom, is refused at once (walked again
per caller, it took fan-out^depth steps). Built on our own schema's GraphDef (no
TensorFlow needed to check a graph); the real graphs: test_allow_list.py."""
from __future__ import annotations

import time

import pytest

from core.front.tf.proto import mo_tensorflow_pb2 as pb
from core.services.tf_ops import MAX_FUNCTION_DEPTH, describe, refused

pytestmark = pytest.mark.timeout(60)


def fanned_library(depth: int, fan_out: int, bottom_op: str) -> pb.GraphDef:
    """f0 .. f<depth>: each of the first calls the next one `fan_out` times; the last
    holds one `bottom_op`; the graph calls f0."""
    graph = pb.GraphDef()
    for level in range(depth + 1):
        fn = graph.library.function.add()
        fn.signature.name = f"f{level}"
        if level == depth:
            node = fn.node_def.add()
            node.name, node.op = "bottom", bottom_op
            continue
        for i in range(fan_out):
            node = fn.node_def.add()
            node.name, node.op = f"call{i}", "PartitionedCall"
            node.attr["f"].func.name = f"f{level + 1}"
    node = graph.node.add()
    node.name, node.op = "top", "StatefulPartitionedCall"
    node.attr["f"].func.name = "f0"
    return graph


def test_a_fanned_out_library_with_a_refused_op_is_refused_at_once():
    graph = fanned_library(MAX_FUNCTION_DEPTH - 2, 20, "ReadFile")
    start = time.perf_counter()
    found = refused(graph)
    assert time.perf_counter() - start < 5
    assert found and "op 'ReadFile' (node 'bottom' in function 'f14')" in describe(found), describe(found)


def test_a_fanned_out_library_of_allowed_ops_passes():
    assert refused(fanned_library(MAX_FUNCTION_DEPTH - 2, 20, "Relu")) == []


def test_recursion_is_still_found_with_each_body_walked_once():
    graph = fanned_library(3, 2, "Relu")
    node = graph.library.function[3].node_def.add()  # f3 calls f1: a cycle
    node.name, node.op = "back", "PartitionedCall"
    node.attr["f"].func.name = "f1"
    assert "function 'f1' calls itself (through f1 -> f2 -> f3 -> f1)" in describe(refused(graph))


@pytest.mark.parametrize("op", ["Empty", "TemporaryVariable", "ParallelConcat"])
def test_ops_that_hand_out_uninitialised_memory_are_refused(op):
    """Their output holds what the memory held before: another client's tensors in a
    worker shared by clients (ParallelConcat fills only the rows it is given of the
    shape it allocates, whatever that shape says)."""
    graph = pb.GraphDef()
    node = graph.node.add()
    node.name, node.op = "leak", op
    (problem,) = refused(graph)
    assert op in describe([problem]) and "leak" in describe([problem])

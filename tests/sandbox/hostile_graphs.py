"""Builder of the hostile TensorFlow models of the sandbox tests (issue 21): graphs
and models that read or write files, abort, recurse or never end when TensorFlow
runs them, and graphs TensorFlow itself rejects.

Run as `python tests/sandbox/hostile_graphs.py OUT_DIR` by REAL TensorFlow in a
subprocess (tests/sandbox/conftest.py, cached by benchmarks/built_models.py like the
other builders). The files they would read or write are canaries in CANARY_DIR
(`<test cache>/tf/canary`, next to OUT_DIR): the tests put content there and check
it was never read (it must not reach an output) nor written.
Every model's inputs are one float32 Placeholder `x` of shape [1, 4] unless said.
"""
from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
OUT = sys.argv[1]
CANARY_DIR = os.path.join(os.path.dirname(os.path.abspath(OUT)), "canary")
INDEX: dict = {}


def canary(name: str) -> str:
    return os.path.join(CANARY_DIR, name)


def write_graph(name: str, graph_def, **meta):
    path = os.path.join(OUT, name + ".pb")
    with open(path, "wb") as f:
        f.write(graph_def.SerializeToString())
    INDEX[name] = {"model": os.path.basename(path), **meta}


def graph_of(build):
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [1, 4], name="x")
        build(x)
    return graph.as_graph_def()


def add_node(graph_def, name, op, inputs=(), **attrs):
    node = graph_def.node.add()
    node.name, node.op = name, op
    node.input.extend(inputs)
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    return node


def string_const(graph_def, name, text: str):
    tensor = tf.make_tensor_proto(text.encode())
    add_node(graph_def, name, "Const", dtype=tf1.AttrValue(type=tf.string.as_datatype_enum),
             value=tf1.AttrValue(tensor=tensor))


def write_file_node(graph_def, name: str, path: str):
    """A WriteFile of "pwned" to `path`: name/filename, name/contents, name."""
    string_const(graph_def, name + "/filename", path)
    string_const(graph_def, name + "/contents", "pwned")
    add_node(graph_def, name, "WriteFile", [name + "/filename", name + "/contents"])


# ------------------------------------------------------------------ F1: conversion reads and writes files
def read_file(name: str, path: str):
    def build(x):
        raw = tf.io.decode_raw(tf.io.read_file(path, name="read"), tf.uint8, name="decode")
        tf.add(x, tf.cast(raw[:4], tf.float32, name="to_float"), name="y")
    write_graph(name, graph_of(build), output="y")


def write_in_function():
    @tf.function
    def side_effect(x):
        tf.io.write_file(canary("write_fn.txt"), "pwned")
        return x * 2.0

    def build(x):
        tf.add(side_effect(x), 1.0, name="y")
    write_graph("write_in_function", graph_of(build), output="y")


def validate_control_write():
    """y = relu(x) with a control input on a WriteFile: converting --output y leaves it
    out, but the framework side of --validate runs what y needs, control inputs too."""
    def build(x):
        tf.nn.relu(x, name="y")
    graph_def = graph_of(build)
    write_file_node(graph_def, "write", canary("validate.txt"))
    next(n for n in graph_def.node if n.name == "y").input.append("^write")
    write_graph("validate_control_write", graph_def, output="y")


def tf1_variable_graph(directory: str):
    """A TF1 graph y = x * w (w a VariableV2) with its checkpoint: (graph, saver, prefix)."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [1, 4], name="x")
        w = tf1.get_variable("w", initializer=np.arange(1, 5, dtype=np.float32), use_resource=False)
        tf.multiply(x, w, name="y")
        saver = tf1.train.Saver()
        os.makedirs(directory)
        prefix = os.path.join(directory, "model.ckpt")
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False)
    return graph, saver, prefix


def meta_graph_restore_write():
    directory = os.path.join(OUT, "meta_restore_write")
    graph, saver, prefix = tf1_variable_graph(directory)
    with graph.as_default():
        meta = tf1.train.export_meta_graph(saver_def=saver.as_saver_def())
    write_file_node(meta.graph_def, "write", canary("meta_restore.txt"))
    restore = meta.saver_def.restore_op_name
    next(n for n in meta.graph_def.node if n.name == restore).input.append("^write")
    with open(prefix + ".meta", "wb") as f:
        f.write(meta.SerializeToString())
    INDEX["meta_restore_write"] = {"meta_graph": os.path.relpath(prefix + ".meta", OUT),
                                   "checkpoint": os.path.relpath(prefix, OUT)}


def variable_control_write():
    directory = os.path.join(OUT, "variable_control_write")
    graph, _, prefix = tf1_variable_graph(directory)
    graph_def = graph.as_graph_def()
    write_file_node(graph_def, "write", canary("variable.txt"))
    next(n for n in graph_def.node if n.name == "w").input.append("^write")
    path = os.path.join(directory, "graph.pb")
    with open(path, "wb") as f:
        f.write(graph_def.SerializeToString())
    INDEX["variable_control_write"] = {"model": os.path.relpath(path, OUT), "checkpoint": os.path.relpath(prefix, OUT),
                                       "output": "y"}


def saved_model_main_op_write():
    path = os.path.join(OUT, "tf1_saved_model_main_op")
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [1, 4], name="x")
        w = tf1.get_variable("w", initializer=np.arange(1, 5, dtype=np.float32), use_resource=False)
        y = tf.multiply(x, w, name="y")
        main_op = tf.group(tf.io.write_file(canary("main_op.txt"), "pwned"), name="main_op")
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            builder = tf1.saved_model.Builder(path)
            signature = tf1.saved_model.predict_signature_def({"x": x}, {"y": y})
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": signature},
                                                 main_op=main_op)
            builder.save()
    INDEX["tf1_saved_model_main_op"] = {"saved_model_dir": os.path.relpath(path, OUT)}


# ------------------------------------------------------------------ F2-F4: graphs an IR may embed
def sampler():
    def build(x):
        sampled, _, _ = tf.random.fixed_unigram_candidate_sampler(
            true_classes=tf.constant([[0]], tf.int64), num_true=1, num_sampled=4, unique=True, range_max=4,
            vocab_file=canary("vocab.txt"), seed=1, name="sampler")
        tf.add(x, tf.cast(tf.reshape(sampled, [1, 4]), tf.float32), name="y")
    write_graph("sampler", graph_of(build), output="y")


def decode_proto():
    def build(x):
        values = tf.io.decode_proto(tf.constant([b""]), "mo.Canary", ["v"], [tf.float32],
                                    descriptor_source=canary("descriptor.bin"), name="decode").values[0]
        tf.add(x, tf.reduce_sum(values), name="y")
    write_graph("decode_proto", graph_of(build), output="y")


def abort():
    def build(x):
        stop = tf.raw_ops.Abort(error_msg="hostile", name="abort")
        with tf.control_dependencies([stop]):
            tf.identity(x + 1.0, name="y")
    write_graph("abort", graph_of(build), output="y")


def recursive_function():
    @tf.function
    def twice(x):
        return x * 2.0

    def build(x):
        tf.add(twice(x), 0.0, name="y")
    graph_def = graph_of(build)
    body = graph_def.library.function[0]
    name = body.signature.name
    call = body.node_def.add()  # the function now calls itself first
    call.name, call.op = "again", "StatefulPartitionedCall"
    arg = body.signature.input_arg[0].name
    call.input.append(arg)
    call.attr["f"].func.name = name
    call.attr["Tin"].list.type.append(tf.float32.as_datatype_enum)
    call.attr["Tout"].list.type.append(tf.float32.as_datatype_enum)
    for node in body.node_def:
        if node.name != "again":
            node.input[:] = ["again:output:0" if i == arg else i for i in node.input]
    write_graph("recursive_function", graph_def, output="y")


def endless_loop():
    def build(x):
        tf1.disable_control_flow_v2()
        counter = tf1.while_loop(lambda i: i > -1.0, lambda i: i + 1.0, [tf.reduce_sum(x) * 0.0])
        tf1.enable_control_flow_v2()
        tf.add(x, counter * 0.0, name="y")
    write_graph("endless_loop", graph_of(build), output="y")


def plain():
    """A benign graph of the same shape: y = erf(x) * 2 (the tests embed it as an offloaded sub-graph)."""
    def build(x):
        tf.multiply(tf.math.erf(x), 2.0, name="y")
    write_graph("plain", graph_of(build), output="y")


def growing_table():
    """Each run inserts into a MutableHashTable the Session keeps: memory that stays after the run
    (4M entries a request grew the shared TF worker by 1.3 GB in 7 requests)."""
    def build(x):
        table = tf.raw_ops.MutableHashTableV2(key_dtype=tf.int64, value_dtype=tf.float32, shared_name="grow")
        keys = tf.range(tf.cast(tf.reduce_sum(x) * 0.0, tf.int64), tf.cast(1024, tf.int64))
        insert = tf.raw_ops.LookupTableInsertV2(table_handle=table, keys=keys, values=tf.cast(keys, tf.float32))
        with tf.control_dependencies([insert]):
            size = tf.cast(tf.raw_ops.LookupTableSizeV2(table_handle=table), tf.float32)
        tf.add(x * 2.0, size * 0.0, name="y")
    write_graph("growing_table", graph_of(build), output="y")


# ------------------------------------------------------------------ low items
def nan_weights():
    def build(x):
        w = np.array([1.0, np.nan, np.inf, 2.0], np.float32)
        tf.multiply(x, tf.constant(w, name="w"), name="y")
    write_graph("nan_weights", graph_of(build), output="y")


def long_name():
    """A node whose name makes a backtracking regex like (a+)+$ take minutes."""
    def build(x):
        tf.nn.relu(x, name="a" * 48 + "b")
    write_graph("long_name", graph_of(build), output="a" * 48 + "b")


def rejected_types():
    """Graphs TensorFlow itself refuses to import, with the attribute it checks."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [1, 4, 4, 2], name="x")
        tf.nn.conv2d(x, tf.ones([1, 1, 2, 3]), 1, "VALID", name="y")
    graph_def = graph.as_graph_def()
    for node in graph_def.node:
        if node.op in ("Conv2D", "Placeholder", "Const"):
            key = "T" if node.op == "Conv2D" else "dtype"
            node.attr[key].type = tf.int64.as_datatype_enum
            if node.op == "Const":
                node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.ones([1, 1, 2, 3], np.int64)))
    write_graph("conv2d_int64", graph_def, output="y", input_shape=[1, 4, 4, 2])

    def build(x):
        tf.reshape(x, [2, 2], name="y")
    graph_def = graph_of(build)
    for node in graph_def.node:
        if node.name == "y/shape":
            node.attr["dtype"].type = tf.float32.as_datatype_enum
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.array([2.0, 2.0], np.float32)))
        if node.name == "y":
            node.attr["Tshape"].type = tf.float32.as_datatype_enum
    write_graph("reshape_float_shape", graph_def, output="y")

    def build(x):
        tf.nn.relu(x, name="y")
    graph_def = graph_of(build)
    for node in graph_def.node:
        key = "dtype" if node.op == "Placeholder" else "T"
        node.attr[key].type = tf.string.as_datatype_enum
    write_graph("relu_of_string", graph_def, output="y")


def main():
    os.makedirs(OUT, exist_ok=True)
    for builder in (lambda: read_file("read_file", canary("read.bin")),
                    lambda: read_file("read_fifo", canary("fifo")),
                    write_in_function, validate_control_write, meta_graph_restore_write, variable_control_write,
                    saved_model_main_op_write, sampler, decode_proto, abort, recursive_function, endless_loop, plain,
                    growing_table,
                    nan_weights, long_name, rejected_types):
        builder()
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump({"canary_dir": CANARY_DIR, "models": INDEX}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

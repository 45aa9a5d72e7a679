"""The TensorFlow worker's request handlers (imported only inside the worker process,
once TensorFlow loaded: framework.load_tensorflow). The verbs, their arguments and
results: core/services/tf_worker.py."""
from __future__ import annotations

import os

from core.microkernel import RemoteError
from core.services import tf_worker as contract

# ops that end a TF1 training graph without being a model output
_NOT_OUTPUTS = {"NoOp", "SaveV2", "Save", "SaveSlices", "RestoreV2", "Restore", "MergeV2Checkpoints", "Assign",
                "AssignVariableOp", "AssignAdd", "AssignSub", "VariableV2", "Variable", "VarHandleOp", "Const",
                "Placeholder", "PlaceholderWithDefault", "VarIsInitializedOp", "IsVariableInitialized"}
_VARIABLES = ("VariableV2", "Variable", "VarHandleOp")


def _node_name(name: str) -> str:
    return name.lstrip("^").split(":")[0]


def _sinks(graph_def) -> list[str]:
    """The nodes nothing reads, without the saving/initialising machinery of a training graph."""
    read = {_node_name(i) for n in graph_def.node for i in n.input}
    return [n.name for n in graph_def.node if n.name not in read and n.op not in _NOT_OUTPUTS
            and not n.name.startswith(("save/", "save_", "init"))]


def _placeholders(graph_def) -> list[str]:
    return [n.name for n in graph_def.node if n.op == "Placeholder"]


def freeze_saved_model(tf, a):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    loaded = tf.saved_model.load(a["saved_model_dir"], tags=a["saved_model_tags"])
    signatures = dict(loaded.signatures)
    if not signatures:
        raise RemoteError(contract.FREEZE_FAILED, "the SavedModel has no signature to convert (save it with a "
                          "serving signature, e.g. tf.saved_model.save(model, dir) of a Keras model)")
    if "serving_default" in signatures:
        function = signatures["serving_default"]
    elif len(signatures) == 1:
        function = next(iter(signatures.values()))
    else:
        raise RemoteError(contract.FREEZE_FAILED, "the SavedModel has the signatures {} and none is "
                          "serving_default; save the one to convert as serving_default".format(sorted(signatures)))
    frozen = convert_variables_to_constants_v2(function)
    graph_def = frozen.graph.as_graph_def()
    inputs = [_node_name(t.name) for t in frozen.inputs if t.dtype != tf.resource]
    return graph_def, inputs, [_node_name(t.name) for t in frozen.outputs]


def _restore_and_freeze(tf, graph, sess, graph_def, outputs):
    tf1 = tf.compat.v1
    outputs = outputs or _sinks(graph_def)
    if not outputs:
        raise RemoteError(contract.FREEZE_FAILED, "the graph has no node that could be its output; name the outputs "
                          "with --output")
    missing = [o for o in outputs if o not in {n.name for n in graph_def.node}]
    if missing:
        raise RemoteError(contract.FREEZE_FAILED, "the graph has no node(s) {} to use as output".format(missing))
    frozen = tf1.graph_util.convert_variables_to_constants(sess, graph_def, outputs)
    return frozen, _placeholders(frozen), outputs


def freeze_meta_graph(tf, a):
    tf1 = tf.compat.v1
    meta = a["meta_graph"]
    checkpoint = a["checkpoint"] or (meta[:-len(".meta")] if meta.endswith(".meta") else None)
    if not checkpoint:
        raise RemoteError(contract.FREEZE_FAILED, "no checkpoint for the meta graph {}: give it with "
                          "--input_checkpoint".format(meta))
    graph = tf.Graph()
    with graph.as_default(), tf1.Session(graph=graph) as sess:
        saver = tf1.train.import_meta_graph(meta, clear_devices=True)
        saver.restore(sess, checkpoint)
        return _restore_and_freeze(tf, graph, sess, graph.as_graph_def(), a["outputs"])


def freeze_graph_with_checkpoint(tf, a):
    tf1 = tf.compat.v1
    graph_def = tf1.GraphDef()
    with open(a["input_model"], "rb") as f:
        data = f.read()
    if a["input_model_is_text"]:
        from google.protobuf import text_format
        text_format.Parse(data.decode("utf-8"), graph_def)
    else:
        graph_def.ParseFromString(data)
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
        variables = {n.name: graph.get_tensor_by_name(n.name + ":0") for n in graph_def.node if n.op in _VARIABLES}
        if not variables:
            raise RemoteError(contract.FREEZE_FAILED, "the graph {} has no variables for the checkpoint to fill; a "
                              "graph without them converts as it is (leave out --input_checkpoint)"
                              .format(a["input_model"]))
        with tf1.Session(graph=graph) as sess:
            tf1.train.Saver(var_list=variables).restore(sess, a["checkpoint"])
            return _restore_and_freeze(tf, graph, sess, graph_def, a["outputs"])


def _write(path: str, data: bytes):
    tmp = "{}.{}.tmp".format(path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def register(server, tf):
    def freeze(args, arrays):
        a = contract.parse_freeze(args)
        try:
            if a["saved_model_dir"]:
                graph_def, inputs, outputs = freeze_saved_model(tf, a)
            elif a["meta_graph"]:
                graph_def, inputs, outputs = freeze_meta_graph(tf, a)
            else:
                graph_def, inputs, outputs = freeze_graph_with_checkpoint(tf, a)
        except RemoteError:
            raise
        except Exception as exc:  # TensorFlow's own errors: its message is what the user needs
            raise RemoteError(contract.FREEZE_FAILED, "{}: {}".format(type(exc).__name__, str(exc).strip()))
        data = graph_def.SerializeToString()
        _write(a["output_path"], data)
        return {"inputs": inputs, "outputs": outputs, "bytes": len(data)}

    server.handle(contract.FREEZE, freeze)

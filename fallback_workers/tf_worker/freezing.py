"""The TensorFlow worker's `freeze` verb: SavedModels, meta graphs and GraphDefs with
checkpoints become frozen GraphDefs (variables -> constants). The contract:
core/services/tf_worker.py.

Before TensorFlow loads anything, what freezing would run is checked against the
allow-list (core/services/tf_ops.py): the nodes the outputs and the variables need
(a variable's control inputs run when it is restored), the restore op (which must
read through the saver's filename tensor: the checkpoint the user named), the
init/main ops a TF1 SavedModel runs at load, and the functions a TF2 SavedModel
restores (the object graph's; the saver's own functions are never run: TensorFlow
restores TF2 variables with ops of its own).
"""
from __future__ import annotations

import os

from core.microkernel import RemoteError
from core.services import tf_worker as contract

# ops that end a TF1 training graph without being a model output
_NOT_OUTPUTS = {"NoOp", "SaveV2", "Save", "SaveSlices", "RestoreV2", "Restore", "MergeV2Checkpoints", "Assign",
                "AssignVariableOp", "AssignAdd", "AssignSub", "VariableV2", "Variable", "VarHandleOp", "Const",
                "Placeholder", "PlaceholderWithDefault", "VarIsInitializedOp", "IsVariableInitialized"}
_VARIABLES = ("VariableV2", "Variable", "VarHandleOp")
_RESTORE_OPS = frozenset({"RestoreV2", "Restore", "RestoreSlice"})
_INIT_COLLECTIONS = ("saved_model_main_op", "legacy_init_op", "init_op", "table_initializer")
_INIT_SIGNATURE = "__saved_model_init_op"
MAX_PROTO_BYTES = 1 << 31  # a meta graph or saved_model.pb (protobuf's own limit)


def _node_name(name: str) -> str:
    return name.lstrip("^").split(":")[0]


def _sinks(graph_def) -> list[str]:
    """The nodes nothing reads, without the saving/initialising machinery of a training graph."""
    read = {_node_name(i) for n in graph_def.node for i in n.input}
    return [n.name for n in graph_def.node if n.name not in read and n.op not in _NOT_OUTPUTS
            and not n.name.startswith(("save/", "save_", "init"))]


def _placeholders(graph_def) -> list[str]:
    return [n.name for n in graph_def.node if n.op == "Placeholder"]


def _read_proto(message, path: str, what: str):
    try:
        size = os.path.getsize(path)
        if size >= MAX_PROTO_BYTES:
            raise RemoteError(contract.FREEZE_FAILED, "{} {} is larger than protobuf can read ({} bytes)".format(
                what, path, size))
        with open(path, "rb") as f:
            message.ParseFromString(f.read())
    except RemoteError:
        raise
    except Exception as exc:  # OSError, protobuf's DecodeError
        raise RemoteError(contract.FREEZE_FAILED, "cannot read {} {}: {}: {}".format(what, path, type(exc).__name__,
                                                                                   exc)) from None
    return message


def _variables(graph_def) -> list[str]:
    return [n.name for n in graph_def.node if n.op in _VARIABLES]


def _check_restore(graph_def, saver_def, what: str) -> None:
    """The restore op runs only allowed ops plus restores that read the saver's filename tensor."""
    from core.services import tf_ops
    if not saver_def.restore_op_name:
        return
    contract.check_allowed(graph_def, [saver_def.restore_op_name], what + "'s restore op",
                           allowed=tf_ops.ALLOWED_OPS | _RESTORE_OPS)
    nodes = {n.name: n for n in graph_def.node}
    filename = tf_ops.node_name(saver_def.filename_tensor_name)
    for node in tf_ops.closure(graph_def, [saver_def.restore_op_name]):
        if node.op not in _RESTORE_OPS:
            continue
        source = tf_ops.node_name(node.input[0]) if node.input else ""
        while source in nodes and nodes[source].op == "Identity" and nodes[source].input:
            source = tf_ops.node_name(nodes[source].input[0])
        if source != filename:
            raise RemoteError(contract.REFUSED, "{}'s restore op has op '{}' (node '{}') reading the checkpoint "
                              "named by node '{}', not by the saver's filename tensor '{}': it could read other "
                              "files than the checkpoint given".format(what, node.op, node.name, source, filename))


def _init_ops(meta_graph) -> list[str]:
    """The init/main ops a SavedModel loader runs."""
    names = []
    for key in _INIT_COLLECTIONS:
        if key in meta_graph.collection_def:
            names.extend(meta_graph.collection_def[key].node_list.value)
    init = meta_graph.signature_def.get(_INIT_SIGNATURE)
    if init is not None:
        names.extend(t.name for t in init.outputs.values())
    return names


def _check_saved_model(tf, path: str, tags) -> None:
    """What tf.saved_model.load would run of the SavedModel at `path`, checked."""
    from tensorflow.core.protobuf import saved_model_pb2
    pb = os.path.join(path, "saved_model.pb")
    if not os.path.isfile(pb):
        return  # (text SavedModels, or none: TensorFlow's loader says what is wrong, running nothing)
    saved = _read_proto(saved_model_pb2.SavedModel(), pb, "the SavedModel")
    wanted = set(tags or ["serve"])
    for meta in saved.meta_graphs:
        if wanted and not wanted <= set(meta.meta_info_def.tags):
            continue
        what = "the SavedModel's meta graph {}".format(sorted(meta.meta_info_def.tags))
        graph_def = meta.graph_def
        init = _init_ops(meta)
        if init:
            contract.check_allowed(graph_def, init, what + "'s init op")
        if meta.object_graph_def.nodes:  # TF2: the loader restores these functions, and runs no graph node
            contract.check_allowed(graph_def, [], what, functions=sorted(meta.object_graph_def.concrete_functions))
            continue
        # TF1: the loader runs the restore op, the init op, then the signature's outputs
        _check_restore(graph_def, meta.saver_def, what)
        outputs = [t.name for sig in meta.signature_def.values() for t in sig.outputs.values()]
        contract.check_allowed(graph_def, outputs + _variables(graph_def), what)


def freeze_saved_model(tf, a):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    _check_saved_model(tf, a["saved_model_dir"], a["saved_model_tags"])
    loaded = tf.saved_model.load(a["saved_model_dir"], tags=a["saved_model_tags"])
    signatures = dict(loaded.signatures)
    if not signatures:
        raise RemoteError(contract.FREEZE_FAILED, "the SavedModel has no signature to convert (save it with a "
                          "serving signature, e.g. tf.saved_model.save(model, dir) of a Keras model)")
    chosen = a.get("saved_model_signature")
    if chosen is not None:
        if chosen not in signatures:
            raise RemoteError(contract.FREEZE_FAILED, "the SavedModel has no signature {!r}; its signatures are {} "
                              "(--saved_model_signature)".format(chosen, sorted(signatures)))
        function = signatures[chosen]
    elif "serving_default" in signatures:
        function = signatures["serving_default"]
    elif len(signatures) == 1:
        function = next(iter(signatures.values()))
    else:
        raise RemoteError(contract.FREEZE_FAILED, "the SavedModel has the signatures {} and none is "
                          "serving_default: choose one with --saved_model_signature".format(sorted(signatures)))
    frozen = convert_variables_to_constants_v2(function)
    graph_def = frozen.graph.as_graph_def()
    inputs = [_node_name(t.name) for t in frozen.inputs if t.dtype != tf.resource]
    outputs = [_node_name(t.name) for t in frozen.outputs]
    structure = function.structured_outputs
    if isinstance(structure, dict) and len(structure) == len(outputs):  # (flattened in the keys' order)
        outputs = _named_like_signature(graph_def, outputs, sorted(structure))
    return graph_def, inputs, outputs


def _named_like_signature(graph_def, outputs, keys) -> list[str]:
    """The output nodes (Identity sinks freezing made) renamed to the signature's output keys, where no node
    has that name and nothing reads the node: the names OpenVINO's converters give these outputs."""
    names = {n.name for n in graph_def.node}
    read = {text.lstrip("^").split(":")[0] for n in graph_def.node for text in n.input}
    by_name = {n.name: n for n in graph_def.node}
    renamed = []
    for node_name, key in zip(outputs, keys):
        if key not in names and node_name not in read and node_name in by_name:
            by_name[node_name].name = key
            names.add(key)
            node_name = key
        renamed.append(node_name)
    return renamed


def _outputs(graph_def, outputs, what: str) -> list[str]:
    """The output nodes (given, or the nodes nothing reads), after checking that what
    freezing runs - the outputs and the variables with everything they need - is allowed."""
    outputs = outputs or _sinks(graph_def)
    if not outputs:
        raise RemoteError(contract.FREEZE_FAILED, "the graph has no node that could be its output; name the outputs "
                          "with --output")
    missing = [o for o in outputs if o not in {n.name for n in graph_def.node}]
    if missing:
        raise RemoteError(contract.FREEZE_FAILED, "the graph has no node(s) {} to use as output".format(missing))
    contract.check_allowed(graph_def, list(outputs) + _variables(graph_def), what)
    return outputs


def _freeze(tf, sess, graph_def, outputs):
    frozen = tf.compat.v1.graph_util.convert_variables_to_constants(sess, graph_def, outputs)
    return frozen, _placeholders(frozen), outputs


def freeze_meta_graph(tf, a):
    tf1 = tf.compat.v1
    meta = a["meta_graph"]
    checkpoint = a["checkpoint"] or (meta[:-len(".meta")] if meta.endswith(".meta") else None)
    if not checkpoint:
        raise RemoteError(contract.FREEZE_FAILED, "no checkpoint for the meta graph {}: give it with "
                          "--input_checkpoint".format(meta))
    meta_graph = _read_proto(tf1.MetaGraphDef(), meta, "the meta graph")
    _check_restore(meta_graph.graph_def, meta_graph.saver_def, "the meta graph")
    outputs = _outputs(meta_graph.graph_def, a["outputs"], "the meta graph")
    graph = tf.Graph()
    with graph.as_default(), tf1.Session(graph=graph) as sess:
        saver = tf1.train.import_meta_graph(meta_graph, clear_devices=True)
        saver.restore(sess, checkpoint)
        return _freeze(tf, sess, graph.as_graph_def(), outputs)


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
    if not _variables(graph_def):
        raise RemoteError(contract.FREEZE_FAILED, "the graph {} has no variables for the checkpoint to fill; a "
                          "graph without them converts as it is (leave out --input_checkpoint)"
                          .format(a["input_model"]))
    outputs = _outputs(graph_def, a["outputs"], "the graph")
    kinds = {n.name: n.op for n in graph_def.node if n.op in _VARIABLES}
    reader = tf.train.load_checkpoint(a["checkpoint"])
    missing = sorted(set(kinds) - set(reader.get_variable_to_shape_map()))
    if missing:
        raise RemoteError(contract.FREEZE_FAILED, "the checkpoint {} has no value for the variable(s) {} of the graph "
                          "(a checkpoint of another model, or variables named differently)"
                          .format(a["checkpoint"], ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")))
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
        refs = {name: graph.get_tensor_by_name(name + ":0") for name, op in kinds.items() if op != "VarHandleOp"}
        # a resource variable's tensor is its handle, which a Saver cannot fill: assign the checkpoint's value
        assigns = [tf.raw_ops.AssignVariableOp(resource=graph.get_tensor_by_name(name + ":0"),
                                               value=reader.get_tensor(name))
                   for name, op in kinds.items() if op == "VarHandleOp"]
        with tf1.Session(graph=graph) as sess:
            if refs:
                tf1.train.Saver(var_list=refs).restore(sess, a["checkpoint"])
            sess.run(assigns)
            return _freeze(tf, sess, graph_def, outputs)


def freeze(tf, args: dict) -> dict:
    """The `freeze` verb: the frozen GraphDef written to output_path (atomically)."""
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


def _write(path: str, data: bytes):
    tmp = "{}.{}.tmp".format(path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)

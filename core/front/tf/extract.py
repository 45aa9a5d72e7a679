"""Attribute extraction for TensorFlow graphs.

Priority as for Caffe: a user extension's extractor for the op type (its Op
then computes the node, in TensorFlow's layout, and stays as it is in the IR),
then the built-in TFOp (core/front/tf/ops). Every node without either is
collected, and all of them are reported in one error: name, type, how many of
each type.
"""
from __future__ import annotations

from collections import Counter

from core.errors import Error
from core.front.extractor import FrontExtractorOp
from core.front.tf.ops import TF_OPS


def unsupported_ops_error(nodes) -> Error:
    counts = Counter(n.tf_op for n in nodes)
    lines = []
    for op, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        names = [n.name for n in nodes if n.tf_op == op]
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        lines.append("{} ({} node{}): {}".format(op, count, "s" if count > 1 else "", shown))
    return Error(
        "List of operations that cannot be converted to the IR ({} node{} of {} type{}):\n  {}\n"
        " Part of the nodes was not translated to IR. Stopped. Ways out: write an extension for these ops "
        "(--extensions DIR with ops/ and front/tf/ modules: an Op with its shape function and a FrontExtractorOp), "
        "offload them to TensorFlow (--offload_unsupported_operations_to_tf, --tensorflow_operation_patterns, "
        "--tensorflow_subgraph_patterns), or cut them off with --input/--output.",
        len(nodes), "s" if len(nodes) > 1 else "", len(counts), "s" if len(counts) > 1 else "",
        "\n  ".join(lines), faq=23)


def unsupported_nodes(graph) -> list:
    return [node for node in graph.op_nodes() if not node.has("op") and node.soft_get("tf_class") is None]


def extract_all(graph, report_unsupported: bool = True):
    """Extracts every node. Nodes no extractor knows stay as they are; with
    report_unsupported they are one error (the pipeline reports them after the front
    replacements, which may replace them)."""
    user = FrontExtractorOp.extractors_for("tf")
    missing = []
    for node in graph.op_nodes():
        if node.soft_get("op") == "Parameter" or node.soft_get("tf_class") is not None:
            continue
        tf_op = node.soft_get("tf_op")
        extractor = user.get(tf_op)
        if extractor is not None:
            _run_user_extractor(node, extractor)
            continue
        cls = TF_OPS.get(tf_op)
        if cls is None:
            missing.append(node)
            continue
        check_types(node)
        node["tf"] = {}
        cls.extract(node)
        node["tf_class"] = cls
        node["infer"] = cls.infer
    if missing and report_unsupported:
        raise unsupported_ops_error(missing)


def _run_user_extractor(node, extractor):
    try:
        ok = extractor.extract(node)
    except Error:
        raise
    except Exception as exc:  # the user's code: name the node, the class and the line that raised
        from core.front.replacement.runner import code_location
        raise Error("The extractor {} of node '{}' ({}) failed: {}: {}", code_location(extractor, exc), node.name,
                    node.tf_op, type(exc).__name__, exc) from exc
    if ok is False or not node.has("op"):
        raise Error("The extractor {} did not handle node '{}' ({}): it must call update_node_stat of an Op.",
                    extractor.__name__, node.name, node.tf_op)


def _type_name(enum: int) -> str:
    from core.front.tf.op_types import DTYPE_NAMES
    return DTYPE_NAMES.get(enum, "type {}".format(enum))


def check_types(node):
    """TensorFlow's own type rules (core/front/tf/op_types.py, from its op registry):
    a type attribute outside the types the op takes, or an input of another type than
    the op's, is an error here, as TensorFlow itself refuses to import such a graph."""
    from core.front.tf.op_types import OP_TYPES
    rules = OP_TYPES.get(node.soft_get("tf_op"))
    pb = node.soft_get("pb")
    if rules is None or pb is None or not hasattr(pb, "attr"):
        return
    for name, allowed in rules["attrs"].items():
        if name in pb.attr and pb.attr[name].WhichOneof("value") == "type" and pb.attr[name].type not in allowed:
            raise Error("Node '{}' ({}): its attribute '{}' is {}, which {} does not take (TensorFlow allows {}); "
                        "TensorFlow itself refuses this graph.", node.name, pb.op, name, _type_name(pb.attr[name].type),
                        pb.op, ", ".join(_type_name(t) for t in allowed))
    inputs = [text for text in pb.input if not text.startswith("^")]
    for port, want in enumerate(rules["inputs"]):
        if want is None or port >= len(inputs):
            break
        expected = want if isinstance(want, int) else (
            pb.attr[want].type if want in pb.attr and pb.attr[want].WhichOneof("value") == "type" else None)
        data = node.in_nodes().get(port)
        producer = data.producer() if data is not None and inputs[port].split(":")[-1] in ("0", inputs[port]) \
            else None  # (output 0 only: other outputs of an op may have other types)
        got = _output_type(producer.pb) if producer is not None and producer.has_valid("pb") else None
        if expected is not None and got is not None and got != expected:
            raise Error("Node '{}' ({}): its input {} ('{}') is {}, but {} takes {} there; TensorFlow itself refuses "
                        "this graph.", node.name, pb.op, port, inputs[port], _type_name(got), pb.op,
                        _type_name(expected))


def _output_type(pb):
    """The type enum of a NodeDef's first output by TensorFlow's rules (op_types.py),
    None for an op the table does not have or whose attribute is missing."""
    from core.front.tf.op_types import OP_TYPES
    rules = OP_TYPES.get(getattr(pb, "op", None))
    output = rules.get("output") if rules is not None else None
    if isinstance(output, int):
        return output
    if isinstance(output, str) and output in pb.attr and pb.attr[output].WhichOneof("value") == "type":
        return pb.attr[output].type
    return None

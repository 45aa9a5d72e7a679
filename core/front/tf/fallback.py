"""The TensorFlow shape-inference fallback: TensorFlow computes the output shapes
(and, for constants, the values) of nodes the converter has no shape function
for - an offloaded sub-graph (TFCustomSubgraphCall), a user extension Op without
`infer` on a TensorFlow node, a sub-graph a replacer merged into such an op
(the reference guide's InceptionBlock).

When shape inference (core/middle/shape_infer.py, which asks
graph.graph["shape_fallback"]) reaches the first such node, the core builds ONE
GraphDef that computes all of them back to the model's Placeholders and
constants: the model's own NodeDefs, Placeholders at the input shapes the
converter uses (so --input_shape, -b and cutting hold), constants it already
computed as Consts, and, for a tensor an op the converter made produces (no
NodeDef), a Placeholder of its inferred shape. The TF worker answers in one
round trip: TensorFlow's static shapes when it defines them all; else it runs
the graph once on the user's sample input (--fallback_input) or, failing that,
seeded noise - the log says which shapes came from where. A node whose inputs
depend on an op inferred later is left for a second round trip.

In IR layout (after lowering) the same nodes keep TensorFlow's shapes,
permuted to NCHW where their tensors are.
"""
from __future__ import annotations

import logging

import numpy as np

from core.errors import Error
from core.front.tf.tf_subgraph import GraphDefBuilder, node_source, output_dtype, port_of, tensor_dtype, tensor_ref

log = logging.getLogger("mo_core")

RESULT = "tf_fallback_result"   # node attribute: [(shape, value or None, dtype name)] per output port
TO_NCHW = (0, 3, 1, 2)


class _Later(Exception):
    """The tensor depends on a node not inferred yet: its consumer waits for a later round trip."""


class TFShapeFallback:
    """graph.graph["shape_fallback"] of a TensorFlow model. `given`: {input name:
    array} from --fallback_input (TensorFlow's layout); `source`: how to name it."""

    def __init__(self, given: dict | None = None, source: str | None = None):
        self.given = dict(given or {})
        self.source = source
        self.round_trips = 0

    @staticmethod
    def handles(node) -> bool:
        return node_source(node) is not None

    def infer(self, node):
        outs = node.out_nodes()
        if outs and all("tf_shape" in d.attrs for d in outs.values()):  # IR layout: lowering recorded TF's shapes
            for d in outs.values():
                shape = np.asarray(d["tf_shape"], dtype=np.int64)
                d.shape = shape[list(TO_NCHW)] if d.soft_get("nchw") else shape
            return
        if node.soft_get(RESULT) is None:
            self._round_trip(node.graph, node)
        results = node[RESULT]
        constant = all(value is not None for _, value, _ in results)
        for port, out in outs.items():
            if port >= len(results):
                raise Error("TensorFlow computes {} outputs for node '{}', but output {} is read.", len(results),
                            node.name, port)
            shape, value, _ = results[port]
            out.shape = np.array(shape, dtype=np.int64)
            if constant:  # (a constant only when all are: the node then goes, its values live on)
                out.value = value

    # ----------------------------------------------------------------- the request
    def _targets(self, graph):
        from core.middle.shape_infer import uses_fallback
        return [n for n in graph.topological_ops() if n.soft_get(RESULT) is None and uses_fallback(n)]

    def compute(self, node):
        """Asks TensorFlow for this one node now, its inputs as they are (Placeholders of
        their shapes, constants): a node the converter cannot lower, offloaded while
        lowering (its neighbours may be IR layers already)."""
        request = _Request(node.graph, {}, inputs_only=True)
        self._finish(request, [node])

    def _round_trip(self, graph, first):
        request = _Request(graph, self.given)
        targets = []
        for node in self._targets(graph):
            try:
                request.include(node)
            except _Later:
                if node.id == first.id:
                    raise Error("Internal error: the inputs of '{}' are not known when TensorFlow is asked for its "
                                "shapes.", node.name) from None
                request.rollback()
                continue
            request.commit()
            targets.append(node)
        self._finish(request, targets)

    def _finish(self, request, targets):
        request.include_all(targets)
        outputs, owners = [], []
        for node in targets:
            source = node_source(node)
            for port in sorted(node.out_nodes()):
                outputs.append(tensor_ref(*source.outputs[port]) if port < len(source.outputs) else None)
                owners.append((node, port))
        missing = [(n.name, p) for (n, p), o in zip(owners, outputs) if o is None]
        if missing:
            raise Error("Node '{}' has no TensorFlow tensor for its output {}.", *missing[0])
        described = self._ask(request, outputs, targets)
        self.round_trips += 1
        by_node: dict = {}
        for (node, port), item in zip(owners, described):
            by_node.setdefault(node.id, {})[port] = (item["shape"], item["value"] if item["constant"] else None,
                                                     item["dtype"])
        for node in targets:
            ports = by_node.get(node.id, {})
            node[RESULT] = [ports.get(p, ([], None, "float32")) for p in range(max(ports, default=-1) + 1)]
            node["tf_output_dtypes"] = [r[2] for r in node[RESULT]]

    def _ask(self, request, outputs, targets):
        from core.front.tf import worker
        from core.services import tf_worker as contract
        names = ", ".join("'{}'".format(n.name) for n in targets)
        graph_bytes = request.builder.to_bytes()
        given = {request.placeholders[name] + ":0": value for name, value in self.given.items()
                 if name in request.placeholders}
        args, arrays = contract.infer_subgraph_request(graph_bytes, outputs, given)
        result, values = worker.call(contract.INFER_SUBGRAPH, args, arrays,
                                     "inferring the output shapes of {}".format(names),
                                     failed="TensorFlow could not compute the output shapes of {}".format(names))
        try:
            described = contract.check_infer_subgraph_result(result, values, outputs)
        except Exception as exc:  # ProtocolError: a broken reply
            raise Error("The TensorFlow worker's answer for {} is malformed: {}", names, exc) from None
        self._log(targets, result, described, request)
        return described

    def _log(self, targets, result, described, request):
        listing = ", ".join("'{}' ({})".format(n.name, n.soft_get("tf_op", n.soft_get("op"))) for n in targets)
        if not result.get("ran"):
            log.info("The output shapes of %s come from TensorFlow's shape inference (TF worker).", listing)
            return
        fed = result.get("fed", {})
        noise = sorted(name for name, how in fed.items() if how == "noise")
        given = sorted(name for name, how in fed.items() if how == "given")
        inputs = []
        if given:
            inputs.append("{} from {}".format(", ".join(given), self.source or "--fallback_input"))
        if noise:
            inputs.append("seeded noise for {}".format(", ".join(noise)))
        log.warning("The output shapes of %s depend on the input data: TensorFlow ran the graph on %s to get them."
                    "%s", listing, " and ".join(inputs) or "no input",
                    " Check them in the IR, or give a real input with --fallback_input x.npy." if noise else "")


class _Request:
    """The GraphDef of one round trip, built node by node (a node that must wait is
    rolled back)."""

    def __init__(self, graph, given, inputs_only: bool = False):
        self.graph = graph
        self.given = given
        self.inputs_only = inputs_only   # the targets' inputs come in as they are: no walk upstream
        self.builder = GraphDefBuilder(graph)
        for node in graph.op_nodes():
            source = node_source(node)
            if source is not None:
                self.builder.reserve(source.names)
        self.refs: dict = {}         # data id -> tensor ref in the GraphDef
        self.included: set = set()   # op ids whose NodeDefs are in
        self.placeholders: dict = {}  # model input name -> Placeholder name
        self._mark()

    def _mark(self):
        self._saved = (len(self.builder.graph_def.node), set(self.builder._names), dict(self.refs),
                       set(self.included), dict(self.placeholders))

    def commit(self):
        self._mark()

    def rollback(self):
        count, names, refs, included, placeholders = self._saved
        del self.builder.graph_def.node[count:]
        self.builder._names, self.refs, self.included, self.placeholders = names, refs, included, placeholders
        self._mark()

    def include_all(self, nodes):
        for node in nodes:
            self.include(node)

    def include(self, node):
        if node.id in self.included:
            return
        source = node_source(node)
        inputs = node.in_nodes()
        if sorted(inputs) != list(range(len(source.inputs))):
            raise Error("Node '{}' reads {} tensors, but its TensorFlow definition has {} inputs.", node.name,
                        len(inputs), len(source.inputs))
        refs = [self.ref(inputs[port], as_is=self.inputs_only) for port in range(len(source.inputs))]
        self.builder.add_subgraph(source, refs)
        self.included.add(node.id)

    def ref(self, data, as_is: bool = False) -> str:
        if data.id in self.refs:
            return self.refs[data.id]
        producer = data.producer()
        value = data.soft_get("value")
        dtype = tensor_dtype(data)
        if value is not None:
            ref = self.builder.add_const(_base(data.name) + "/value", value, np.bool_ if np.asarray(
                value).dtype == np.bool_ else dtype)
        elif as_is:
            shape = data["tf_shape"] if "tf_shape" in data.attrs else data.soft_get("shape")
            if shape is None:
                raise Error("Internal error: tensor '{}' has no shape when TensorFlow is asked about its reader.",
                            data.name)
            ref = self.builder.add_placeholder(_base(data.name) + "/tensor", shape, dtype or np.float32)
        elif producer is None:
            raise Error("The tensor '{}' has neither a producer nor a value.", data.name)
        elif producer.soft_get("op") == "Parameter":
            ref = self._placeholder(producer, data)
        elif node_source(producer) is not None:
            self.include(producer)
            port = port_of(producer, data)
            outputs = node_source(producer).outputs
            ref = tensor_ref(*outputs[port])
        elif data.soft_get("shape") is not None:  # an op the converter made: its tensor comes in as it is
            ref = self.builder.add_placeholder(_base(data.name) + "/tensor", data.shape)
        else:
            raise _Later()
        self.refs[data.id] = ref
        return ref

    def _placeholder(self, param, data) -> str:
        shape = data.soft_get("shape")
        if shape is None:
            shape = param.soft_get("shape")
        if shape is None or np.any(np.asarray(shape) < 0):
            raise Error("Input '{}' has no full shape ({}); give it with --input_shape or -b.", param.name,
                        None if shape is None else list(shape), faq=40)
        pb = param.soft_get("pb")
        dtype = output_dtype(pb) if pb is not None and hasattr(pb, "attr") else None
        name = self.builder.add_placeholder(_base(param.name), shape, dtype or np.float32)
        self.placeholders[param.name] = name
        given = self.given.get(param.name)
        if given is not None and tuple(given.shape) != tuple(int(d) for d in shape):
            raise Error("The --fallback_input array for input '{}' has the shape {}, but the input's shape is {} "
                        "(in the framework's layout).", param.name, list(given.shape), [int(d) for d in shape])
        return name


def _base(name: str) -> str:
    """A TensorFlow node name made from a converter name (no ':')."""
    return str(name).replace(":", "_port")


def shape_fallback(graph) -> TFShapeFallback:
    fallback = graph.graph.get("shape_fallback")
    if fallback is None:
        fallback = graph.graph["shape_fallback"] = TFShapeFallback()
    return fallback

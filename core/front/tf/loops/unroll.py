"""While loops of a fixed trip count unrolled in the GraphDef, before the graph is built.

A while loop as a frozen graph holds it (TF1 frames: Enter, Merge, Switch, LoopCond,
NextIteration, Exit - what tf.while_loop, tf.scan and Keras' LSTM / GRU / SimpleRNN
leave once control flow v2 is lowered at freezing) is a cycle that no IR of ours
holds. The reference turned such loops into a TensorIterator; our IR v2 has none, so
a loop whose condition reads only counters and constants (a recurrent layer over a
sequence of known length) is unrolled: its body copied once per iteration, each copy
reading the loop variables the previous one computed, the counters folded to
constants on the way, and the TensorList / TensorArray reads and writes at those
constant indices turned into slices of the unstacked tensor and one Pack of the
written items (rewriter.py; what it knows of a tensor: values.py). The loop's Exit
nodes keep their names - the copy that computes the final value takes it, else an
Identity of the value does -, so what reads them is unchanged and a TF1 model's final
state (an Exit nothing reads) stays an output.

Innermost loops first: a nested loop's copies become part of the outer body. The
condition may read dimensions the graph states (a Shape of an input whose Placeholder,
or --input_shape, gives them). A loop whose condition depends on the data, whose copies
would pass MAX_ITERATIONS iterations or MAX_NODES nodes, or that the user's offload
patterns name a node of, stays as it is (TensorFlow runs it with the offload options)
and the log says why. Conversion-time values are small integer/bool tensors only
(values.MAX_FOLD elements): a weight computed in the body is copied as its nodes, not
as a new constant per iteration.
"""
from __future__ import annotations

import logging

import numpy as np

from core.front.tf.constant_cond import read_names, without_orphans
from core.front.tf.loops.rewriter import LIST_OPS, Rewriter
from core.front.tf.loops.values import PASS_THROUGH, NotUnrolled, Value
from core.front.tf.tf_subgraph import tensor_key, tensor_ref

log = logging.getLogger("mo_core")

MAX_ITERATIONS = 1000
MAX_NODES = 200_000      # copied nodes per loop
_NO_VALUE = {"NoOp", "Assert", "ControlTrigger", "PrintV2"}


class _Frame:
    """One loop: its nodes (`members`, in an order where inputs come first), unrolled."""

    def __init__(self, rewriter: "Rewriter", members: list[str]):
        self.rw, self.members = rewriter, members
        self.member_set = set(members)
        nodes = rewriter.nodes
        conds = [n for n in members if nodes[n].op == "LoopCond"]
        if len(conds) != 1:
            raise NotUnrolled("it has {} LoopCond nodes".format(len(conds)))
        self.cond = conds[0]
        self.merges = [n for n in members if nodes[n].op in ("Merge", "RefMerge")]
        self.cond_part = self._ancestors(self.cond)
        self.emitted = 0

    def _ancestors(self, name: str) -> set:
        seen, stack = set(), [name]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if self.rw.nodes[n].op in ("Merge", "RefMerge", "Enter", "RefEnter"):
                continue
            stack.extend(m for m in (tensor_key(t.lstrip("^"))[0] for t in self.rw.nodes[n].input)
                         if m in self.member_set)
        return seen

    def _merge_inputs(self, name: str) -> tuple[str, str]:
        """(the Enter's input tensor, the NextIteration's input tensor) of a loop variable."""
        nodes = self.rw.nodes
        data = [t for t in nodes[name].input if not t.startswith("^")]
        enter = [t for t in data if nodes[tensor_key(t)[0]].op in ("Enter", "RefEnter")]
        nxt = [t for t in data if nodes[tensor_key(t)[0]].op in ("NextIteration", "RefNextIteration")]
        if len(enter) != 1 or len(nxt) != 1 or len(data) != 2:
            raise NotUnrolled("its Merge '{}' is not one Enter and one NextIteration".format(name))
        enter_node, next_node = nodes[tensor_key(enter[0])[0]], nodes[tensor_key(nxt[0])[0]]
        return enter_node.input[0], next_node.input[0]

    def unroll(self) -> dict:
        """{Exit node name: its final Value}."""
        nodes = self.rw.nodes
        state = {m: self.rw.outside(self._merge_inputs(m)[0]) for m in self.merges}
        for k in range(MAX_ITERATIONS + 1):
            values: dict = {}
            for name in self.members:
                if name in self.cond_part:
                    self._evaluate(name, k, values, state)
            go = values[self.cond][0].const
            if go is None or go.size != 1:
                shapes = any(isinstance(v, list) and v[0].partial for v in values.values())
                raise NotUnrolled("its condition is no counter against a constant: it reads " + (
                    "a dimension the graph leaves unknown (give the input's shape with --input_shape)" if shapes
                    else "the model's data"))
            if not bool(go.reshape(-1)[0]):
                return self._exits(state)
            if k == MAX_ITERATIONS:
                break
            for name in self.members:
                if name not in values and nodes[name].op not in ("Exit", "RefExit"):
                    self._evaluate(name, k, values, state)
            state = {m: self._value(self._merge_inputs(m)[1], values) for m in self.merges}
        raise NotUnrolled("it runs more than {} iterations".format(MAX_ITERATIONS))

    def _exits(self, state: dict) -> dict:
        out = {}
        nodes = self.rw.nodes
        for name, node in self.rw.nodes.items():
            if node.op not in ("Exit", "RefExit") or not node.input:
                continue
            switch = tensor_key(node.input[0])[0]
            if switch not in self.member_set:
                continue
            merge = tensor_key(nodes[switch].input[0])[0]
            if nodes[switch].op not in ("Switch", "RefSwitch") or merge not in state:
                raise NotUnrolled("its Exit '{}' does not read a loop variable's Switch".format(name))
            out[name] = state[merge]
        return out

    def _value(self, text: str, values: dict) -> Value:
        name, port = tensor_key(text)
        if name in self.member_set:
            ports = values.get(name)
            if ports is None:
                raise NotUnrolled("'{}' is read before it is computed".format(name))
            return ports[port] if isinstance(ports, list) else ports(port)
        return self.rw.outside(text)

    def _evaluate(self, name: str, k: int, values: dict, state: dict) -> None:
        node = self.rw.nodes[name]
        op = node.op
        if op in _NO_VALUE:
            values[name] = [Value()]
            return
        if op in ("Merge", "RefMerge"):
            values[name] = [state[name], Value(const=np.array(1 if k else 0, np.int32),
                                                 name="{}/value_index/unrolled_{}".format(name, k))]
            return
        data = [t for t in node.input if not t.startswith("^")]
        inputs = [self._value(t, values) for t in data]
        if op in PASS_THROUGH:
            if not inputs:
                raise NotUnrolled("'{}' ({}) has no input".format(name, op))
            values[name] = [inputs[0], inputs[0]]
            return
        if op == "Const":
            values[name] = [self.rw.hoisted(node)]
            return
        listed = self.rw.list_op(node, inputs, "{}/unrolled_{}".format(name, k))
        if listed is not None:
            values[name] = listed
            return
        folded = self.rw.folded(node, inputs, "{}/unrolled_{}".format(name, k))
        if folded is not None:
            values[name] = [folded]
            return
        self.emitted += 1
        if self.emitted > MAX_NODES:
            raise NotUnrolled("its copies would pass {} nodes".format(MAX_NODES))
        clone = self.rw.emit(node.op, "{}/unrolled_{}".format(name, k), [self.rw.ref(v, name) for v in inputs],
                             node)
        values[name] = lambda port, c=clone: Value(ref=tensor_ref(c, port))


def frames(graph_def) -> dict[str, tuple]:
    """Node name -> its frame (a tuple of loop names, () outside every loop), as TensorFlow
    assigns them: an Enter opens its frame_name, an Exit returns to the parent, any other
    node is where its first input is. {} where the graph has a cycle that no loop explains."""
    nodes = {n.name: n for n in graph_def.node}
    deps = {}
    for n in graph_def.node:
        ins = [tensor_key(t.lstrip("^"))[0] for t in n.input]
        if n.op in ("Merge", "RefMerge"):
            ins = [i for i in ins if i in nodes and nodes[i].op not in ("NextIteration", "RefNextIteration")]
        deps[n.name] = [i for i in ins if i in nodes]
    readers: dict = {name: [] for name in nodes}
    for name, ins in deps.items():
        for i in ins:
            readers[i].append(name)
    pending = {name: len(ins) for name, ins in deps.items()}
    ready = [name for name, count in pending.items() if count == 0]
    frame: dict[str, tuple] = {}
    while ready:
        name = ready.pop()
        n = nodes[name]
        first = [tensor_key(t)[0] for t in n.input if not t.startswith("^") and tensor_key(t)[0] in frame] \
            or [i for i in deps[name] if i in frame]
        parent = frame[first[0]] if first else ()
        if n.op in ("Enter", "RefEnter"):
            frame[name] = parent + (n.attr["frame_name"].s.decode("utf-8", "replace"),)
        elif n.op in ("Exit", "RefExit"):
            frame[name] = parent[:-1]
        else:
            frame[name] = parent
        for r in readers[name]:
            pending[r] -= 1
            if pending[r] == 0:
                ready.append(r)
    return frame if len(frame) == len(nodes) else {}


def unroll_loops(graph_def, keep=None, input_shapes: dict | None = None) -> tuple[set, list]:
    """Unrolls every loop this module can (innermost first). `keep(node)`: true for a node the user's offload
    patterns name - its loop stays whole, for TensorFlow to run. `input_shapes`: {Placeholder: dims} the user gave
    (--input_shape), over the graph's own. Returns the model outputs (nodes nothing read) that the copies now read
    - a TF1 loop's final state is its Exit, which the last copy's node now is: they stay outputs
    (core/front/tf/builder.py) - and [(loop, why it stays whole, its node names)] of the loops left whole that no
    offload pattern named: the front end warns of those still there after the sub-graph replacements (an OD API
    export's pre- and post-processing loops are replaced)."""
    outputs, refused, left = set(), set(), []
    while True:
        frame_of = frames(graph_def)
        loops = {f for f in frame_of.values() if f} - refused
        inner = [f for f in loops if not any(g != f and g[:len(f)] == f for g in frame_of.values())]
        if not inner:
            return outputs, left
        loop = sorted(inner)[0]
        order = [n.name for n in _in_order(graph_def) if frame_of[n.name] == loop]
        rewriter = Rewriter(graph_def, input_shapes or {})
        named = [name for name in order if keep is not None and keep(rewriter.nodes[name])]
        if named:
            log.info("The while loop '%s' is kept whole: the offload patterns name its node '%s'.", loop[-1], named[0])
            refused |= _with_outer(loop)
            continue
        try:
            exits = _Frame(rewriter, order).unroll()
            outputs |= _apply(graph_def, rewriter, set(order), exits)
        except NotUnrolled as why:
            left.append((loop[-1], str(why), set(order)))
            refused |= _with_outer(loop)
            continue
        log.info("Unrolled the while loop '%s' (%d nodes added).", loop[-1], len(rewriter.new_nodes))


def _with_outer(loop: tuple) -> set:
    """The loop and those it is in (none of them can be unrolled while it stays)."""
    return {loop[:i] for i in range(1, len(loop) + 1)}


def _in_order(graph_def) -> list:
    """The nodes in an order where a node's inputs come first (NextIteration back edges apart)."""
    nodes = {n.name: n for n in graph_def.node}
    order, seen = [], set()
    for root in graph_def.node:
        stack = [(root.name, False)]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                order.append(nodes[name])
                continue
            if name in seen:
                continue
            seen.add(name)
            stack.append((name, True))
            n = nodes[name]
            for t in n.input:
                i = tensor_key(t.lstrip("^"))[0]
                if i in nodes and i not in seen and not (
                        n.op in ("Merge", "RefMerge") and nodes[i].op in ("NextIteration", "RefNextIteration")):
                    stack.append((i, False))
    return order


def _apply(graph_def, rw: Rewriter, members: set, exits: dict) -> set:
    """The loop's nodes replaced: its Exits by their final values, list readers after it by what they read; the
    names of the outputs of the model among them that copies now read."""
    replaced = {}
    list_exits = {name: value for name, value in exits.items() if value.items is not None or value.handle}
    for name, value in exits.items():
        if name not in list_exits:
            replaced[name] = value
    for node in graph_def.node:  # what reads a list the loop gave back: a Stack, a Gather, a Length of it
        if node.name in members or node.name in exits:
            continue
        data = [t for t in node.input if not t.startswith("^")]
        if not any(tensor_key(t)[0] in list_exits for t in data):
            continue
        if node.op not in LIST_OPS:
            raise NotUnrolled("'{}' ({}) reads the list the loop gives back".format(node.name, node.op))
        for t in data:
            key = tensor_key(t)
            if key[0] in list_exits:
                rw.memo[key] = list_exits[key[0]]
        rw.memo.pop((node.name, 0), None)
        value = rw.list_op(node, [rw.outside(t) for t in data], node.name + "/unrolled")[0]
        if value.items is not None or value.handle:
            raise NotUnrolled("'{}' ({}) makes another list of the loop's".format(node.name, node.op))
        replaced[node.name] = value
    for name, value in replaced.items():
        if value.ref is None:
            rw.ref(value, name)  # (a folded value: its Const)
    # a copy that computes a replaced node's value takes its name (a TF1 model's `rnn/while/Exit_3`, an output the
    # user knows, names the layer that computes it); other values are an Identity of that name
    emitted = {n.name for n in rw.new_nodes}
    renamed = {}
    for name, value in replaced.items():
        source, port = tensor_key(value.ref)
        if port == 0 and source in emitted and source not in renamed:
            renamed[source] = name
    read_before = read_names(graph_def.node) | emitted
    taking = {name: node for node in rw.new_nodes for source, name in renamed.items() if node.name == source}
    kept = []
    for node in graph_def.node:
        if node.name in taking:  # (the copy where the node was: the model's outputs keep their order)
            kept.append(taking[node.name])
            continue
        if node.name in members or node.name in list_exits:
            continue
        if node.name in replaced:
            dtype = next(node.attr[key].type for key in ("element_dtype", "dtype", "T") if key in node.attr)
            node.op = "Identity"
            node.input[:] = [replaced[node.name].ref]
            for key in list(node.attr):
                del node.attr[key]
            node.attr["T"].type = dtype
        node.input[:] = [t for t in node.input if not (t.startswith("^") and (t[1:] in members or
                                                                             t[1:] in list_exits))]
        kept.append(node)
    added = [node for node in rw.new_nodes if node.name not in renamed]
    for node in taking.values():
        node.name = renamed[node.name]
    for node in kept + added:
        for k, text in enumerate(node.input):
            source, port = tensor_key(text.lstrip("^"))
            if source in renamed:
                node.input[k] = ("^" if text.startswith("^") else "") + tensor_ref(renamed[source], port)
    kept = without_orphans(kept + added, read_before | set(renamed.values()))
    del graph_def.node[:]
    graph_def.node.extend(kept)
    return {name for name in renamed.values() if name not in read_before} & read_names(kept)

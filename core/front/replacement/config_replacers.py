"""Replacers driven by a configuration file (core/front/custom_config.py), with the
reference guide's names:

- FrontReplacementFromConfigFileSubGraph: `replacement_id` names the description
  it implements; for every instance matched (scope or points) the default
  `replace_sub_graph` calls `generate_sub_graph(graph, match)`,
  `input_edges_match`, `output_edges_match` and removes `nodes_to_remove` (all the
  matched nodes), `match` being a SubgraphMatch (core/front/replacement/match.py).
- FrontReplacementFromConfigFileOp: used for a description that names an `op` and
  has no class of its own: each instance becomes one node of that op with the
  description's `custom_attributes`, which are also written to the layer's
  <data> in the IR (as legacy MO made them the op's backend attributes); input
  tensor i goes to its input port i, output i comes from its output port i.
- FrontReplacementFromConfigFileGeneral (match_kind "general"):
  `transform_graph(graph, replacement_descriptions)` gets the description's
  custom_attributes and may change the graph freely.
"""
from __future__ import annotations

import os

from core.errors import Error
from core.front.replacement.match import matches_of
from core.front.replacement.replacers import FrontReplacementPattern, FrontReplacementSubgraph
from core.ops.op import Op, SchemaAttrs

DESCRIPTIONS = "custom_replacements"   # graph.graph key: {id: CustomReplacementDescriptor}


class _FromConfigFile:
    """A replacer that implements the configuration files' descriptions of one id."""
    _registers_when_set = "replacement_id"
    replacement_id: str | None = None

    def descriptions(self, graph) -> list:
        desc = graph.graph.get(DESCRIPTIONS, {}).get(self.replacement_id)
        return [desc] if desc is not None else []


class FrontReplacementFromConfigFileSubGraph(_FromConfigFile, FrontReplacementSubgraph):
    _api_base = True

    def find_and_replace_pattern(self, graph):
        for desc in self.descriptions(graph):
            for match in matches_of(graph, desc):
                if all(n in graph for n in match.matched_nodes_names()):
                    self.replace_sub_graph(graph, match)


class FrontReplacementFromConfigFileOp(FrontReplacementFromConfigFileSubGraph):
    """The descriptions with an `op` that no class of their id implements (the
    runner gives them to this replacer)."""

    replacement_id = "FrontReplacementFromConfigFileOp"

    def __init__(self, descriptions=()):
        self.for_descriptions = list(descriptions)

    @classmethod
    def runnable(cls) -> bool:
        return False  # run by the runner for the descriptions it is given, never by registration

    def descriptions(self, graph):
        return list(self.for_descriptions)

    def generate_sub_graph(self, graph, match):
        desc = match.custom_replacement_desc
        try:
            op_class = Op.get_op_class_by_name(desc.op)
        except KeyError:
            raise Error("The op '{}' of {} is not a known operation. Define it (an Op subclass with op = '{}' in the "
                        "ops/ folder of --extensions), or write a replacer class with replacement_id = '{}'.",
                        desc.op, desc.where(), desc.op, desc.id) from None
        attrs = dict(desc.custom_attributes)
        reserved = sorted(set(attrs) & _NOT_DATA)
        if reserved:
            raise desc.invalid("custom_attributes may not set {} (the layer's {} come from its op '{}')".format(
                ", ".join(repr(k) for k in reserved), "identity and type", desc.op))
        attrs["name"] = _common_scope(graph, match) or desc.op
        node = op_class(graph, attrs).add_node()
        _write_custom_attributes(node, desc.custom_attributes)
        if node.soft_get("infer") is None and graph.graph.get("framework") == "tf":
            # no shape function: TensorFlow computes the shapes from the nodes replaced (core/front/tf/fallback.py)
            from core.front.tf.offload import match_subgraph
            node["tf_subgraph"] = match_subgraph(graph, match)
        return {"new_node": node}

    def input_edges_match(self, graph, match, new_sub_graph):
        node = new_sub_graph["new_node"]
        return {(consumer.id, port): (node.id, i)
                for i in range(match.inputs_count()) for consumer, port in match.input_nodes(i)}

    def output_edges_match(self, graph, match, new_sub_graph):
        node = new_sub_graph["new_node"]
        result = {}
        for i in range(match.outputs_count()):
            producer, port = match.output_node(i)
            result[(producer.id, port)] = (node.id, i)
        return result


# what the <layer> element itself holds, or the graph's own bookkeeping: never <data>
_NOT_DATA = {"id", "name", "type", "precision", "version", "op", "kind", "infer"}


def _write_custom_attributes(node, custom: dict) -> None:
    """The description's static attributes go to the IR's <data> after the op's own
    backend attributes. A built-in IR type keeps its schema's attributes only (the
    kernels read exactly those; the values came in through the node's attributes)."""
    items = node.soft_get("backend_attrs") or []
    if isinstance(items, SchemaAttrs):
        return
    have = {item[0] if isinstance(item, tuple) else item for item in items}
    extra = [key for key in custom if key not in have]
    if extra:
        node["backend_attrs"] = list(items) + extra


def _common_scope(graph, match) -> str:
    """The longest '/'-separated name prefix of the matched nodes (the block's scope)."""
    names = [str(graph.nodes[n].get("name", n)) for n in match.matched_nodes_names()]
    prefix = os.path.commonprefix([n.split("/") for n in names]) if names else []
    return "/".join(prefix)


class FrontReplacementFromConfigFileGeneral(_FromConfigFile, FrontReplacementPattern):
    _api_base = True

    def find_and_replace_pattern(self, graph):
        for desc in self.descriptions(graph):
            self.transform_graph(graph, desc.custom_attributes)

    def transform_graph(self, graph, replacement_descriptions: dict):
        raise NotImplementedError

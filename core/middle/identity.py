"""Removes ops that do nothing at inference: Dropout, Caffe Split copies, Silence."""
from core.graph.graph import carry_output


def remove_identities(graph):
    for node in graph.op_nodes(op="Silence"):
        graph.remove_node(node.id)
    for node in graph.op_nodes(op="Identity"):
        src = node.in_node(0)
        for port, out in list(node.out_nodes().items()):
            for _, consumer, key, attrs in list(graph.out_edges(out.id, keys=True, data=True)):
                graph.add_edge(src.id, consumer, **attrs)
            carry_output(src, out)
            graph.remove_node(out.id)
        graph.remove_node(node.id)

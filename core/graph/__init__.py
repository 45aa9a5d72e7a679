from core.graph.graph import Graph, Node  # noqa: F401

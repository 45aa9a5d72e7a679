"""The replacement API itself: the front form of the graph and back, the pattern
matcher (predicates, induced matching, multi-edges), the op replacer's output
mapping, the order and scope of replacers, and what a faulty replacer gets: an
[ ERROR ] naming its class, file and line (in-process and through the CLI)."""
import os

import numpy as np
import pytest

from core.errors import Error
from core.front.replacement import FrontReplacementPattern, find_pattern_matches
from core.front.replacement.view import from_front_view, to_front_view
from core.graph.graph import Graph, create_edge, replace_node
from tests.replacement.caffe_nets import HARD_SWISH, HSWISH_BLOCKS
from tests.replacement.conftest import EXT
from tests.support import assert_clean_failure, convert_api, make_caffemodel, run_cli, write_text


@pytest.fixture(scope="module")
def hard_swish(tmp_path_factory):
    d = tmp_path_factory.mktemp("api_nets")
    proto = write_text(str(d / "hs.prototxt"), HARD_SWISH)
    weights = str(d / "hs.caffemodel")
    make_caffemodel(proto, weights, seed=1)
    blocks = write_text(str(d / "blocks.prototxt"), HSWISH_BLOCKS)
    blocks_weights = str(d / "blocks.caffemodel")
    make_caffemodel(blocks, blocks_weights, seed=2)
    return proto, weights, blocks, blocks_weights


def front_graph(ops, edges):
    """A front-form graph: ops {id: attrs}, edges [(src, dst, out, in)]."""
    graph = Graph()
    for node_id, attrs in ops.items():
        graph.add_node(node_id, kind="op", name=node_id, **attrs)
    for src, dst, out, inp in edges:
        graph.add_edge(src, dst, out=out, **{"in": inp})
    graph.graph["front_view"] = True
    return graph


# --- the front form ---------------------------------------------------------------------
def test_front_view_round_trip_keeps_the_graph(hard_swish):
    import core.front.caffe.extractors  # noqa: F401  (registers the standard extractors)
    from core.front.caffe.builder import build_graph
    from core.front.caffe.extract import extract_all
    from core.front.caffe.loader import load_caffemodel, load_prototxt
    proto, weights, blocks, blocks_weights = hard_swish
    graph = build_graph(load_prototxt(blocks), load_caffemodel(blocks_weights))
    extract_all(graph)

    def summary(g):
        nodes = {n: (a["kind"], a.get("op"), a.get("name"), bool(a.get("is_output"))) for n, a in g.nodes(data=True)}
        edges = sorted((u, v, tuple(sorted(a.items()))) for u, v, a in g.edges(data=True))
        return nodes, edges
    before = summary(graph)
    to_front_view(graph)
    kinds = {a["kind"] for _, a in graph.nodes(data=True)}
    assert kinds == {"op"}
    conv = graph.op_by_name("conv2")
    assert conv.in_node(0).name == "act1/mul"          # the producer, not a tensor
    assert conv.in_node(1).op == "Const" and conv.in_node(1).value.size == 6 * 8 * 3 * 3
    assert graph.op_by_name("conv3").out_node(0).op == "OpOutput"
    from_front_view(graph)
    assert summary(graph) == before


def test_unknown_layers_show_their_framework_type_while_replacers_run(hard_swish):
    import core.front.caffe.extractors  # noqa: F401  (registers the standard extractors)
    from core.front.caffe.builder import build_graph
    from core.front.caffe.extract import extract_all
    from core.front.caffe.loader import load_caffemodel, load_prototxt
    proto, weights, _, _ = hard_swish
    graph = build_graph(load_prototxt(proto), load_caffemodel(weights))
    extract_all(graph, report_unsupported=False)
    assert not graph.op_by_name("hswish").has("op")
    to_front_view(graph)
    assert graph.op_by_name("hswish").op == "HardSwish"
    from_front_view(graph)
    assert not graph.op_by_name("hswish").has("op")  # still unknown: reported after the replacers


# --- the pattern matcher ----------------------------------------------------------------
def test_pattern_predicates_arrays_and_attribute_lists():
    graph = front_graph({"a": dict(op="Power", power=2.0), "b": dict(op="Power", power=0.5),
                         "c": dict(op="Pool", kernel=np.array([3, 3]))},
                        [("a", "b", 0, 0), ("b", "c", 0, 0)])
    nodes = [("p", dict(op="Power", power=lambda v: v is not None and v > 1)), ("q", dict(op="Power"))]
    matches = find_pattern_matches(graph, nodes, [("p", "q", {"in": 0})])
    assert [{k: v.id for k, v in m.items()} for m in matches] == [{"p": "a", "q": "b"}]
    # node_attrs restricts the comparison to the names listed
    matches = find_pattern_matches(graph, [("x", dict(op="Power", power=7.0))], [], node_attrs=["op"])
    assert sorted(m["x"].id for m in matches) == ["a", "b"]
    assert [m["x"].id for m in find_pattern_matches(graph, [("x", dict(kernel=np.array([3, 3])))], [])] == ["c"]
    assert find_pattern_matches(graph, [("x", dict(kernel=np.array([3, 2])))], []) == []


def test_pattern_matching_is_induced_and_counts_multi_edges():
    # b reads a twice (x * x); a pattern with one edge a->b does not match it (induced, as the reference)
    graph = front_graph({"a": dict(op="Input"), "b": dict(op="Mul")}, [("a", "b", 0, 0), ("a", "b", 0, 1)])
    one = find_pattern_matches(graph, [("x", dict(op="Input")), ("y", dict(op="Mul"))], [("x", "y", {"in": 0})])
    assert one == []
    two = find_pattern_matches(graph, [("x", dict(op="Input")), ("y", dict(op="Mul"))],
                               [("x", "y", {"in": 1}), ("x", "y", {"in": 0})])
    assert len(two) == 1
    wrong = find_pattern_matches(graph, [("x", dict(op="Input")), ("y", dict(op="Mul"))],
                                 [("x", "y", {"in": 0}), ("x", "y", {"in": 0})])
    assert wrong == []


def test_pattern_with_an_unknown_alias_is_an_error():
    graph = front_graph({"a": dict(op="X")}, [])
    with pytest.raises(Error, match="names 'zz', which is not among the pattern's nodes"):
        find_pattern_matches(graph, [("x", dict(op="X"))], [("x", "zz")])


def test_replace_node_and_create_edge():
    graph = front_graph({"a": dict(op="A"), "b": dict(op="B"), "c": dict(op="C"), "n": dict(op="N")},
                        [("a", "b", 0, 0), ("b", "c", 0, 1)])
    from core.graph.graph import Node
    create_edge(Node(graph, "a"), Node(graph, "n"), 0, 0)
    replace_node(Node(graph, "b"), Node(graph, "n"))
    assert "b" not in graph
    assert [(u, v, d) for u, v, d in graph.edges(data=True)] == [("a", "n", {"out": 0, "in": 0}),
                                                                  ("n", "c", {"out": 0, "in": 1})]


# --- replacers in conversions -----------------------------------------------------------
def write_ext(root, relpath, text) -> str:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


HEADER = ("from core.front.replacement import FrontReplacementOp\n"
          "from core.ops.activation import Power\n\n\n")


def hs_replacer(tmp_path, body: str, folder: str = "front", imports: str = "") -> str:
    """An extension dir with an op replacer of HardSwish whose replace_op is `body`; the file's path."""
    return write_ext(tmp_path / "ext", folder + "/hs.py", HEADER + imports + (
        "class HS(FrontReplacementOp):\n"
        "    op = 'HardSwish'\n\n"
        "    def replace_op(self, graph, node):\n") + body)


def conversion_error(hard_swish, tmp_path) -> str:
    proto, weights, _, _ = hard_swish
    with pytest.raises(Error) as info:
        convert_api(input_model=weights, input_proto=proto, extensions=str(tmp_path / "ext"))
    return str(info.value)


def test_replace_op_returning_too_few_outputs_names_the_replacer(hard_swish, tmp_path):
    path = hs_replacer(tmp_path, "        return []\n")
    text = conversion_error(hard_swish, tmp_path)
    assert "replace_op returned 0 output(s) for 'hswish'" in text and "HS in {}".format(path) in text


def test_replace_op_returning_the_node_it_replaces(hard_swish, tmp_path):
    hs_replacer(tmp_path, "        return [node.id]\n")
    text = conversion_error(hard_swish, tmp_path)
    assert "replace_op of 'hswish' returned the node it replaces" in text


def test_replace_op_naming_a_port_the_new_node_lacks(hard_swish, tmp_path):
    hs_replacer(tmp_path, "        power = Power(graph, dict(scale=2.0)).create_node([node.in_node(0)])\n"
                          "        return [(power.id, 1)]\n")
    text = conversion_error(hard_swish, tmp_path)
    assert "Layer 'Power' (Power) has one output, but its output port 1 is read by other nodes" in text


def test_a_replacer_that_raises_is_named_with_its_file_and_line(hard_swish, tmp_path):
    path = hs_replacer(tmp_path, "        scale = node.alpha * 2\n"
                                 "        return [Power(graph, dict(scale=scale)).create_node([node.in_node(0)]).id]\n",
                       folder="front/caffe")
    text = conversion_error(hard_swish, tmp_path)
    assert "Exception occurred during running replacer HS in {}, line 9: AttributeError:".format(path) in text
    assert "has no attribute 'alpha'" in text


def test_a_replacer_that_exits_is_an_error(hard_swish, tmp_path):
    path = hs_replacer(tmp_path, "        sys.exit(3)\n", imports="import sys\n\n\n")
    assert "The replacer HS in {}, line 12 called sys.exit(3)".format(path) in conversion_error(hard_swish, tmp_path)


def test_cli_user_replacement_that_raises_is_a_clean_error(hard_swish, tmp_path):
    proto, weights, _, _ = hard_swish
    path = hs_replacer(tmp_path, "        raise ValueError('no HardSwish today')\n")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--output_dir",
                                   str(out), "--extensions", str(tmp_path / "ext"))
    assert_clean_failure(code, stdout, stderr, str(out), "Exception occurred during running replacer HS in",
                         "{}, line 9: ValueError: no HardSwish today".format(path))


def test_removing_a_node_that_is_still_read_is_an_error(hard_swish, tmp_path):
    proto, weights, _, _ = hard_swish
    write_ext(tmp_path / "ext", "front/pattern.py", (
        "from core.front.replacement import FrontReplacementSubgraph\n\n\n"
        "class DropConv(FrontReplacementSubgraph):\n"
        "    def pattern(self):\n"
        "        return dict(nodes=[('conv', dict(op='Convolution', name='conv1'))], edges=[])\n"))
    with pytest.raises(Error, match="Node 'conv1' is removed by the replacement, but 'hswish' .* still reads its "
                                    "output 0"):
        convert_api(input_model=weights, input_proto=proto, extensions=str(tmp_path / "ext"))


def test_replacers_apply_to_their_framework_only_and_can_be_disabled(hard_swish, tmp_path):
    """A replacer under front/tf/ does not run on a Caffe model; `enabled = False` turns one off."""
    proto, weights, _, _ = hard_swish
    body = ("class HS(FrontReplacementOp):\n"
            "    op = 'HardSwish'\n{}\n"
            "    def replace_op(self, graph, node):\n"
            "        return [Power(graph, dict(name='tf_replacer_ran')).create_node([node.in_node(0)]).id]\n")
    write_ext(tmp_path / "tf_ext", "front/tf/hs.py", HEADER + body.format(""))
    write_ext(tmp_path / "off_ext", "front/hs.py", HEADER + body.format("    enabled = False\n"))
    for ext in ("tf_ext", "off_ext"):
        with pytest.raises(Error) as info:
            convert_api(input_model=weights, input_proto=proto, extensions=str(tmp_path / ext))
        assert info.value.faq == 44 and "HardSwish" in str(info.value)


def test_extensions_count_for_one_conversion_only(hard_swish):
    proto, weights, _, _ = hard_swish
    before = list(FrontReplacementPattern.registered)
    convert_api(input_model=weights, input_proto=proto, extensions=os.path.join(EXT, "hard_swish"))
    assert FrontReplacementPattern.registered == before
    with pytest.raises(Error, match="HardSwish"):
        convert_api(input_model=weights, input_proto=proto)


def test_replacers_run_config_first_then_patterns_then_ops(hard_swish, tmp_path):
    """The order the runner documents (core/front/replacement/runner.py), seen in the names it leaves."""
    from core.front.replacement.runner import plan
    from core.extensions import load_extension_dirs, registries_snapshot, restore_registries
    from core.front.custom_config import parse_descriptions
    write_ext(tmp_path / "ext", "front/a_op.py", HEADER + (
        "class AOp(FrontReplacementOp):\n"
        "    op = 'HardSwish'\n\n"
        "    def replace_op(self, graph, node):\n"
        "        return None\n"))
    write_ext(tmp_path / "ext", "front/b_pattern.py", (
        "from core.front.replacement import FrontReplacementSubgraph, FrontReplacementFromConfigFileSubGraph\n\n\n"
        "class BPattern(FrontReplacementSubgraph):\n"
        "    def pattern(self):\n"
        "        return dict(nodes=[], edges=[])\n\n\n"
        "class CConfig(FrontReplacementFromConfigFileSubGraph):\n"
        "    replacement_id = 'C'\n"))
    saved = registries_snapshot()
    try:
        load_extension_dirs([str(tmp_path / "ext")])
        descs = parse_descriptions([{"id": "C", "match_kind": "scope", "instances": ["x"]}], "mem.json")
        names = [type(r).__name__ for r in plan("caffe", descs)]
        assert names[0] == "CConfig" and names.index("BPattern") < names.index("AOp")
        assert "CConfig" not in [type(r).__name__ for r in plan("caffe", [])]  # no description, not run
    finally:
        restore_registries(saved)


def test_op_create_node_needs_the_front_form():
    from core.ops.activation import Power
    graph = Graph()
    with pytest.raises(Error, match="create_node connects op nodes directly"):
        Power(graph, {}).create_node([])


ORDERED = HEADER + (
    "from core.front.replacement import FrontReplacementSubgraph\n\n\n"
    "class HS(FrontReplacementOp):\n"
    "    op = 'HardSwish'\n\n"
    "    def replace_op(self, graph, node):\n"
    "        return [Power(graph, dict(name='hs_power', scale=2.0)).create_node([node.in_node(0)]).id]\n\n\n"
    "class RenamePower(FrontReplacementSubgraph):\n"
    "    def pattern(self):\n"
    "        return dict(nodes=[('p', dict(op='Power', name='hs_power'))], edges=[])\n\n"
    "    def replace_sub_graph(self, graph, match):\n"
    "        graph.nodes[match['p'].id]['name'] = 'renamed_after_hs'\n"
    "{demand}")


@pytest.mark.parametrize("demand, expected", [
    ("", "hs_power"),  # default order: patterns before op replacers, so the pattern finds nothing
    ("\n    def run_after(self):\n        return [HS]\n", "renamed_after_hs"),
])
def test_run_after_lets_a_pattern_see_what_an_op_replacer_made(hard_swish, tmp_path, demand, expected):
    proto, weights, _, _ = hard_swish
    write_ext(tmp_path / "ext", "front/ordered.py", ORDERED.format(demand=demand))
    network = convert_api(input_model=weights, input_proto=proto, extensions=str(tmp_path / "ext"),
                          disable_fusing=True)
    names = {layer.name for layer in network.layers}
    assert expected in names and ({"hs_power", "renamed_after_hs"} - {expected}).isdisjoint(names)


def test_run_before_and_after_order_the_plan_stably(tmp_path):
    from core.extensions import load_extension_dirs, registries_snapshot, restore_registries
    from core.front.replacement.runner import plan
    write_ext(tmp_path / "ext", "front/order.py", (
        "from core.front.replacement import FrontReplacementOp, FrontReplacementSubgraph\n\n\n"
        "class P1(FrontReplacementSubgraph):\n"
        "    def pattern(self):\n        return dict(nodes=[], edges=[])\n\n"
        "    def run_after(self):\n        return [P3]\n\n\n"
        "class P2(FrontReplacementSubgraph):\n"
        "    def pattern(self):\n        return dict(nodes=[], edges=[])\n\n\n"
        "class P3(FrontReplacementSubgraph):\n"
        "    def pattern(self):\n        return dict(nodes=[], edges=[])\n\n\n"
        "class Op1(FrontReplacementOp):\n"
        "    op = 'Nothing'\n\n"
        "    def run_before(self):\n        return [P2]\n\n"
        "    def replace_op(self, graph, node):\n        return None\n"))
    saved = registries_snapshot()
    try:
        load_extension_dirs([str(tmp_path / "ext")])
        names = [type(r).__name__ for r in plan("caffe", []) if type(r).__module__.endswith("order")]
        # default P1 P2 P3 Op1; P1 after P3, Op1 before P2; otherwise the earliest first
        assert names == ["P3", "P1", "Op1", "P2"]
    finally:
        restore_registries(saved)


@pytest.mark.parametrize("body, message", [
    ("    def run_after(self):\n        return [B]\n\n\nclass B(A):\n"
     "    def run_after(self):\n        return [A]\n",
     r"run_after\(\)/run_before\(\) demands form a cycle among: A in .*cycle.py; B in .*cycle.py"),
    ("    def run_after(self):\n        return 'B'\n",
     r"run_after\(\) of the replacer A in .*cycle.py must return a list of replacer classes, got 'B'"),
    ("    def run_before(self):\n        raise KeyError('x')\n",
     r"run_before\(\) of the replacer A in .*cycle.py, line \d+ raised KeyError"),
])
def test_bad_ordering_demands_are_errors_naming_the_replacers(hard_swish, tmp_path, body, message):
    proto, weights, _, _ = hard_swish
    write_ext(tmp_path / "ext", "front/cycle.py", (
        "from core.front.replacement import FrontReplacementSubgraph\n\n\n"
        "class A(FrontReplacementSubgraph):\n"
        "    def pattern(self):\n        return dict(nodes=[], edges=[])\n\n" + body))
    with pytest.raises(Error, match=message):
        convert_api(input_model=weights, input_proto=proto, extensions=str(tmp_path / "ext"))

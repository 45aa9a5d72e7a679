"""ObjectDetectionAPIPreprocessorReplacement (and Preprocessor2): the export's
Preprocessor is a tf.map_fn loop (TensorArrays, while) that resizes each image
and returns the true image shapes; no IR holds it. As the reference did, the loop
goes and the input becomes the resizer's output: `image_tensor` is a float NHWC
input of the resized size (fixed_shape_resizer: its height x width;
keep_aspect_ratio_resizer: the size the resizer makes of --input_shape), feeding
the element-wise normalization the Preprocessor applies before or after resizing
(mul/sub, kept). The true image shapes, which only the post-processing reads,
become a constant of the input size.
"""
from __future__ import annotations

import logging

import numpy as np

from core.errors import Error
from core.front.cli_values import parse_input_shapes
from core.front.replacement import FrontReplacementFromConfigFileSubGraph
from core.front.tf.object_detection.common import by_name, const, consumers, pipeline_config, rewire
from core.graph.graph import Node

log = logging.getLogger("mo_core")
INPUT = "image_tensor"
_CHAIN_OPS = {"Cast", "Mul", "Sub", "Add", "AddV2", "RealDiv", "Maximum", "Minimum", "Identity"}


def resized_size(config, input_shape) -> tuple[int, int]:
    """The resizer's output height and width (the OD API's rules, including its rounding)."""
    r = config.resizer()
    fixed = (r["height"], r["width"]) if r["kind"] == "fixed_shape" else (r["max"], r["max"]) if r["pad"] else None
    if fixed is not None:
        if input_shape is not None and (int(input_shape[1]), int(input_shape[2])) != fixed:
            # the reference's words too: the IR's input is what the resizer makes, whatever came in
            log.warning("The model resizes images to a fixed shape (%d x %d, %s): --input_shape %s is ignored; the "
                        "IR's input is %d x %d, resize images to it.", fixed[0], fixed[1],
                        "fixed_shape_resizer" if r["kind"] == "fixed_shape" else "keep_aspect_ratio_resizer with "
                        "pad_to_max_dimension", [int(d) for d in input_shape], fixed[0], fixed[1])
        return fixed
    if input_shape is None:
        raise Error("The model resizes with keep_aspect_ratio_resizer (min_dimension {}, max_dimension {}): give the "
                    "image size with --input_shape [1,HEIGHT,WIDTH,3]; the IR's input is then the size the resizer "
                    "makes of it.", r["min"], r["max"])
    height, width = int(input_shape[1]), int(input_shape[2])
    if min(height, width) <= 0:
        raise Error("--input_shape {} has no positive height and width.", list(input_shape))
    scale = r["min"] / float(min(height, width))
    size = (int(round(height * scale)), int(round(width * scale)))
    if max(size) > r["max"]:
        scale = r["max"] / float(max(height, width))
        size = (int(round(height * scale)), int(round(width * scale)))
    return size


def _user_input_shape(graph):
    options = graph.graph.get("cmd_params")
    text = getattr(options, "input_shape", None)
    if not text:
        return None
    shapes = parse_input_shapes(text)
    if len(shapes) != 1 or len(shapes[0]) != 4 or int(shapes[0][0]) != 1 or int(shapes[0][3]) != 3:
        nchw = len(shapes) == 1 and len(shapes[0]) == 4 and int(shapes[0][1]) == 3
        raise Error("--input_shape {} must be one NHWC shape [1,HEIGHT,WIDTH,3] for an OD API model (one image of "
                    "3 channels, the layout TensorFlow's image_tensor has){}.", text,
                    ": this one looks like NCHW" if nchw else "")
    return shapes[0]


def _walk(start: tuple[Node, int], allowed) -> tuple[list[Node], tuple[Node, int]]:
    """Follows single element-wise consumers from `start`: (the chain, its last tensor)."""
    chain, tensor = [], start
    while True:
        readers = consumers(*tensor)
        if len(readers) != 1:
            return chain, tensor
        node, _ = readers[0]
        if node.soft_get("op") not in _CHAIN_OPS or not allowed(node) or node in chain:
            return chain, tensor
        chain.append(node)
        tensor = (node, 0)


class ObjectDetectionAPIPreprocessorReplacement(FrontReplacementFromConfigFileSubGraph):
    replacement_id = "ObjectDetectionAPIPreprocessorReplacement"

    def replace_sub_graph(self, graph, match):
        config = pipeline_config(graph, self.replacement_id, ("ssd", "faster_rcnn", "rfcn"))
        members = set(match.matched_nodes_names())
        image = by_name(graph, INPUT)
        if image is None or image.soft_get("op") != "Parameter":
            raise Error("The OD API export has no '{}' input (a Placeholder): mo-core converts exports made with "
                        "exporter.export_inference_graph(input_type='image_tensor').", INPUT)
        height, width = resized_size(config, _user_input_shape(graph))

        def is_loop(node):
            return "/map/" in str(node.soft_get("name"))

        # the normalization before the loop (outside the scope, e.g. the Cast, or in it)
        pre, pre_end = _walk((image, 0), lambda n: not (n.id in members and is_loop(n)))
        gathers = {n: str(graph.nodes[n].get("name")) for n in members
                   if str(graph.nodes[n].get("name")).endswith("/TensorArrayGatherV3")}
        images = [n for n, name in gathers.items() if "map/TensorArrayStack/" in name]
        shapes = [n for n, name in gathers.items() if "map/TensorArrayStack_1/" in name]
        if len(images) != 1:
            raise Error("The Preprocessor of the OD API export has no 'map/TensorArrayStack/TensorArrayGatherV3' (the "
                        "resized images): the support JSON does not fit this export.")
        resized = (Node(graph, images[0]), 0)
        # the normalization after the loop (in the scope): it now reads the input's chain
        post, _ = _walk(resized, lambda n: n.id in members and not is_loop(n))
        rewire(resized, pre_end)
        if shapes:
            true_shape = const(graph, "Preprocessor/true_image_shape", np.array([[height, width, 3]], np.int32))
            rewire((Node(graph, shapes[0]), 0), (true_shape, 0))
        keep = {n.id for n in pre + post}
        keep |= {src for n in pre + post for src in graph.predecessors(n.id)
                 if graph.nodes[src].get("op") == "Const"}  # their constants (mul/x, sub/y)
        graph.remove_nodes_from([n for n in members if n not in keep and n in graph])
        # a new input node: --input_shape named the original image size, the IR's input is the resized one
        attrs = dict(graph.nodes[image.id])
        attrs.update(shape=np.array([1, height, width, 3], dtype=np.int64))
        new_id = graph.unique_id(INPUT)
        graph.add_node(new_id, **attrs)
        for _, dst, key, edge in list(graph.out_edges(image.id, keys=True, data=True)):
            graph.add_edge(new_id, dst, **edge)
        graph.remove_node(image.id)
        graph.graph.setdefault("odapi_input_size", (height, width))


class ObjectDetectionAPIPreprocessor2Replacement(ObjectDetectionAPIPreprocessorReplacement):
    """The newer JSONs' name for the same replacement (points instead of a scope)."""
    replacement_id = "ObjectDetectionAPIPreprocessor2Replacement"

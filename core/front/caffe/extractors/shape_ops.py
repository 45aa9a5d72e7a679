"""Concat, Slice, Split, Reshape, Flatten, Crop, Permute, Tile, Dropout, Silence."""
from core.front.extractor import FrontExtractorOp
from core.ops.identity import Identity, Silence
from core.ops.shape_ops import Concat, Crop, Permute, Reshape, Split, Tile


class ConcatExtractor(FrontExtractorOp):
    op = "Concat"

    @staticmethod
    def extract(node):
        p = node.pb.concat_param
        axis = p.axis if p.HasField("axis") or not p.HasField("concat_dim") else p.concat_dim
        Concat.update_node_stat(node, {"axis": int(axis)})
        return True


class SliceExtractor(FrontExtractorOp):
    op = "Slice"

    @staticmethod
    def extract(node):
        p = node.pb.slice_param
        axis = p.axis if p.HasField("axis") or not p.HasField("slice_dim") else p.slice_dim
        Split.update_node_stat(node, {"axis": int(axis), "slice_point": [int(x) for x in p.slice_point]})
        return True


class SplitExtractor(FrontExtractorOp):
    """Caffe Split only copies its bottom to several tops: an identity."""
    op = "Split"

    @staticmethod
    def extract(node):
        Identity.update_node_stat(node, {})
        return True


class DropoutExtractor(FrontExtractorOp):
    op = "Dropout"

    @staticmethod
    def extract(node):
        Identity.update_node_stat(node, {})
        return True


class SilenceExtractor(FrontExtractorOp):
    op = "Silence"

    @staticmethod
    def extract(node):
        Silence.update_node_stat(node, {})
        return True


class ReshapeExtractor(FrontExtractorOp):
    op = "Reshape"

    @staticmethod
    def extract(node):
        p = node.pb.reshape_param
        Reshape.update_node_stat(node, {"dim": [int(d) for d in p.shape.dim], "axis": int(p.axis),
                                        "num_axes": int(p.num_axes)})
        return True


class FlattenExtractor(FrontExtractorOp):
    op = "Flatten"

    @staticmethod
    def extract(node):
        p = node.pb.flatten_param
        Reshape.update_node_stat(node, {"flatten": True, "axis": int(p.axis), "end_axis": int(p.end_axis)})
        return True


class CropExtractor(FrontExtractorOp):
    op = "Crop"

    @staticmethod
    def extract(node):
        p = node.pb.crop_param
        Crop.update_node_stat(node, {"start_axis": int(p.axis), "crop_offsets": [int(o) for o in p.offset]})
        return True


class PermuteExtractor(FrontExtractorOp):
    op = "Permute"

    @staticmethod
    def extract(node):
        Permute.update_node_stat(node, {"order": [int(o) for o in node.pb.permute_param.order]})
        return True


class TileExtractor(FrontExtractorOp):
    op = "Tile"

    @staticmethod
    def extract(node):
        p = node.pb.tile_param
        Tile.update_node_stat(node, {"axis": int(p.axis), "tiles": int(p.tiles)})
        return True

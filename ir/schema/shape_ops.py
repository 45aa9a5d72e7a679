"""Layout and shape ops: Concat, Split, Reshape, Flatten, Crop, Permute, Tile, Gather."""
from .attribute import Int, Ints
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("Concat", [Int("axis", 1)]),
    LayerSchema(("Split", "Slice"), [Int("axis", 1)], doc="part sizes come from the output ports"),
    LayerSchema("Reshape", [
        Int("axis", 0),
        Ints("dim", None, aliases=("shape",), doc="0 copies an input dim, -1 is inferred"),
        Int("num_axes", -1),
    ]),
    LayerSchema("Flatten", [Int("axis", 1), Int("end_axis", -1)]),
    LayerSchema("Crop", [
        Ints("axis"),
        Ints("offset", None, min=0),
        Ints("dim", None, min=1),
        Ints("crop_begin", None, min=0),
        Ints("crop_end", None, min=0),
    ], doc="three forms: axis+offset (sizes from input 1), axis+offset+dim, axis+crop_begin+crop_end"),
    LayerSchema(("Permute", "Transpose"), [Ints("order")]),
    LayerSchema("Tile", [Int("axis", 1), Int("tiles", min=1)]),
    LayerSchema("Gather", [Int("axis", 0, min=0), Ints("dims", None, min=1),
                           Int("batch_dims", 0, min=0, doc="leading axes of the dictionary and the indices that are "
                                                            "a batch: each batch's indices index its own entries")],
                doc="own type: the entries of a dictionary at the indices input 0 holds, along `axis`; the "
                    "dictionary is the blob 'weights' of dims `dims` (an embedding table) or, without them, input 1 "
                    "(the model's data); output dims: dims[:axis] + input 0's dims[batch_dims:] + dims[axis+1:]"),
]

# The reference guide's InceptionBlock op (extension/ops/InceptionBlock.py) for the
# scope example of these tests: a block a replacement configuration file turns into
# one layer. Unlike InceptionBlock it has a shape function (Caffe has no framework
# fallback to compute it); its attributes come from the file's custom_attributes.
from core.ops.op import Op, copy_shape_infer


class HSwishBlock(Op):
    op = "HSwishBlock"
    enabled = True

    def __init__(self, graph, attrs):
        super().__init__(graph, {
            'type': __class__.op,
            'op': __class__.op,
            'infer': copy_shape_infer,
        }, attrs)

    def supported_attrs(self):
        return ['shift', 'max']

"""CTCGreedyDecoder."""
from .attribute import Bool
from .layer import LayerSchema

SCHEMAS = [LayerSchema("CTCGreedyDecoder", [Bool("ctc_merge_repeated", True)])]

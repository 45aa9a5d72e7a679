"""Normalizations: SoftMax, LogSoftmax, Norm (LRN), Normalize, MVN, LayerNorm, GRN, BatchNormalization."""
from .attribute import Bool, Enum, Float, Int
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema(("SoftMax", "Softmax"), [Int("axis", 1)]),
    LayerSchema("LogSoftmax", [Int("axis", 1)], doc="log(SoftMax) computed as x - max - log(sum(exp(x - max))): "
                "finite where the SoftMax underflows"),
    LayerSchema(("Norm", "LRN"), [
        Float("alpha"),
        Float("beta"),
        Int("local-size", min=1, aliases=("local_size", "size")),
        Enum("region", ("across", "same"), "across"),
        Float("k", 1.0, aliases=("bias",), doc="IR v2 has no k; written only when it is not 1"),
    ]),
    LayerSchema("Normalize", [
        Bool("across_spatial", False),
        Bool("channel_shared", False),
        Float("eps", 1e-10),
    ]),
    LayerSchema("MVN", [
        Bool("across_channels", False),
        Float("eps", 1e-9),
        Bool("normalize_variance", True),
    ]),
    LayerSchema("LayerNorm", [
        Int("axis", doc="the axis normalized (its values at each position of the others)"),
        Float("eps", 1e-5, doc="added to the variance, inside the square root"),
    ], doc="(x - mean) / sqrt(variance + eps) over `axis`, times the blob weights, plus the blob biases (each "
           "optional, one value per index of `axis`): Keras' and PyTorch's LayerNorm"),
    LayerSchema("GRN", [Float("bias", 0.0)]),
    LayerSchema("BatchNormalization", [Float("epsilon", 1e-5, aliases=("eps",))]),
]

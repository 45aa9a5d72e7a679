"""What TensorFlow may execute for mo-core: an allow-list of pure computation ops,
checked before anything runs (the TF worker's shape fallback, offloaded layers,
`convert --validate`, freezing; the converter checks offloaded layers too).

Why an allow-list: TensorFlow has ~1500 ops and every release adds some; ops that
read or write files, reach the network, run Python or abort the process are spread
over many families (ReadFile, WriteFile, PrintV2's output_stream, EncodeProto's
descriptor_source, FixedUnigramCandidateSampler's vocab_file, ImmutableConst, Abort,
...). A deny-list misses the next one; this list names what a numerical model
needs - array, math, nn, image geometry, linear algebra, random, sparse/ragged,
control flow and functions, in-memory state (variables, tensor arrays, tensor lists,
lookup tables) - and nothing else. It was made from TensorFlow 2.21's generated op
modules (gen_*_ops) family by family, leaving out: ImmutableConst (maps a file),
Empty, TemporaryVariable and ParallelConcat (uninitialised memory: another client's
tensors in a shared worker), image decoders/encoders, Abort, RemoteCall, mutexes, queues,
barriers, stages, accumulators, session handles, text-file table initialisers,
and every op of the io, dataset, summary, logging (but Assert), string, parsing,
script (py_func), debug, collective, send/recv, checkpoint, candidate sampling,
encode/decode proto, tpu and training families.

Function bodies are checked too: a node whose op names a function of the graph's
library, and every function an attribute names (If/While/Case branches,
PartitionedCall's f, ...), recursively; a function that calls itself (TensorFlow
then recurses until the process dies) or calls nested deeper than
MAX_FUNCTION_DEPTH is refused. Works on TensorFlow's GraphDef/FunctionDef protos
and on our schema's (core/front/tf/proto): pure Python, no TensorFlow import.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_FUNCTION_DEPTH = 16
MAX_REPORTED = 8

_FAMILIES = (
    # array
    """BatchMatrixBandPart BatchMatrixDiag BatchMatrixDiagPart BatchMatrixSetDiag BatchToSpace BatchToSpaceND Bitcast
       BroadcastArgs BroadcastGradientArgs BroadcastTo CheckNumerics CheckNumericsV2 Concat ConcatOffset ConcatV2
       ConjugateTranspose Const DebugGradientIdentity DebugGradientRefIdentity DeepCopy DepthToSpace Dequantize Diag
       DiagPart EditDistance Empty EnsureShape ExpandDims ExtractImagePatches ExtractVolumePatches
       FakeQuantWithMinMaxArgs FakeQuantWithMinMaxArgsGradient FakeQuantWithMinMaxVars
       FakeQuantWithMinMaxVarsGradient FakeQuantWithMinMaxVarsPerChannel FakeQuantWithMinMaxVarsPerChannelGradient
       Fill Fingerprint Gather GatherNd GatherV2 GuaranteeConst Identity IdentityN InplaceAdd InplaceSub
       InplaceUpdate InvertPermutation ListDiff LowerBound MatrixBandPart MatrixDiag MatrixDiagPart MatrixDiagPartV2
       MatrixDiagPartV3 MatrixDiagV2 MatrixDiagV3 MatrixSetDiag MatrixSetDiagV2 MatrixSetDiagV3 MirrorPad
       MirrorPadGrad OneHot OnesLike Pack Pad PadV2 ParallelConcat Placeholder PlaceholderV2 PlaceholderWithDefault
       PreventGradient QuantizeAndDequantize QuantizeAndDequantizeV2 QuantizeAndDequantizeV3 QuantizeAndDequantizeV4
       QuantizeAndDequantizeV4Grad QuantizeV2 QuantizedConcat QuantizedInstanceNorm QuantizedReshape Rank RefIdentity
       Reshape ResourceStridedSliceAssign Reverse ReverseSequence ReverseV2 Roll ScatterNd ScatterNdNonAliasingAdd
       Shape ShapeN Size Slice Snapshot SpaceToBatch SpaceToBatchND SpaceToDepth Split SplitV Squeeze StopGradient
       StridedSlice StridedSliceAssign StridedSliceGrad TensorScatterAdd TensorScatterMax TensorScatterMin
       TensorScatterSub TensorScatterUpdate TensorStridedSliceUpdate Tile TileGrad Transpose Unique UniqueV2
       UniqueWithCounts UniqueWithCountsV2 Unpack UnravelIndex UpperBound Where ZerosLike""",
    # math
    """Abs AccumulateNV2 Acos Acosh Add AddN AddV2 All Angle Any ApproximateEqual ArgMax ArgMin Asin Asinh Atan Atan2
       Atanh BatchMatMul BatchMatMulV2 BatchMatMulV3 BesselI0 BesselI0e BesselI1 BesselI1e BesselJ0 BesselJ1 BesselK0
       BesselK0e BesselK1 BesselK1e BesselY0 BesselY1 Betainc Bincount BitwiseAnd BitwiseOr BitwiseXor Bucketize Cast
       Ceil ClipByValue Complex ComplexAbs Conj Cos Cosh Cross Cumprod Cumsum CumulativeLogsumexp Dawsn DenseBincount
       Digamma Div DivNoNan Equal Erf Erfc Erfinv EuclideanNorm Exp Expint Expm1 Floor FloorDiv FloorMod FresnelCos
       FresnelSin Greater GreaterEqual HistogramFixedWidth Igamma IgammaGradA Igammac Imag Inv InvGrad Invert
       IsFinite IsInf IsNan LeftShift Less LessEqual Lgamma LinSpace Log Log1p LogicalAnd LogicalNot LogicalOr MatMul
       Max Maximum Mean Min Minimum Mod Mul MulNoNan Ndtri Neg NextAfter NotEqual Polygamma PopulationCount Pow Prod
       QuantizeDownAndShrinkRange QuantizedAdd QuantizedMatMul QuantizedMul RaggedBincount Range Real RealDiv
       Reciprocal ReciprocalGrad RequantizationRange RequantizationRangePerChannel Requantize RequantizePerChannel
       RightShift Rint Round Rsqrt RsqrtGrad SegmentMax SegmentMaxV2 SegmentMean SegmentMin SegmentMinV2 SegmentProd
       SegmentProdV2 SegmentSum SegmentSumV2 Select SelectV2 Sigmoid SigmoidGrad Sign Sin Sinh SobolSample
       SparseBincount SparseMatMul SparseSegmentMean SparseSegmentMeanGrad SparseSegmentMeanGradV2
       SparseSegmentMeanWithNumSegments SparseSegmentSqrtN SparseSegmentSqrtNGrad SparseSegmentSqrtNGradV2
       SparseSegmentSqrtNWithNumSegments SparseSegmentSum SparseSegmentSumGrad SparseSegmentSumGradV2
       SparseSegmentSumWithNumSegments Spence Sqrt SqrtGrad Square SquaredDifference Sub Sum Tan Tanh TanhGrad
       TruncateDiv TruncateMod UnsortedSegmentMax UnsortedSegmentMin UnsortedSegmentProd UnsortedSegmentSum Xdivy
       Xlog1py Xlogy Zeta""",
    # nn
    """ApproxTopK AvgPool AvgPool3D AvgPool3DGrad AvgPoolGrad BatchNormWithGlobalNormalization
       BatchNormWithGlobalNormalizationGrad BiasAdd BiasAddGrad BiasAddV1 BlockLSTM BlockLSTMGrad BlockLSTMGradV2
       BlockLSTMV2 CTCBeamSearchDecoder CTCGreedyDecoder CTCLoss CTCLossV2 Conv Conv2D Conv2DBackpropFilter
       Conv2DBackpropFilterV2 Conv2DBackpropInput Conv2DBackpropInputV2 Conv3D Conv3DBackpropFilter
       Conv3DBackpropFilterV2 Conv3DBackpropInput Conv3DBackpropInputV2 DataFormatDimMap DataFormatVecPermute
       DepthwiseConv2dNative DepthwiseConv2dNativeBackpropFilter DepthwiseConv2dNativeBackpropInput Dilation2D
       Dilation2DBackpropFilter Dilation2DBackpropInput Elu EluGrad FractionalAvgPool FractionalAvgPoolGrad
       FractionalMaxPool FractionalMaxPoolGrad FusedBatchNorm FusedBatchNormGrad FusedBatchNormGradV2
       FusedBatchNormGradV3 FusedBatchNormV2 FusedBatchNormV3 FusedPadConv2D FusedResizeAndPadConv2D GRUBlockCell
       GRUBlockCellGrad InTopK InTopKV2 IsotonicRegression L2Loss LRN LRNGrad LSTMBlockCell LSTMBlockCellGrad
       LeakyRelu LeakyReluGrad LogSoftmax MaxPool MaxPool3D MaxPool3DGrad MaxPool3DGradGrad MaxPoolGrad
       MaxPoolGradGrad MaxPoolGradGradV2 MaxPoolGradGradWithArgmax MaxPoolGradV2 MaxPoolGradWithArgmax MaxPoolV2
       MaxPoolWithArgmax NthElement QuantizedAvgPool QuantizedBatchNormWithGlobalNormalization QuantizedBiasAdd
       QuantizedConv2D QuantizedConv2DAndRelu QuantizedConv2DAndReluAndRequantize QuantizedConv2DAndRequantize
       QuantizedConv2DPerChannel QuantizedConv2DWithBias QuantizedConv2DWithBiasAndRelu
       QuantizedConv2DWithBiasAndReluAndRequantize QuantizedConv2DWithBiasAndRequantize
       QuantizedConv2DWithBiasSignedSumAndReluAndRequantize QuantizedConv2DWithBiasSumAndRelu
       QuantizedConv2DWithBiasSumAndReluAndRequantize QuantizedDepthwiseConv2D QuantizedDepthwiseConv2DWithBias
       QuantizedDepthwiseConv2DWithBiasAndRelu QuantizedDepthwiseConv2DWithBiasAndReluAndRequantize
       QuantizedMatMulWithBias QuantizedMatMulWithBiasAndDequantize QuantizedMatMulWithBiasAndRelu
       QuantizedMatMulWithBiasAndReluAndRequantize QuantizedMatMulWithBiasAndRequantize QuantizedMaxPool
       QuantizedRelu QuantizedRelu6 QuantizedReluX Relu Relu6 Relu6Grad ReluGrad Selu SeluGrad Softmax
       SoftmaxCrossEntropyWithLogits Softplus SoftplusGrad Softsign SoftsignGrad SparseSoftmaxCrossEntropyWithLogits
       TopK TopKV2 _FusedBatchNormEx _FusedConv2D _FusedDepthwiseConv2dNative _FusedMatMul""",
    # image
    """AdjustContrast AdjustContrastv2 AdjustHue AdjustSaturation CombinedNonMaxSuppression CropAndResize
       CropAndResizeGradBoxes CropAndResizeGradImage DrawBoundingBoxes DrawBoundingBoxesV2 ExtractGlimpse
       ExtractGlimpseV2 GenerateBoundingBoxProposals HSVToRGB ImageProjectiveTransformV2 ImageProjectiveTransformV3
       NonMaxSuppression NonMaxSuppressionV2 NonMaxSuppressionV3 NonMaxSuppressionV4 NonMaxSuppressionV5
       NonMaxSuppressionWithOverlaps QuantizedResizeBilinear RGBToHSV RandomCrop ResizeArea ResizeBicubic
       ResizeBicubicGrad ResizeBilinear ResizeBilinearGrad ResizeNearestNeighbor ResizeNearestNeighborGrad
       SampleDistortedBoundingBox SampleDistortedBoundingBoxV2 ScaleAndTranslate ScaleAndTranslateGrad
       StatelessSampleDistortedBoundingBox""",
    # linalg
    """BandedTriangularSolve BatchCholesky BatchCholeskyGrad BatchFFT BatchFFT2D BatchFFT3D BatchIFFT BatchIFFT2D
       BatchIFFT3D BatchMatrixDeterminant BatchMatrixInverse BatchMatrixSolve BatchMatrixSolveLs
       BatchMatrixTriangularSolve BatchSelfAdjointEig BatchSelfAdjointEigV2 BatchSvd Cholesky CholeskyGrad Eig Einsum
       FFT FFT2D FFT3D FFTND IFFT IFFT2D IFFT3D IFFTND IRFFT IRFFT2D IRFFT3D IRFFTND LogMatrixDeterminant Lu
       MatrixDeterminant MatrixExponential MatrixInverse MatrixLogarithm MatrixSolve MatrixSolveLs MatrixSquareRoot
       MatrixTriangularSolve Qr RFFT RFFT2D RFFT3D RFFTND SelfAdjointEig SelfAdjointEigV2 Svd TridiagonalMatMul
       TridiagonalSolve""",
    # random
    """Multinomial ParameterizedTruncatedNormal RandomGamma RandomGammaGrad RandomPoisson RandomPoissonV2
       RandomShuffle RandomStandardNormal RandomUniform RandomUniformInt StatelessMultinomial
       StatelessParameterizedTruncatedNormal StatelessRandomBinomial StatelessRandomGammaV2 StatelessRandomGammaV3
       StatelessRandomGetAlg StatelessRandomGetKeyCounter StatelessRandomGetKeyCounterAlg StatelessRandomNormal
       StatelessRandomNormalV2 StatelessRandomPoisson StatelessRandomUniform StatelessRandomUniformFullInt
       StatelessRandomUniformFullIntV2 StatelessRandomUniformInt StatelessRandomUniformIntV2 StatelessRandomUniformV2
       StatelessShuffle StatelessTruncatedNormal StatelessTruncatedNormalV2 TruncatedNormal""",
    # sparse and ragged
    """AddManySparseToTensorsMap AddSparseToTensorsMap DenseCountSparseOutput DenseToDenseSetOperation
       DenseToSparseSetOperation DeserializeManySparse DeserializeSparse RaggedCountSparseOutput RaggedCross
       RaggedFillEmptyRows RaggedFillEmptyRowsGrad RaggedGather RaggedRange RaggedTensorFromVariant
       RaggedTensorToSparse RaggedTensorToTensor RaggedTensorToVariant RaggedTensorToVariantGradient
       SerializeManySparse SerializeSparse SetSize SparseAdd SparseAddGrad SparseConcat SparseCountSparseOutput
       SparseCross SparseCrossHashed SparseCrossV2 SparseDenseCwiseAdd SparseDenseCwiseDiv SparseDenseCwiseMul
       SparseFillEmptyRows SparseFillEmptyRowsGrad SparseReduceMax SparseReduceMaxSparse SparseReduceSum
       SparseReduceSumSparse SparseReorder SparseReshape SparseSlice SparseSliceGrad SparseSoftmax
       SparseSparseMaximum SparseSparseMinimum SparseSplit SparseTensorDenseAdd SparseTensorDenseMatMul SparseToDense
       SparseToSparseSetOperation TakeManySparseFromTensorsMap""",
    # control flow and functions
    """Assert Case ControlTrigger DeviceIndex Enter Exit FakeParam For If LoopCond Merge NextIteration NoOp
       PartitionedCall RefEnter RefExit RefMerge RefNextIteration RefSelect RefSwitch StatefulPartitionedCall
       StatelessCase StatelessIf StatelessWhile Switch SymbolicGradient ToBool While""",
    # in-memory state
    """AnonymousHashTable AnonymousMutableDenseHashTable AnonymousMutableHashTable AnonymousMutableHashTableOfTensors
       Assign AssignAdd AssignAddVariableOp AssignSub AssignSubVariableOp AssignVariableOp CountUpTo
       DestroyResourceOp DestroyTemporaryVariable DisableCopyOnRead DynamicPartition DynamicStitch EmptyTensorList
       HashTable HashTableV2 InitializeTable InitializeTableV2 IsVariableInitialized LookupTableExport
       LookupTableExportV2 LookupTableFind LookupTableFindV2 LookupTableImport LookupTableImportV2 LookupTableInsert
       LookupTableInsertV2 LookupTableRemoveV2 LookupTableSize LookupTableSizeV2 MutableDenseHashTable
       MutableDenseHashTableV2 MutableHashTable MutableHashTableOfTensors MutableHashTableOfTensorsV2
       MutableHashTableV2 ParallelDynamicStitch ReadVariableOp ResourceCountUpTo ResourceGather ResourceGatherNd
       ResourceScatterAdd ResourceScatterDiv ResourceScatterMax ResourceScatterMin ResourceScatterMul
       ResourceScatterNdAdd ResourceScatterNdMax ResourceScatterNdMin ResourceScatterNdSub ResourceScatterNdUpdate
       ResourceScatterSub ResourceScatterUpdate ScatterAdd ScatterDiv ScatterMax ScatterMin ScatterMul ScatterNdAdd
       ScatterNdMax ScatterNdMin ScatterNdSub ScatterNdUpdate ScatterSub ScatterUpdate Stack StackClose StackCloseV2
       StackPop StackPopV2 StackPush StackPushV2 StackV2 TemporaryVariable TensorArray TensorArrayClose
       TensorArrayCloseV2 TensorArrayCloseV3 TensorArrayConcat TensorArrayConcatV2 TensorArrayConcatV3
       TensorArrayGather TensorArrayGatherV2 TensorArrayGatherV3 TensorArrayGrad TensorArrayGradV2 TensorArrayGradV3
       TensorArrayGradWithShape TensorArrayPack TensorArrayRead TensorArrayReadV2 TensorArrayReadV3
       TensorArrayScatter TensorArrayScatterV2 TensorArrayScatterV3 TensorArraySize TensorArraySizeV2
       TensorArraySizeV3 TensorArraySplit TensorArraySplitV2 TensorArraySplitV3 TensorArrayUnpack TensorArrayV2
       TensorArrayV3 TensorArrayWrite TensorArrayWriteV2 TensorArrayWriteV3 TensorListConcat TensorListConcatLists
       TensorListConcatV2 TensorListElementShape TensorListFromTensor TensorListGather TensorListGetItem
       TensorListLength TensorListPopBack TensorListPushBack TensorListPushBackBatch TensorListReserve
       TensorListResize TensorListScatter TensorListScatterIntoExistingList TensorListScatterV2 TensorListSetItem
       TensorListSplit TensorListStack VarHandleOp VarIsInitializedOp Variable VariableShape VariableV2""",
)
# (ParallelConcat: TensorFlow allocates its `shape` uninitialised and fills only the rows it is given - it does
# not check that shape[0] is their count - so its other rows are whatever memory held: another client's tensors)
ALLOWED_OPS = frozenset(name for family in _FAMILIES for name in family.split()) - {
    "Empty", "TemporaryVariable", "DestroyTemporaryVariable", "ParallelConcat"}
# ops that change what a Session keeps between runs (variables, mutable lookup tables, counters): only freezing
# (a SavedModel's init and restore ops) may run them. A graph the TensorFlow worker runs again and again (an
# offloaded sub-graph, a shape question) must hold nothing after a run: a MutableHashTable filled 4M entries a
# request grew the shared worker by 1.3 GB in 7 requests, until another client's graph ran out of memory
PERSISTENT_STATE_OPS = frozenset("""
    Assign AssignAdd AssignAddVariableOp AssignSub AssignSubVariableOp AssignVariableOp CountUpTo ResourceCountUpTo
    LookupTableImport LookupTableImportV2 LookupTableInsert LookupTableInsertV2 LookupTableRemoveV2
    MutableDenseHashTable MutableDenseHashTableV2 MutableHashTable MutableHashTableOfTensors
    MutableHashTableOfTensorsV2 MutableHashTableV2 ResourceScatterAdd ResourceScatterDiv ResourceScatterMax
    ResourceScatterMin ResourceScatterMul ResourceScatterNdAdd ResourceScatterNdMax ResourceScatterNdMin
    ResourceScatterNdSub ResourceScatterNdUpdate ResourceScatterSub ResourceScatterUpdate ScatterAdd ScatterDiv
    ScatterMax ScatterMin ScatterMul ScatterNdAdd ScatterNdMax ScatterNdMin ScatterNdSub ScatterNdUpdate ScatterSub
    ScatterUpdate""".split())
RUN_OPS = ALLOWED_OPS - PERSISTENT_STATE_OPS


@dataclass(frozen=True)
class Refused:
    """One reason a graph may not run: an op outside ALLOWED_OPS (`node` that holds it,
    `function` the library function it is in, None at the top level), or a function
    that recurses, nests too deeply or is missing (`why`)."""
    op: str
    node: str
    function: str | None = None
    why: str = "not a pure computation"

    def describe(self) -> str:
        where = "node '{}'".format(self.node) + (" in function '{}'".format(self.function) if self.function else "")
        return "op '{}' ({}): {}".format(self.op, where, self.why)


class _Root:
    """Stands for the caller of a function checked on its own (a SavedModel's)."""

    def __init__(self, name: str):
        self.op, self.name = name, name


def node_name(name: str) -> str:
    """'^a', 'a:1', 'a:out:0' (inside a function) -> 'a'."""
    return name.lstrip("^").split(":")[0]


def _functions_of(node) -> list[str]:
    """The functions an op's attributes name (If/While branches, PartitionedCall's f, Case's branches...)."""
    names = []
    for value in node.attr.values():
        kind = value.WhichOneof("value")
        if kind == "func":
            names.append(value.func.name)
        elif kind == "list":
            names.extend(f.name for f in value.list.func)
    return names


class _Checker:
    def __init__(self, library, allowed):
        self.library = {f.signature.name: f for f in library.function}
        self.allowed = allowed
        self.found: list[Refused] = []
        self._done: set[str] = set()

    def node(self, node, function: str | None, stack: tuple) -> None:
        if node.op in self.library:
            self.function(node.op, node, function, stack)
        elif node.op not in self.allowed:
            self.found.append(Refused(node.op, node.name, function))
        for name in _functions_of(node):
            self.function(name, node, function, stack)

    def function(self, name: str, caller, where: str | None, stack: tuple) -> None:
        if name in stack:
            self.found.append(Refused(caller.op, caller.name, where, "function '{}' calls itself (through {}); "
                                      "TensorFlow would recurse until the process dies".format(
                                          name, " -> ".join(stack[stack.index(name):] + (name,)))))
            return
        if name in self._done:
            return
        if len(stack) >= MAX_FUNCTION_DEPTH:
            self.found.append(Refused(caller.op, caller.name, where, "functions nested deeper than {}".format(
                MAX_FUNCTION_DEPTH)))
            return
        body = self.library.get(name)
        if body is None:
            self.found.append(Refused(caller.op, caller.name, where, "calls function '{}', which the graph's "
                                      "library does not hold".format(name)))
            return
        # walked once, whatever it holds: a refusal is reported once and refuses the graph anyway, and walked
        # again per caller a library of functions each calling the next many times costs fan-out^depth steps
        # (a cycle back to it is still found: it is on the stack then)
        self._done.add(name)
        for inner in body.node_def:
            self.node(inner, name, stack + (name,))


def closure(graph_def, roots) -> list:
    """The nodes of graph_def that running `roots` (node or tensor names) executes:
    their data and control inputs, transitively."""
    nodes = {n.name: n for n in graph_def.node}
    seen, stack, out = set(), [node_name(r) for r in roots], []
    while stack:
        name = stack.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        node = nodes[name]
        out.append(node)
        stack.extend(node_name(i) for i in node.input)
    return out


def refused(graph_def, roots=None, allowed=ALLOWED_OPS, functions=()) -> list[Refused]:
    """What in graph_def may not run: its nodes (those `roots` execute, or all of
    them) and the library `functions` named, with the functions they call. [] when
    all is allowed."""
    checker = _Checker(graph_def.library, allowed)
    nodes = list(graph_def.node) if roots is None else closure(graph_def, roots)
    for node in nodes:
        checker.node(node, None, ())
    for name in functions:
        checker.function(name, _Root(name), None, ())
    return checker.found


def refused_nodes(nodes, library, allowed=ALLOWED_OPS) -> list[Refused]:
    """refused() for loose NodeDefs (a sub-graph the converter offloads) over a library."""
    checker = _Checker(library, allowed)
    for node in nodes:
        checker.node(node, None, ())
    return checker.found


def describe(found: list[Refused]) -> str:
    """One line naming the refused ops and their nodes (at most MAX_REPORTED)."""
    text = "; ".join(r.describe() for r in found[:MAX_REPORTED])
    if len(found) > MAX_REPORTED:
        text += "; and {} more".format(len(found) - MAX_REPORTED)
    return text

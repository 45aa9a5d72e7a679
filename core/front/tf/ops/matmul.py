"""MatMul and BatchMatMul (V2, V3; adj_x / adj_y) -> FullyConnected where the second
operand is a constant matrix (a dense layer: weights OI, TensorFlow's (I, O) transposed
or as they are with the transpose; a 3-D or wider first operand is reshaped to rows and
back, views around a 2-D inner product), else MatMul (attention's products of two tensors). A 4-D
operand is NCHW in the IR: a Permute to TensorFlow's order before the MatMul, and one
to NCHW after a 4-D result."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.lowering import TO_NCHW, TO_NHWC, apply_op
from core.front.tf.ops.base import TFOp, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.fully_connected import FullyConnected, MatMul as MatMulLayer, matmul_shape
from core.ops.shape_ops import Permute, Reshape


class MatMul(TFOp):
    tf_types = ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)
        batched = node.tf_op != "MatMul"
        node.tf["transpose_a"] = attr(node, "adj_x" if batched else "transpose_a", "b", False)
        node.tf["transpose_b"] = attr(node, "adj_y" if batched else "transpose_b", "b", False)

    @staticmethod
    def evaluate(node, values):
        a, b = values
        a = np.swapaxes(a, -1, -2) if node.tf["transpose_a"] else a
        b = np.swapaxes(b, -1, -2) if node.tf["transpose_b"] else b
        return [np.matmul(a, b)]

    @staticmethod
    def shape(node, shapes):
        a, b = shapes
        if node.tf_op == "MatMul" and (len(a) != 2 or len(b) != 2):
            raise ShapeError("{}: MatMul takes 2-D operands, got {} and {}.", describe(node), list(a), list(b))
        return [matmul_shape(a, b, node.tf["transpose_a"], node.tf["transpose_b"], describe(node))]

    @staticmethod
    def lower(node, lw):
        a, b = node.data_inputs()
        dense = b.soft_get("value") is not None and np.asarray(b.value).ndim == 2 and not node.tf["transpose_a"] \
            and not lw.nchw(a)
        if dense:
            w = np.asarray(b.value, dtype=np.float32)
            weights = w if node.tf["transpose_b"] else w.T
            shape = [int(d) for d in lw.tf_shape(a)]
            lw.keep_inputs(node, a)
            lw.retype(node, FullyConnected, {"out-size": int(weights.shape[0]), "axis": 1})
            lw.add_blob(node, "weights", weights)
            if len(shape) > 2:  # rows of a 2-D product between two Reshapes (views): oneDNN's inner product
                rows, out_size = int(np.prod(shape[:-1])), int(weights.shape[0])
                before = lw.insert_before(node, 0, node.name + "/rows", Reshape, {"dim": [rows, shape[-1]]})
                lw.insert_after(node, node.name + "/matrix", Reshape, {"dim": shape[:-1] + [out_size]})
                for data, dims in ((before.out_node(0), [rows, shape[-1]]), (node.out_node(0), [rows, out_size])):
                    data["tf_shape"], data["nchw"] = np.array(dims, dtype=np.int64), False
            return
        out = node.out_node(0)
        lw.keep_inputs(node, a, b)
        lw.retype(node, MatMulLayer, {"transpose_a": node.tf["transpose_a"], "transpose_b": node.tf["transpose_b"]})
        for port, data in enumerate((a, b)):  # (even where the Permute moves no value: the axes' order matters)
            if lw.nchw(data):
                lw.insert_before(node, port, "{}/to_nhwc_{}".format(node.name, port), Permute,
                                 {"order": list(TO_NHWC)})
        if lw.nchw(out):
            lw.insert_after(node, "{}/to_nchw".format(node.name), Permute, {"order": list(TO_NCHW)})


def _einsum_parts(equation: str):
    """(operands' letters, output letters) of an explicit two-operand equation without '...', else None."""
    inputs, arrow, output = equation.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if not arrow or len(terms) != 2 or "." in equation or not all(t.isalpha() for t in terms + [output or "a"]):
        return None
    return terms, output


class Einsum(TFOp):
    """Einsum of two operands (Keras' MultiHeadAttention: "BTNH,BSNH->BNTS", "BNTS,BSNH->BTNH") -> each
    operand permuted to [batch, free, contracted] (resp. [batch, contracted, free]) and reshaped to 3-D, one
    MatMul, a Reshape back and a Permute to the output's order. Other equations (one operand, '...', a letter
    summed away in one operand alone, a letter twice in one) have no lowering: offload them."""
    tf_types = ("Einsum",)

    @staticmethod
    def extract(node):
        node.tf["equation"] = attr(node, "equation", "s")

    @staticmethod
    def evaluate(node, values):
        return [np.einsum(node.tf["equation"], *values)]

    @staticmethod
    def shape(node, shapes):
        parts = _einsum_parts(node.tf["equation"])
        if parts is None:  # (TensorFlow's own rules, on zero-strided operands: no memory but the output's)
            return [np.einsum(node.tf["equation"], *[np.broadcast_to(np.float32(0), s) for s in shapes]).shape]
        (sa, sb), so = parts
        dims = {}
        for letters, shape in ((sa, shapes[0]), (sb, shapes[1])):
            if len(letters) != len(shape):
                raise ShapeError("{}: '{}' names {} axes, the operand has {}.", describe(node), letters, len(letters),
                                 len(shape))
            for letter, d in zip(letters, shape):
                if dims.setdefault(letter, int(d)) != int(d):
                    raise ShapeError("{}: axis '{}' is {} in one place and {} in another.", describe(node), letter,
                                     dims[letter], int(d))
        return [[dims[letter] for letter in so]]

    @staticmethod
    def lower(node, lw):
        parts = _einsum_parts(node.tf["equation"])
        (sa, sb), so = parts if parts else ((None, None), None)
        if parts is None or len(set(sa)) < len(sa) or len(set(sb)) < len(sb) or \
                any(letter not in so for letter in set(sa) ^ set(sb)) or any(c not in sa + sb for c in so):
            raise lw.unsupported(node, "the Einsum equation '{}' (two operands, each letter once per operand, none "
                                       "summed away alone, no '...')".format(node.tf["equation"]))
        a, b = node.data_inputs()
        dims = dict(zip(sa, lw.tf_shape(a)))
        dims.update(zip(sb, lw.tf_shape(b)))
        batch = [c for c in so if c in sa and c in sb]
        contract = [c for c in sa if c in sb and c not in so]
        free_a, free_b = [c for c in sa if c not in sb], [c for c in sb if c not in sa]
        size = lambda letters: int(np.prod([dims[c] for c in letters], dtype=np.int64))  # noqa: E731
        a3 = _einsum_operand(lw, a, sa, batch + free_a + contract, [size(batch), size(free_a), size(contract)],
                             node.name + "/a")
        b3 = _einsum_operand(lw, b, sb, batch + contract + free_b, [size(batch), size(contract), size(free_b)],
                             node.name + "/b")
        product = lw.new_op(node.name + "/matmul", MatMulLayer, {})
        lw.graph.connect(a3, product, inp=0)
        lw.graph.connect(b3, product, inp=1)
        made = batch + free_a + free_b
        cur = lw.graph.add_data(node.name + "/matmul")
        lw.graph.connect(product, cur, out=0)
        cur = apply_op(lw, cur, node.name + "/unflatten", Reshape, {"dim": [dims[c] for c in made]})
        order = [made.index(c) for c in so]  # out_tf[i] = made[order[i]]
        out = node.out_node(0)
        if lw.nchw(out):
            order = [order[i] for i in TO_NCHW]
        lw.keep_inputs(node, cur)
        if order != sorted(order):
            lw.retype(node, Permute, {"order": order})
        else:
            lw.retype(node, Reshape, {"dim": [int(d) for d in lw.ir_shape(out)]})


def _einsum_operand(lw, data, letters: str, wanted: list, shape3: list, name: str):
    """`data` (axes `letters`) in TensorFlow's order, permuted to the axes `wanted`, reshaped to `shape3`."""
    cur = data
    if lw.nchw(cur):
        cur = apply_op(lw, cur, name + "/to_nhwc", Permute, {"order": list(TO_NHWC)})
    order = [letters.index(c) for c in wanted]
    if order != sorted(order):
        cur = apply_op(lw, cur, name + "/transpose", Permute, {"order": order})
    return apply_op(lw, cur, name + "/flatten", Reshape, {"dim": shape3})

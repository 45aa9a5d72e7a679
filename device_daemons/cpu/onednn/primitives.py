"""Thin Python objects over oneDNN's v3 C API: memory descriptors, memory objects
over numpy buffers, primitive descriptors and primitives (inference only, f32 or
bf16 tensors).

    d = load()
    src = Desc.plain(d, (1, 3, 224, 224))                   # nchw
    pd = conv_pd(d, src, Desc.any(d, w_dims), Desc.plain(d, (64,)), Desc.any(d, dst_dims), ...)
    prim = Primitive(d, pd)                                 # pd.dst is the layout oneDNN chose
    prim.execute(stream, {"DNNL_ARG_SRC": mem, ...})        # mem: Memory over a numpy buffer

Every primitive is made with a user-managed scratchpad (`pd.scratchpad_size`), so
primitives of several plans can run in several threads at once, each plan handing
its own scratchpad buffer.
"""
from __future__ import annotations

import numpy as np

from .library import DnnlError

PLAIN_TAGS = {1: "a", 2: "ab", 3: "abc", 4: "abcd", 5: "abcde", 6: "abcdef"}  # 6: grouped 3-D weights
# the activation layouts primitives choose, by rank (Desc.retyped, Desc.layout)
LAYOUT_TAGS = {1: ("a",), 2: ("ab", "ba"), 3: ("abc", "acb", "aBc16b", "aBc8b"),
               4: ("abcd", "acdb", "aBcd16b", "aBcd8b", "ABcd16a16b", "ABcd32a16b"),
               5: ("abcde", "acdeb", "aBcde16b", "aBcde8b")}


class Desc:
    """An owned dnnl_memory_desc_t with its logical dims; its data type `dt` is "f32"
    or "bf16" (the tensors between layers; weights and network I/O are f32 in numpy)."""

    __slots__ = ("d", "md", "dims")

    def __init__(self, d, md, dims):
        self.d, self.md, self.dims = d, d.ffi.gc(md, d.lib.dnnl_memory_desc_destroy), tuple(dims)

    @classmethod
    def tagged(cls, d, dims, tag: str, dt: str = "f32"):
        md = d.ffi.new("dnnl_memory_desc_t *")
        fmt = getattr(d.lib, "dnnl_format_tag_any" if tag == "any" else "dnnl_" + tag)
        d.check(d.lib.dnnl_memory_desc_create_with_tag(md, len(dims), _dims(d, dims), getattr(d.lib, "dnnl_" + dt),
                                                       fmt), f"memory desc {list(dims)} {tag} {dt}")
        return cls(d, md[0], dims)

    @classmethod
    def plain(cls, d, dims, dt: str = "f32"):
        return cls.tagged(d, dims, PLAIN_TAGS[len(dims)], dt)

    def part(self, dims, offsets) -> "Desc":
        """The part of this tensor of `dims` starting at `offsets`, described where it lies (its strides, an
        offset into the same memory)."""
        md = self.d.ffi.new("dnnl_memory_desc_t *")
        self.d.check(self.d.lib.dnnl_memory_desc_create_submemory(md, self.md, _dims(self.d, dims),
                                                                  _dims(self.d, offsets)),
                     f"a part {list(dims)} at {list(offsets)} of {list(self.dims)}")
        return Desc(self.d, md[0], dims)

    @classmethod
    def any(cls, d, dims, dt: str = "f32"):
        return cls.tagged(d, dims, "any", dt)

    @property
    def dt(self) -> str:
        value = self.d.ffi.new("dnnl_data_type_t *")
        self.d.check(self.d.lib.dnnl_memory_desc_query(self.md, self.d.lib.dnnl_query_data_type, value),
                     "querying a data type")
        return "bf16" if value[0] == self.d.lib.dnnl_bf16 else "f32" if value[0] == self.d.lib.dnnl_f32 else "other"

    def retyped(self, dt: str) -> "Desc":
        """The same layout with data type `dt`: oneDNN's C API makes a blocked desc only
        from a format tag, so the tag of this layout is found among the ones the
        primitives choose (plain, channels-last, channel-blocked); plain otherwise."""
        if self.dt == dt:
            return self
        for tag in LAYOUT_TAGS.get(len(self.dims), ()):
            try:
                if Desc.tagged(self.d, self.dims, tag, self.dt) == self:
                    return Desc.tagged(self.d, self.dims, tag, dt)
            except DnnlError:
                continue
        return Desc.plain(self.d, self.dims, dt)

    def same_bytes(self, other: "Desc") -> bool:
        """Whether `other` lays this tensor's elements out byte for byte the same way: a
        channel vector ([1, C, 1, ...]) in plain, channels-last or channel-blocked layout
        with no padding is one (global pooling's and squeeze-excite's tensors): read as
        the other, no reorder."""
        if self == other:
            return True
        if self.dims != other.dims or self.dt != other.dt or self.size != other.size or len(self.dims) < 2:
            return False
        if any(d != 1 for i, d in enumerate(self.dims) if i != 1):
            return False
        return "blocked" not in (self.layout(), other.layout())

    def unblocked(self) -> bool:
        """A plain layout in some order of the axes, with any strides (abcd, acdb, a transposed view)?"""
        d, value = self.d, self.d.ffi.new("int *")
        d.check(d.lib.dnnl_memory_desc_query(self.md, d.lib.dnnl_query_format_kind, value), "querying a format kind")
        if value[0] != d.lib.dnnl_blocked:
            return False
        d.check(d.lib.dnnl_memory_desc_query(self.md, d.lib.dnnl_query_inner_nblks_s32, value), "querying blocks")
        return value[0] == 0

    def layout(self) -> str:
        """The format tag of this layout where it is a known one (what -pc names), else "blocked"."""
        for tag in LAYOUT_TAGS.get(len(self.dims), ()):
            try:
                if Desc.tagged(self.d, self.dims, tag, self.dt) == self:
                    return tag
            except DnnlError:
                continue
        return "blocked"

    @classmethod
    def clone(cls, d, const_md, dims=None):
        md = d.ffi.new("dnnl_memory_desc_t *")
        d.check(d.lib.dnnl_memory_desc_clone(md, const_md), "cloning a memory desc")
        if dims is None:
            ndims = d.ffi.new("int *")
            d.check(d.lib.dnnl_memory_desc_query(md[0], d.lib.dnnl_query_ndims_s32, ndims), "querying ndims")
            raw = d.ffi.new("dnnl_dim_t **")  # the query writes a pointer to the desc's own dims
            d.check(d.lib.dnnl_memory_desc_query(md[0], d.lib.dnnl_query_dims, raw), "querying dims")
            dims = tuple(raw[0][i] for i in range(ndims[0]))
        return cls(d, md[0], dims)

    def reshaped(self, dims):
        md = self.d.ffi.new("dnnl_memory_desc_t *")
        self.d.check(self.d.lib.dnnl_memory_desc_reshape(md, self.md, len(dims), _dims(self.d, dims)),
                     f"reshaping a memory desc to {list(dims)}")
        return Desc(self.d, md[0], dims)

    def permuted(self, permutation):
        """The same memory described with axis i moved to axis permutation[i]."""
        md = self.d.ffi.new("dnnl_memory_desc_t *")
        perm = self.d.ffi.new("int[]", [int(p) for p in permutation])
        self.d.check(self.d.lib.dnnl_memory_desc_permute_axes(md, self.md, perm),
                     f"permuting the axes of a memory desc by {list(permutation)}")
        dims = [0] * len(self.dims)
        for i, p in enumerate(permutation):
            dims[p] = self.dims[i]
        return Desc(self.d, md[0], tuple(dims))

    @property
    def size(self) -> int:
        return int(self.d.lib.dnnl_memory_desc_get_size(self.md))

    def __eq__(self, other):
        return isinstance(other, Desc) and bool(self.d.lib.dnnl_memory_desc_equal(self.md, other.md))

    def __hash__(self):
        return hash(self.dims)


def _dims(d, values):
    arr = d.ffi.new("dnnl_dims_t")
    for i, v in enumerate(values):
        arr[i] = int(v)
    return arr


class Memory:
    """A dnnl_memory_t over a buffer this object keeps alive (a numpy array or None,
    then set_buffer before use)."""

    __slots__ = ("d", "desc", "mem", "buffer", "size")

    def __init__(self, d, desc: Desc, buffer: np.ndarray | None = None):
        self.d, self.desc = d, desc
        self.size = desc.size  # (asked once: set_buffer runs per request for inputs and outputs)
        mem = d.ffi.new("dnnl_memory_t *")
        d.check(d.lib.dnnl_memory_create(mem, desc.md, d.engine, d.ffi.NULL), "creating a memory object")
        self.mem = d.ffi.gc(mem[0], d.lib.dnnl_memory_destroy)
        self.buffer = None
        if buffer is not None:
            self.set_buffer(buffer)

    def set_buffer(self, buffer: np.ndarray):
        if buffer.nbytes < self.size:
            raise ValueError(f"buffer of {buffer.nbytes} bytes for a tensor of {self.size}")
        ffi = self.d.ffi
        try:
            # cffi's own view of the buffer runs no Python (numpy's .ctypes.data builds a Python object a call)
            handle = ffi.from_buffer(buffer)
        except (BufferError, TypeError, ValueError):  # not one contiguous block: the address of its first element
            handle = ffi.cast("void *", buffer.ctypes.data)
        self.d.check(self.d.lib.dnnl_memory_set_data_handle(self.mem, handle), "setting a memory handle")
        self.buffer = buffer


class Attr:
    """Primitive attributes: user scratchpad plus optional post-ops
    (("eltwise", alg, alpha, beta), ("sum", scale) and ("binary", alg, values, dims, key):
    an operand broadcast from `dims`, bound by NativeOp.primitive)."""

    def __init__(self, d, post_ops=()):
        attr = d.ffi.new("dnnl_primitive_attr_t *")
        d.check(d.lib.dnnl_primitive_attr_create(attr), "creating attributes")
        self.attr = d.ffi.gc(attr[0], d.lib.dnnl_primitive_attr_destroy)
        d.check(d.lib.dnnl_primitive_attr_set_scratchpad_mode(self.attr, d.lib.dnnl_scratchpad_mode_user),
                "user scratchpad")
        if post_ops:
            ops = d.ffi.new("dnnl_post_ops_t *")
            d.check(d.lib.dnnl_post_ops_create(ops), "creating post-ops")
            ops = d.ffi.gc(ops[0], d.lib.dnnl_post_ops_destroy)
            for op in post_ops:
                if op[0] == "eltwise":
                    d.check(d.lib.dnnl_post_ops_append_eltwise(ops, getattr(d.lib, "dnnl_eltwise_" + op[1]),
                                                               float(op[2]), float(op[3])), "eltwise post-op")
                elif op[0] == "sum":
                    d.check(d.lib.dnnl_post_ops_append_sum(ops, float(op[1]), 0, d.lib.dnnl_data_type_undef),
                            "sum post-op")
                elif op[0] == "binary":
                    d.check(d.lib.dnnl_post_ops_append_binary(ops, getattr(d.lib, "dnnl_binary_" + op[1]),
                                                              Desc.plain(d, op[3]).md), "binary post-op")
                else:
                    raise ValueError(f"unknown post-op {op!r}")
            d.check(d.lib.dnnl_primitive_attr_set_post_ops(self.attr, ops), "setting post-ops")


class PrimitiveDesc:
    """An owned primitive descriptor; .src/.dst/.weights(i) are the layouts it chose."""

    def __init__(self, d, create, what: str):
        self.d = d
        pd = d.ffi.new("dnnl_primitive_desc_t *")
        d.check(create(pd), what)
        self.pd = d.ffi.gc(pd[0], d.lib.dnnl_primitive_desc_destroy)
        self.what = what

    def md(self, query: str, index: int = 0, dims=None) -> Desc:
        const = self.d.lib.dnnl_primitive_desc_query_md(self.pd, getattr(self.d.lib, "dnnl_query_" + query), index)
        if const == self.d.ffi.NULL:
            raise DnnlError(f"{self.what}: no {query} #{index}", 2)
        return Desc.clone(self.d, const, dims)

    @property
    def scratchpad_size(self) -> int:
        const = self.d.lib.dnnl_primitive_desc_query_md(self.pd, self.d.lib.dnnl_query_scratchpad_md, 0)
        return 0 if const == self.d.ffi.NULL else int(self.d.lib.dnnl_memory_desc_get_size(const))

    @property
    def implementation(self) -> str:
        out = self.d.ffi.new("const char **")
        self.d.check(self.d.lib.dnnl_primitive_desc_query(self.pd, self.d.lib.dnnl_query_impl_info_str, 0, out),
                     "implementation name")
        return self.d.ffi.string(out[0]).decode()


class Primitive:
    """A created primitive with its fixed arguments: `bind` sets them once (memory
    objects whose buffers never move), `run(stream)` executes with no Python work
    beyond one call."""

    def __init__(self, d, pd: PrimitiveDesc):
        # the primitive holds its own copy of the descriptor: keeping `pd` too would cost
        # ~36 KB a primitive (3.1 MB of the daemon's RSS on GoogLeNet), so only its name stays
        self.d, self.what = d, pd.what
        self.implementation = pd.implementation  # (oneDNN's kernel, e.g. "brgconv:avx512_core")
        prim = d.ffi.new("dnnl_primitive_t *")
        d.check(d.lib.dnnl_primitive_create(prim, pd.pd), f"creating {pd.what}")
        self.prim = d.ffi.gc(prim[0], d.lib.dnnl_primitive_destroy)
        self._args = None
        self._n = 0
        self._keep = None

    def bind(self, args: dict):
        """args: {"DNNL_ARG_SRC": Memory, ...} (or an argument index as the key)."""
        items = [(k if isinstance(k, int) else _arg(self.d, k), m) for k, m in args.items() if m is not None]
        arr = self.d.ffi.new("dnnl_exec_arg_t[]", len(items))
        for i, (arg, m) in enumerate(items):
            arr[i].arg = arg
            arr[i].memory = m.mem
        self._args, self._n, self._keep = arr, len(items), [m for _, m in items]

    def run(self, stream):
        status = self.d.lib.dnnl_primitive_execute(self.prim, stream, self._n, self._args)
        if status:
            raise DnnlError(f"executing {self.what}", status)


def _arg(d, name: str) -> int:
    """"DNNL_ARG_SRC" or "DNNL_ARG_MULTIPLE_SRC+2" -> the argument index."""
    base, _, extra = name.partition("+")
    return d.arg(base) + (int(extra) if extra else 0)


# --- primitive descriptors -------------------------------------------------------------
def _md(desc):
    return desc.md if desc is not None else None


def conv_pd(d, attr, src, weights, bias, dst, strides, dilates, pad_l, pad_r, transposed=False) -> PrimitiveDesc:
    """A convolution, or (transposed) a deconvolution: weights (O, I, k...) / (g, O/g, I/g, k...) both."""
    lib, ffi = d.lib, d.ffi
    kind = "deconvolution" if transposed else "convolution"
    create = getattr(lib, f"dnnl_{kind}_forward_primitive_desc_create")
    return PrimitiveDesc(d, lambda pd: create(
        pd, d.engine, lib.dnnl_forward_inference, getattr(lib, f"dnnl_{kind}_direct"), src.md, weights.md,
        _md(bias) or ffi.NULL, dst.md, _dims(d, strides), _dims(d, dilates), _dims(d, pad_l), _dims(d, pad_r),
        attr.attr), kind)


def pooling_pd(d, attr, alg, src, dst, strides, kernel, pad_l, pad_r) -> PrimitiveDesc:
    lib = d.lib
    return PrimitiveDesc(d, lambda pd: lib.dnnl_pooling_forward_primitive_desc_create(
        pd, d.engine, lib.dnnl_forward_inference, getattr(lib, "dnnl_pooling_" + alg), src.md, dst.md,
        _dims(d, strides), _dims(d, kernel), _dims(d, [0] * len(kernel)), _dims(d, pad_l), _dims(d, pad_r),
        attr.attr), "pooling")


def lrn_pd(d, attr, alg, src, dst, size, alpha, beta, k) -> PrimitiveDesc:
    lib = d.lib
    return PrimitiveDesc(d, lambda pd: lib.dnnl_lrn_forward_primitive_desc_create(
        pd, d.engine, lib.dnnl_forward_inference, getattr(lib, "dnnl_lrn_" + alg), src.md, dst.md, size,
        alpha, beta, k, attr.attr), "LRN")


def inner_product_pd(d, attr, src, weights, bias, dst) -> PrimitiveDesc:
    lib, ffi = d.lib, d.ffi
    return PrimitiveDesc(d, lambda pd: lib.dnnl_inner_product_forward_primitive_desc_create(
        pd, d.engine, lib.dnnl_forward_inference, src.md, weights.md, _md(bias) or ffi.NULL, dst.md, attr.attr),
        "inner product")


def layer_norm_pd(d, attr, src, dst, eps: float, scale: bool, shift: bool) -> PrimitiveDesc:
    lib = d.lib
    flags = (lib.dnnl_use_scale if scale else 0) | (lib.dnnl_use_shift if shift else 0)
    return PrimitiveDesc(d, lambda pd: lib.dnnl_layer_normalization_forward_primitive_desc_create(
        pd, d.engine, lib.dnnl_forward_inference, src.md, dst.md, d.ffi.NULL, eps, flags, attr.attr),
        "layer normalization")


def matmul_pd(d, attr, src, weights, dst) -> PrimitiveDesc:
    return PrimitiveDesc(d, lambda pd: d.lib.dnnl_matmul_primitive_desc_create(
        pd, d.engine, src.md, weights.md, d.ffi.NULL, dst.md, attr.attr), "matmul")


def softmax_pd(d, attr, src, dst, axis) -> PrimitiveDesc:
    lib = d.lib
    return PrimitiveDesc(d, lambda pd: lib.dnnl_softmax_forward_primitive_desc_create(
        pd, d.engine, lib.dnnl_forward_inference, lib.dnnl_softmax_accurate, src.md, dst.md, axis, attr.attr),
        "softmax")


def eltwise_pd(d, attr, alg, src, dst, alpha, beta) -> PrimitiveDesc:
    lib = d.lib
    return PrimitiveDesc(d, lambda pd: lib.dnnl_eltwise_forward_primitive_desc_create(
        pd, d.engine, lib.dnnl_forward_inference, getattr(lib, "dnnl_eltwise_" + alg), src.md, dst.md, alpha, beta,
        attr.attr), "eltwise " + alg)


def concat_pd(d, attr, dst, axis, srcs) -> PrimitiveDesc:
    mds = d.ffi.new("const_dnnl_memory_desc_t[]", [s.md for s in srcs])
    return PrimitiveDesc(d, lambda pd: d.lib.dnnl_concat_primitive_desc_create(
        pd, d.engine, dst.md if dst is not None else d.ffi.NULL, len(srcs), axis, mds, attr.attr), "concat")


def sum_pd(d, attr, dst, scales, srcs) -> PrimitiveDesc:
    mds = d.ffi.new("const_dnnl_memory_desc_t[]", [s.md for s in srcs])
    sc = d.ffi.new("float[]", [float(s) for s in scales])
    return PrimitiveDesc(d, lambda pd: d.lib.dnnl_sum_primitive_desc_create(
        pd, d.engine, dst.md if dst is not None else d.ffi.NULL, len(srcs), sc, mds, attr.attr), "sum")


def binary_pd(d, attr, alg, src0, src1, dst) -> PrimitiveDesc:
    lib = d.lib
    return PrimitiveDesc(d, lambda pd: lib.dnnl_binary_primitive_desc_create(
        pd, d.engine, getattr(lib, "dnnl_binary_" + alg), src0.md, src1.md, dst.md, attr.attr), "binary " + alg)


def reorder_pd(d, attr, src, dst) -> PrimitiveDesc:
    return PrimitiveDesc(d, lambda pd: d.lib.dnnl_reorder_primitive_desc_create(
        pd, src.md, d.engine, dst.md, d.engine, attr.attr), "reorder")

"""The interface of a oneDNN layer ("op") and the registry the compiler picks from.

An op computes one IR layer (plus the activations fused into it) with one or more
oneDNN primitives. It reads the layer's parsed attributes and blobs from the numpy
kernel of the same layer (the numpy kernels validate the IR; an op never parses
attributes again), in three phases driven by compiler.py:

    op = OPS[layer.type](step, kernel, dnnl, network)   # Unsupported: this layer stays on numpy
    want, outs = op.create(in_descs, in_shapes, out_shapes)
        # in_descs: the layout each input already has (None: a plain numpy array);
        # returns the layouts it wants its inputs in (the compiler reorders) and the
        # layouts of its outputs. DnnlError / Unsupported: the layer stays on numpy.
    prims = op.bind(ins, outs, scratch)        # Memory objects -> bound Primitives

`fuse(post_op)` asks an op to apply an element-wise post-op (an activation layer
that reads only its output) inside its primitive.

Precision: the compiler sets `dt` ("bf16" or "f32") before create; an op that computes
in that type makes its "any" layouts with it (convolution, inner product), one that
follows its input's layout follows its type too (pooling, element-wise, LRN, softmax).
`out_f32`: its output is a network output (made f32 where the primitive can write it
so). `precision` is what it computed in (what -pc shows). When create fails in bf16
(or finds only oneDNN's reference code) the compiler makes it again in f32.
"""
from __future__ import annotations

import mmap
import threading
import weakref

import numpy as np

from .library import NativeUnavailable
from .primitives import PLAIN_TAGS, Attr, Desc, Memory, Primitive, reorder_pd

OPS: dict[str, type] = {}


class Unsupported(Exception):
    """This layer (these attributes or shapes) has no oneDNN primitive here."""


CHANNELS_LAST = "acdb"  # (n, h, w, c): the layout our C kernels among the oneDNN steps read and write


def need_native(library) -> None:
    """Our C kernel `library` (a module of cpu/native/) built and loaded, else Unsupported
    with the reason (the layer's numpy kernel runs)."""
    try:
        library.load()
    except NativeUnavailable as err:
        raise Unsupported(str(err)) from None


def register(*types):
    def wrap(cls):
        for t in types:
            OPS[t] = cls
        return cls
    return wrap


class NativeOp:
    accepts_post_ops = False
    accepts_sum = False  # may add its result into an existing tensor (a sum post-op, dst_hint its layout)
    inplace = False  # the output may overwrite input 0 (same layout) when nobody else reads it
    dst_hint = None
    dst_view = None  # a Desc: bind gets the output's memory described so (PermuteOp)
    view_offset = 0  # a view (`view`): where its output starts in its input's memory, in bytes
    src_view = None  # a Desc: bind gets the first input's memory described so (SliceOp: a part of it)
    dt = "f32"  # the type it computes in (set by the compiler)
    out_f32 = False  # its output is a network output
    step_backend = None  # what -pc names as its step's backend when not oneDNN (our C kernel: "native")

    def __init__(self, step, kernel, d, network):
        self.step, self.kernel, self.d, self.network = step, kernel, d, network
        self.layer = step.layer
        self.post_ops: list = []
        self.pds: list = []

    @property
    def precision(self) -> str:
        return self.dt

    def out_dt(self) -> str:
        return "f32" if self.out_f32 else self.dt

    def follow(self, desc, shape):
        """The layout of an input as it is (a numpy array: plain f32); the op then computes
        in its type."""
        if desc is None and len(shape) not in PLAIN_TAGS:  # (a scalar: numpy runs it)
            raise Unsupported(f"oneDNN takes tensors of 1 to {max(PLAIN_TAGS)} dimensions, not {len(shape)}")
        desc = desc or Desc.plain(self.d, shape)
        self.dt = desc.dt
        return desc

    def fuse(self, post_op) -> bool:
        if not self.accepts_post_ops:
            return False
        self.post_ops.append(post_op)
        return True

    def absorbs(self, step, in_shape, out_shape) -> bool:
        """Takes in `step`, the one reader of its output (of in_shape; the step's output
        out_shape), computing it too (the compiler then skips it)? Only an op that says so."""
        return False

    def all_post_ops(self) -> list:
        """The post-ops of its primitive (an op may put some of its own first)."""
        return self.post_ops

    def attr(self):
        return Attr(self.d, self.all_post_ops())

    def create(self, in_descs, in_shapes, out_shapes):
        raise NotImplementedError

    def bind(self, ins, outs, scratch) -> list:
        raise NotImplementedError

    def primitive(self, pd, args: dict, scratch) -> Primitive:
        """The bound primitive; the operands of binary post-ops (per-channel vectors of a
        fused ScaleShift) are bound here too."""
        prim = Primitive(self.d, pd)
        if pd.scratchpad_size:
            args = dict(args, DNNL_ARG_SCRATCHPAD=scratch(pd))
        for index, post in enumerate(self.all_post_ops()):
            if post[0] == "binary":
                _, alg, values, dims, key = post
                args = dict(args)
                args[binary_post_op_arg(self.d, index)] = constant(self.d, self.network, key[0], key[1], values,
                                                                  Desc.plain(self.d, dims))
        prim.bind(args)
        return prim


def binary_post_op_arg(d, index: int) -> int:
    """DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1 (function-like macros in the header)."""
    return d.arg("DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE") * (index + 1) | d.arg("DNNL_ARG_SRC_1")


# --- constant tensors (weights) in the layout a primitive chose --------------------------
# Plans of one network (the daemon's pool of instances, a reshape to another batch)
# share them: keyed by the IR network, the layer and the blob, then by layout.
# (IR networks are unhashable dataclasses: keyed by id, dropped when the network goes)
_CONSTANTS: dict[int, dict] = {}
_CONSTANTS_LOCK = threading.Lock()


def constant(d, network, layer_id: int, name: str, values: np.ndarray, desc: Desc) -> Memory:
    """`values` (plain layout of desc.dims) reordered into `desc`, made once per network."""
    with _CONSTANTS_LOCK:
        per_net = _CONSTANTS.get(id(network))
        if per_net is None:
            per_net = _CONSTANTS[id(network)] = {}
            weakref.finalize(network, _CONSTANTS.pop, id(network), None)
        entries = per_net.setdefault((layer_id, name), [])
        for known, memory in entries:
            if known == desc:
                return memory
        values = np.ascontiguousarray(values, dtype=np.float32).reshape(desc.dims)
        source = Memory(d, Desc.plain(d, desc.dims), values)
        buffer = _aligned(desc.size)
        target = Memory(d, desc, buffer)
        with d.one_thread():  # (made and run on this thread alone: Dnnl.one_thread)
            prim = Primitive(d, reorder_pd(d, Attr(d), source.desc, desc))
            prim.bind({"DNNL_ARG_FROM": source, "DNNL_ARG_TO": target})
            stream = d.new_stream()
            prim.run(stream)
            d.check(d.lib.dnnl_stream_wait(stream), "waiting for a weights reorder")
        entries.append((desc, target))
        _release_mapped(values)
        return target


def _release_mapped(values: np.ndarray):
    """The IR's weights are views of the memory-mapped .bin: once oneDNN has its own
    copy, their pages leave this process's resident memory (the kernel reads them
    from the file again if the numpy kernel ever runs)."""
    base = values
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    if not isinstance(base, mmap.mmap) or not hasattr(base, "madvise"):
        return
    start = values.ctypes.data - np.frombuffer(base, np.uint8, count=1).ctypes.data
    page = mmap.PAGESIZE
    first = -(-start // page) * page
    last = (start + values.nbytes) // page * page
    if last > first:
        base.madvise(mmap.MADV_DONTNEED, first, last - first)


def _aligned(nbytes: int, align: int = 64) -> np.ndarray:
    """A float32 buffer of at least nbytes starting on an `align`-byte boundary."""
    raw = np.empty(nbytes + align, np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + nbytes].view(np.float32) if nbytes % 4 == 0 else raw[offset:offset + nbytes]


aligned_buffer = _aligned

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
"""
from __future__ import annotations

import mmap
import threading
import weakref

import numpy as np

from .primitives import Attr, Desc, Memory, Primitive, reorder_pd

OPS: dict[str, type] = {}


class Unsupported(Exception):
    """This layer (these attributes or shapes) has no oneDNN primitive here."""


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

    def __init__(self, step, kernel, d, network):
        self.step, self.kernel, self.d, self.network = step, kernel, d, network
        self.layer = step.layer
        self.post_ops: list = []
        self.pds: list = []

    def fuse(self, post_op) -> bool:
        if not self.accepts_post_ops:
            return False
        self.post_ops.append(post_op)
        return True

    def attr(self):
        return Attr(self.d, self.post_ops)

    def create(self, in_descs, in_shapes, out_shapes):
        raise NotImplementedError

    def bind(self, ins, outs, scratch) -> list:
        raise NotImplementedError

    def primitive(self, pd, args: dict, scratch) -> Primitive:
        prim = Primitive(self.d, pd)
        if pd.scratchpad_size:
            args = dict(args, DNNL_ARG_SCRATCHPAD=scratch(pd))
        prim.bind(args)
        return prim


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

"""Layout and shape ops: Concat, Split (Caffe Slice), Reshape, Flatten, Crop (the
catalog's three forms), Permute, Tile.

Split, Reshape, Flatten and Crop return views of their input (no copy); the plan
knows (`output_is_view`) and never lets a consumer write through them in place.
"""
from __future__ import annotations

import numpy as np

from ir.gather import gather_shape, take

from .base import Kernel, register


@register("Concat")
class Concat(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.axis = self.attrs["axis"]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        if not input_shapes:
            raise self.error("takes at least one input")
        first = list(input_shapes[0])
        axis = self.axis_in(self.axis, len(first))
        total = 0
        for s in input_shapes:
            if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis):
                raise self.error(f"inputs {', '.join(str(list(x)) for x in input_shapes)} differ outside the "
                                 f"concatenation axis {axis}")
            total += s[axis]
        first[axis] = total
        return [tuple(first)]

    def forward(self, inputs):
        if len(inputs) == 1:
            return [inputs[0].copy()]
        return [np.concatenate(inputs, axis=self.axis_in(self.axis, inputs[0].ndim))]


@register("Split", "Slice")
class Split(Kernel):
    output_is_view = True

    def __init__(self, layer):
        super().__init__(layer)
        self.axis = self.attrs["axis"]
        if not layer.outputs:
            raise self.error("has no output ports")
        self.n_out = len(layer.outputs)
        self.ir_sizes = None
        if layer.inputs and all(len(p.dims) == len(layer.inputs[0].dims) for p in layer.outputs):
            axis = self.axis_in(self.axis, len(layer.inputs[0].dims))
            self.ir_sizes = [p.dims[axis] for p in layer.outputs]
        self.sizes = None

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = list(input_shapes[0])
        axis = self.axis_in(self.axis, len(shape))
        dim = shape[axis]
        sizes = self.ir_sizes
        if sizes is None or sum(sizes) == 0:
            if dim % self.n_out:
                raise self.error(f"cannot split {dim} elements of axis {axis} into {self.n_out} equal parts")
            sizes = [dim // self.n_out] * self.n_out
        elif sum(sizes) != dim:
            if dim % sum(sizes):
                raise self.error(f"output sizes {sizes} along axis {axis} do not fit the input {shape}")
            sizes = [s * (dim // sum(sizes)) for s in sizes]
        self.sizes = sizes
        out = []
        for s in sizes:
            part = list(shape)
            part[axis] = s
            out.append(tuple(part))
        return out

    def forward(self, inputs):
        x = inputs[0]
        axis = self.axis_in(self.axis, x.ndim)
        if self.sizes is None:
            self.getMemoryShapes([x.shape])
        bounds = np.cumsum(self.sizes)[:-1]
        return list(np.split(x, bounds, axis=axis))


@register("Reshape")
class Reshape(Kernel):
    """`dim` is the output shape (0 copies an input dim, -1 is inferred); for an
    input batch other than the IR's, dim[0] is scaled with it."""
    output_is_view = True

    def __init__(self, layer):
        super().__init__(layer)
        self.dim = self.attrs["dim"]
        if self.dim is None:
            if not layer.outputs:
                raise self.error("has no 'dim' attribute and no output port dims")
            self.dim = list(layer.outputs[0].dims)
        self.axis = self.attrs["axis"]
        self.num_axes = self.attrs["num_axes"]
        self.ir_input = tuple(layer.inputs[0].dims) if layer.inputs else None
        self.out_shape = None

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = [int(v) for v in input_shapes[0]]
        rank = len(shape)
        start = self.axis + rank + 1 if self.axis < 0 else self.axis
        end = rank if self.num_axes == -1 else start + self.num_axes
        if not 0 <= start <= end <= rank:
            raise self.error(f"axis {self.axis} / num_axes {self.num_axes} do not fit a {rank}-D input")
        dims = list(self.dim)
        if (start == 0 and dims and dims[0] > 0 and self.ir_input and len(self.ir_input) == rank
                and tuple(shape[1:]) == self.ir_input[1:] and shape[0] != self.ir_input[0] and self.ir_input[0] > 0
                and (dims[0] * shape[0]) % self.ir_input[0] == 0):
            dims[0] = dims[0] * shape[0] // self.ir_input[0]  # another batch
        middle = []
        for i, d in enumerate(dims):
            if d == 0:
                if start + i >= rank:
                    raise self.error(f"dim 0 at position {i} copies an axis the input {shape} does not have")
                middle.append(shape[start + i])
            else:
                middle.append(d)
        out = shape[:start] + middle + shape[end:]
        total = int(np.prod(shape))
        if out.count(-1) > 1:
            raise self.error(f"dim {self.dim} has more than one -1")
        if -1 in out:
            known = int(np.prod([d for d in out if d != -1]))
            if known <= 0 or total % known:
                raise self.error(f"cannot reshape {shape} into {self.dim}")
            out[out.index(-1)] = total // known
        if int(np.prod(out)) != total:
            raise self.error(f"cannot reshape {shape} ({total} values) into {out}")
        self.out_shape = tuple(out)
        return [self.out_shape]

    def forward(self, inputs):
        x = inputs[0]
        if self.out_shape is None or int(np.prod(self.out_shape)) != x.size:
            self.getMemoryShapes([x.shape])
        return [x.reshape(self.out_shape)]


@register("Flatten")
class Flatten(Kernel):
    output_is_view = True

    def __init__(self, layer):
        super().__init__(layer)
        self.axis = self.attrs["axis"]
        self.end_axis = self.attrs["end_axis"]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = list(input_shapes[0])
        rank = len(shape)
        start = self.axis_in(self.axis, rank)
        end = self.axis_in(self.end_axis, rank)
        if end < start:
            raise self.error(f"end_axis {self.end_axis} is before axis {self.axis}")
        return [tuple(shape[:start] + [int(np.prod(shape[start:end + 1]))] + shape[end + 1:])]

    def forward(self, inputs):
        x = inputs[0]
        return [x.reshape(self.getMemoryShapes([x.shape])[0])]


@register("Crop")
class Crop(Kernel):
    """1: two inputs, axis + offset (sizes from input 1); 2: axis + offset + dim;
    3: axis + crop_begin + crop_end."""
    output_is_view = True

    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.axes = a["axis"]
        if a["crop_begin"] is not None or a["crop_end"] is not None:
            self.form = 3
            self.begin, self.end = a["crop_begin"], a["crop_end"]
            if self.begin is None or self.end is None:
                raise self.error("has only one of 'crop_begin' and 'crop_end'; both are needed")
            self._check_len(self.begin, "crop_begin")
            self._check_len(self.end, "crop_end")
        else:
            self.offset = a["offset"] or [0]
            if len(self.offset) == 1 and len(self.axes) > 1:
                self.offset = self.offset * len(self.axes)
            self._check_len(self.offset, "offset")
            self.dim = a["dim"]
            self.form = 2 if self.dim is not None else 1
            if self.form == 2:
                self._check_len(self.dim, "dim")
        if len(set(self.axes)) != len(self.axes):
            raise self.error(f"axis {self.axes} names an axis twice")

    def _check_len(self, values, name):
        if len(values) != len(self.axes):
            raise self.error(f"has {len(values)} values in {name!r} for {len(self.axes)} axes {self.axes}")

    def _slices(self, input_shapes):
        shape = list(input_shapes[0])
        rank = len(shape)
        if self.form == 1:
            self.expect_inputs(input_shapes, 2)
            ref = input_shapes[1]
            if len(ref) != rank:
                raise self.error(f"inputs {list(shape)} and {list(ref)} have different ranks")
        else:
            self.expect_inputs(input_shapes, (1, 2))
        slices = [slice(None)] * rank
        out = list(shape)
        for i, a in enumerate(self.axes):
            axis = self.axis_in(a, rank)
            if self.form == 3:
                begin, size = self.begin[i], shape[axis] - self.begin[i] - self.end[i]
            else:
                begin = self.offset[i]
                size = ref[axis] if self.form == 1 else self.dim[i]
            if begin < 0 or size <= 0 or begin + size > shape[axis]:
                raise self.error(f"cropping {size} values at offset {begin} does not fit axis {axis} of the "
                                 f"input {shape}")
            slices[axis] = slice(begin, begin + size)
            out[axis] = size
        return tuple(slices), tuple(out)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self._cached = (tuple(tuple(s) for s in input_shapes),) + self._slices(input_shapes)
        return [self._cached[2]]

    def forward(self, inputs):
        shapes = tuple(x.shape for x in inputs)
        if getattr(self, "_cached", None) is None or self._cached[0] != shapes:
            self.getMemoryShapes(list(shapes))
        return [inputs[0][self._cached[1]]]


@register("Permute", "Transpose")
class Permute(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.order = self.attrs["order"]

    def _order(self, rank):
        order = [o + rank if o < 0 else o for o in self.order]
        order += [a for a in range(rank) if a not in order]
        if sorted(order) != list(range(rank)):
            raise self.error(f"order {self.order} is not a permutation of {rank} axes")
        return order

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = input_shapes[0]
        return [tuple(shape[a] for a in self._order(len(shape)))]

    def forward(self, inputs):
        x = inputs[0]
        return [x.transpose(self._order(x.ndim)).copy()]  # always a new C-order array


@register("Tile")
class Tile(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.axis = self.attrs["axis"]
        self.tiles = self.attrs["tiles"]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = list(input_shapes[0])
        axis = self.axis_in(self.axis, len(shape))
        shape[axis] *= self.tiles
        return [tuple(shape)]

    def forward(self, inputs):
        x = inputs[0]
        reps = [1] * x.ndim
        reps[self.axis_in(self.axis, x.ndim)] = self.tiles
        return [np.tile(x, reps)]


@register("Gather")
class Gather(Kernel):
    """np.take of the dictionary (blob `weights` of dims `dims`, or input 1 when the layer has two inputs)
    at input 0's indices along `axis`, each of the first `batch_dims` axes' entries at its own indices; an
    index that is no integer in [0, dims[axis]) fails the request, as TensorFlow's Gather does on a CPU."""

    def __init__(self, layer):
        super().__init__(layer)
        self.axis, self.batch_dims = self.attrs["axis"], self.attrs["batch_dims"]
        if self.batch_dims > self.axis:
            raise self.error(f"batch_dims {self.batch_dims} is past its axis {self.axis}")
        self.table = None  # (None: the dictionary is input 1)
        self.dims = None if self.attrs["dims"] is None else tuple(self.attrs["dims"])
        if len(layer.inputs) == 1:
            if self.dims is None:
                raise self.error("has one input, so its dictionary is the blob 'weights', but no 'dims' give its "
                                 "shape")
            self._check_axis(self.dims)
            self.table = self.blob("weights", size=int(np.prod(self.dims))).reshape(self.dims)

    def _check_axis(self, dims):
        if not 0 <= self.axis < len(dims):
            raise self.error(f"axis {self.axis} is no axis of its dictionary (dims {list(dims)})")

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1 if self.table is not None else 2)
        dims = self.dims if self.table is not None else tuple(input_shapes[1])
        self._check_axis(dims)
        indices = tuple(input_shapes[0])
        if tuple(indices[:self.batch_dims]) != tuple(dims[:self.batch_dims]):
            raise self.error(f"the first {self.batch_dims} dims of the indices {list(indices)} and of the dictionary "
                             f"{list(dims)} must be equal (batch_dims)")
        return [gather_shape(dims, self.axis, indices, self.batch_dims)]

    def forward(self, inputs):
        values = inputs[0]
        table = self.table if self.table is not None else inputs[1]
        with np.errstate(invalid="ignore"):  # (NaN or huge values: caught as no index below)
            indices = values.astype(np.int64)
        size = table.shape[self.axis]
        bad = (indices != values) | (indices < 0) | (indices >= size)
        if bad.any():
            first = values.ravel()[np.flatnonzero(bad)[0]]
            raise self.error(f"index {first:g} is not an integer in [0, {size}) (the dictionary's axis {self.axis}); "
                             f"{int(bad.sum())} of {bad.size} indices are not")
        return [take(table, indices, self.axis, self.batch_dims)]
